#!/usr/bin/env bash
# Builds Ferrite and runs the whole test suite twice: an optimised build and
# an AddressSanitizer + UndefinedBehaviorSanitizer build. In between, the
# builds packagers and other developers make -- Release (-O3), Debian's
# dpkg-buildflags, clang -- each built in full under -Werror and run through
# a quick subset of the tests. Installs the Debian packages it needs first.
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

echo "== build (Debian's dpkg-buildflags, hardening=+all) and quick tests"
# As debhelper builds a package (CPPFLAGS folded into CFLAGS, for CMake).
deb() { DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$1"; }
cmake -S . -B build-deb -DCMAKE_BUILD_TYPE=None \
	-DCMAKE_C_FLAGS="$(deb CFLAGS) $(deb CPPFLAGS)" -DCMAKE_EXE_LINKER_FLAGS="$(deb LDFLAGS)" \
	-DCMAKE_SHARED_LINKER_FLAGS="$(deb LDFLAGS)" -DCMAKE_MODULE_LINKER_FLAGS="$(deb LDFLAGS)" >/dev/null
cmake --build build-deb -j"$jobs"
quick_tests build-deb

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
