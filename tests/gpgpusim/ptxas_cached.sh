#!/usr/bin/env bash
# Stands in for ptxas where GPGPU-Sim asks it for the register use of every kernel of a binary
# (`ptxas --gpu-name=sm_N -v FILE.ptx --output-file /dev/null`, the report on stderr), at each
# start of a simulated program: about 30 s for the CUDA build's GEMMs, and test.sh starts a dozen
# processes of the same binaries. The same PTX text and arguments give the same report, so it is
# kept in GPGPUSIM_PTXAS_CACHE under the SHA-256 of both and replayed (with this call's file
# name); without that variable, or without a .ptx argument, the real ptxas runs as before.
# Set up by run.sh: PTXAS_REAL is the real ptxas.
# Either way the report is passed through `tidy`: GPGPU-Sim's parser of it (ptxinfo.y) knows no
# "N bytes cumulative stack size" (ptxas adds it where a kernel calls a function or spills, as
# the regblock GEMM does for sm_75), so that item is taken out of the "Used ..." lines; the
# stack frame is not part of what the simulator models.
set -uo pipefail
real=${PTXAS_REAL:?ptxas_cached.sh: PTXAS_REAL is not set}
cache=${GPGPUSIM_PTXAS_CACHE:-}
ptx=
for a in "$@"; do case $a in *.ptx) ptx=$a ;; esac; done
tidy() { sed -E 's/, [0-9]+ bytes cumulative stack size//'; }
# The tidied report is whole before this script exits: GPGPU-Sim reads it as soon as ptxas
# returns, and a report still streaming through a filter (a process substitution) reached it cut
# short, which ended the simulated program in an assertion about a kernel's maxntid.
if [ -z "$cache" ] || [ -z "$ptx" ] || [ ! -f "$ptx" ]; then
  err=$(mktemp "${TMPDIR:-/tmp}/ptxas.XXXXXX") || exit 2
  "$real" "$@" 2>"$err"
  rc=$?
  tidy <"$err" >&2
  rm -f "$err"
  exit "$rc"
fi
args=()
for a in "$@"; do if [ "$a" = "$ptx" ]; then args+=(FILE.ptx); else args+=("$a"); fi; done
key=$({ printf '%s\n' "${args[@]}"; cat "$ptx"; } | sha256sum | cut -c1-64)
if [ -f "$cache/$key.rc" ]; then
  awk -v f="$ptx" '{ gsub(/@PTX_FILE@/, f); print }' "$cache/$key.err" | tidy >&2
  exit "$(cat "$cache/$key.rc")"
fi
mkdir -p "$cache"
tmp=$(mktemp "$cache/.new.XXXXXX")
"$real" "$@" 2>"$tmp"
rc=$?
tidy <"$tmp" >&2
# Kept with the file's name replaced; written whole, then published (the .rc file last).
awk -v f="$ptx" '{ n = index($0, f); while (n > 0) { $0 = substr($0, 1, n - 1) "@PTX_FILE@" substr($0, n + length(f)); n = index($0, f) } print }' \
  "$tmp" >"$tmp.err" && mv "$tmp.err" "$cache/$key.err" && echo "$rc" >"$tmp.rc" && mv "$tmp.rc" "$cache/$key.rc"
rm -f "$tmp" "$tmp.err" "$tmp.rc"
exit "$rc"
