#!/usr/bin/env bash
# Builds Ferrite and runs the whole test suite twice: an optimised build and
# an AddressSanitizer + UndefinedBehaviorSanitizer build. Installs the Debian
# packages it needs first. Exit status 0 means every test passed.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
jobs=$(nproc)

echo "== build (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
echo "== tests"
(cd build && ctest --output-on-failure -j2)

echo "== build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFERRITE_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
echo "== tests under the sanitizers"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --output-on-failure -j2)
echo "== all tests passed"
