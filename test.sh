#!/usr/bin/env bash
# Builds Ferrite and runs the whole test suite twice: an optimised build and
# an AddressSanitizer + UndefinedBehaviorSanitizer build. In between, the
# builds packagers and other developers make -- Release (-O3), the Debian
# packages (dpkg-buildpackage), clang -- each built in full under -Werror and
# run through a quick subset of the tests; the packages are also installed
# and smoke-tested. Installs the Debian packages it needs first.
# Exit status 0 means every test passed.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
jobs=$(nproc)

echo "== build (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
echo "== tests"
(cd build && ctest --output-on-failure -j2)

# The quick subset for the other builds (under a minute each): unit, API (pm
# and tiered), the CLI, both front ends, the crafted-pool and local-security
# cases, the hardening check, persistence models, the explorer's planted bugs
# and real programs through the shim.
quick_tests() {
	(cd "$1" && ctest --output-on-failure -j2 -L 'unit|api|cli|frontend|security|hardening' -LE long &&
		ctest --output-on-failure -j2 \
			-R '^(model_persist|crashtest[.]catches[.]|programs[.]shim$|fuzz[.]crafted$)')
}

echo "== build (Release, -O3) and quick tests"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j"$jobs"
quick_tests build-release

echo "== Debian packages (Debian's dpkg-buildflags, hardening=+all): quick tests, smoke test"
# dpkg-buildpackage builds as a packager does (debian/rules: hardening=+all,
# CPPFLAGS folded into CFLAGS for CMake), in a copy of the tree under
# build-deb/; the quick tests run in its build directory, then the packages
# are installed and checked from the installed files (and purged again).
DEB_BUILD_OPTIONS=nocheck scripts/build-packages.sh build-deb -j"$jobs"
quick_tests build-deb/src/obj-*/
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO scripts/package-smoke.sh build-deb/ferrite_*.deb build-deb/libferrite0_*.deb \
	build-deb/libferrite-dev_*.deb

echo "== build (clang, Release) and quick tests"
cmake -S . -B build-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-clang -j"$jobs"
quick_tests build-clang

echo "== build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFERRITE_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
echo "== tests under the sanitizers"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --output-on-failure -j2)
echo "== all tests passed"
