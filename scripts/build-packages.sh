#!/usr/bin/env bash
# build-packages.sh OUT -- builds the Debian packages (debian/) with
# `dpkg-buildpackage -us -uc -b` from a copy of the source tree in OUT/src,
# so the tree itself gets no obj-*/ or debian/tmp/ and no .deb lands beside
# it: the packages are written to OUT. The build directory,
# OUT/src/obj-<triplet>, is kept for tests, and the build's output goes to
# OUT/build.log (its end is shown if it fails). Extra dpkg-buildpackage
# options may follow OUT; DEB_BUILD_OPTIONS is honoured (test.sh: nocheck).
set -euo pipefail
out=$(realpath -m "$1")
shift
cd "$(dirname "$0")/.."
rm -rf "$out"
mkdir -p "$out/src"
# The tracked and the new (not ignored) files, as they are now; a tree
# without git: everything but the build directories.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		tar --null -T - -cf - | tar -xf - -C "$out/src"
	# The copy is a repository of its own with those files as HEAD: tests
	# run in its build directory read the tree with `git archive HEAD`.
	git -C "$out/src" init -q
	git -C "$out/src" add -A
	git -C "$out/src" -c user.name=build-packages -c user.email=build-packages@localhost \
		commit -q --no-gpg-sign --no-verify -m "the tree build-packages.sh built"
else
	tar --exclude='./build*' --exclude='./obj-*' --exclude=./.git -cf - . | tar -xf - -C "$out/src"
fi
echo "dpkg-buildpackage -us -uc -b $* (log: $out/build.log)"
if ! (cd "$out/src" && dpkg-buildpackage -us -uc -b "$@") >"$out/build.log" 2>&1; then
	tail -n 60 "$out/build.log" >&2
	echo "build-packages.sh: dpkg-buildpackage failed; the whole log is $out/build.log" >&2
	exit 1
fi
ls "$out"/*.deb
