#!/usr/bin/env bash
# Installs the Debian packages Ferrite needs to build, test and run its demo.
# Used by demo.sh and test.sh; does nothing when everything is present.
set -euo pipefail
pkgs=(cmake make gcc pkg-config libpmem2-dev e2fsprogs)
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
