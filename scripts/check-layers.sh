#!/usr/bin/env bash
# Refuses an include that goes up or across the layers (README, "Layers"):
#   util -> persist -> space -> meta -> vfs -> engines (fs, tier) ->
#   front ends (api, preload, fuse)
# Each folder of src/ may include the folders listed for it and the public
# ferrite.h; the two engines never include each other, and the front ends
# other than api (the C API's dispatch) reach the engines through ferrite.h
# only. Run by the build before anything is compiled; prints each offending
# include and exits 1.
set -euo pipefail
src=${1:?usage: check-layers.sh SRC_DIR}
declare -A allowed=(
	[util]="util"
	[persist]="util persist"
	[space]="util persist space"
	[meta]="util persist space meta"
	[vfs]="util persist space meta vfs"
	[fs]="util persist space meta vfs fs"
	[tier]="util persist space meta vfs tier"
	[api]="util persist space meta vfs fs tier api"
	[preload]="util preload"
	[fuse]="util fuse"
)
bad=0
for dir in "$src"/*/; do
	layer=$(basename "$dir")
	if [ -z "${allowed[$layer]+x}" ]; then
		echo "check-layers: src/$layer is in no layer (add it to scripts/check-layers.sh)" >&2
		bad=1
		continue
	fi
	while IFS=: read -r file line inc; do
		target=${inc#*\"}
		target=${target%%\"*}
		case "$target" in
		*/*) ;;
		*) continue ;; # ferrite.h or a header of its own folder
		esac
		to=${target%%/*}
		case " ${allowed[$layer]} " in
		*" $to "*) ;;
		*)
			echo "check-layers: ${file#"$src"/}:$line includes \"$target\": src/$layer may not include src/$to" >&2
			bad=1
			;;
		esac
	done < <(grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir"*.[ch] 2>/dev/null || true)
done
exit $bad
