#!/usr/bin/env bash
# Installs the Debian packages Ferrite needs to build, test and run its demo.
# Used by demo.sh and test.sh; does nothing when everything is present.
# Besides the build tools: libfuse3 for `ferrite mount`, and the real programs
# the front-end tests run (sqlite3, db_bench, fio, postmark, coreutils, and for
# programs that fork under `ferrite run`: git, rsync, python3 -m venv, PostgreSQL);
# test.sh's other builds need clang, dpkg-dev (dpkg-buildflags) and binutils
# (readelf, for the hardening check); the Debian packages debhelper
# (dpkg-buildpackage) and help2man (the man pages), their smoke test man-db;
# `ferrite bench` draws its plot with gnuplot (gnuplot-nox: no X libraries).
set -euo pipefail
pkgs=(cmake make gcc clang dpkg-dev binutils pkg-config libpmem2-dev e2fsprogs libfuse3-dev fuse3
	sqlite3 rocksdb-tools fio postmark tar findutils coreutils git zip unzip xz-utils
	rsync python3 python3-venv postgresql postgresql-contrib
	debhelper help2man man-db gnuplot-nox)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing: ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
