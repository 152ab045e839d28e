#!/usr/bin/env bash
# Points data/current at IDX files: the four in data/mnist/ when they are all there (.gz or raw:
# MNIST's published checksums, or Fashion-MNIST's, name them; other IDX files, a user's own
# KMNIST say, are used with a one-line note: the loader validates them), else MNIST downloaded
# into data/mnist/ (checksums verified), else offline Fashion-MNIST from FASHION_MNIST_DIR
# (default: Debian's dataset-fashion-mnist). Needs no library; deletes only its own partial
# downloads, never a file it did not download. Run by `make data`; tested by tests/cli/data.sh.
set -euo pipefail
cd "$(dirname "$0")"

MIRRORS=(
  "https://ossci-datasets.s3.amazonaws.com/mnist"
  "https://storage.googleapis.com/cvdf-datasets/mnist"
)
NAMES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
FASHION=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}

# The file of NAME in data/mnist/ (.gz first), or nothing.
present() { local n; for n in "mnist/$1.gz" "mnist/$1"; do [ -s "$n" ] && { echo "$n"; return 0; }; done; return 0; }
# MNIST's published checksum of the .gz (data/mnist.md5).
mnist_gz() { [ "${1%.gz}" != "$1" ] && (cd mnist && grep " $(basename "$1")\$" ../mnist.md5 | md5sum -c --status -); }
# Which data set the uncompressed bytes are (data/known.md5), or nothing.
known_as() {
  local sum
  sum=$( (gzip -dc -f <"$1" 2>/dev/null || true) | md5sum | cut -d' ' -f1)
  awk -v s="$sum" -v n="$2" '$1 == s && $2 == n { $1 = ""; $2 = ""; sub(/^ +/, ""); print; exit }' known.md5
}

fetch() {  # fetch NAME: each mirror in turn; keeps only a download whose checksum matches
  local f=$1.gz url
  for url in "${MIRRORS[@]}"; do
    if curl -fsSL --connect-timeout 10 --max-time 300 -o "mnist/$f.part" "$url/$f" 2>/dev/null &&
       (cd mnist && grep " $f\$" ../mnist.md5 | sed 's/\.gz$/.gz.part/' | md5sum -c --status -); then
      mv "mnist/$f.part" "mnist/$f"
      return 0
    fi
    [ -s "mnist/$f.part" ] && echo "data: checksum mismatch for $f from $url (download discarded)" >&2
    rm -f "mnist/$f.part"
  done
  return 1
}

mkdir -p mnist
have=() missing=()
for n in "${NAMES[@]}"; do
  f=$(present "$n")
  if [ -n "$f" ]; then have+=("$f"); else missing+=("$n"); fi
done

# Some files but not all four: downloading MNIST for the others would mix data sets unless the
# files there are MNIST's own.
if [ ${#have[@]} -gt 0 ] && [ ${#missing[@]} -gt 0 ]; then
  for f in "${have[@]}"; do
    mnist_gz "$f" && continue
    echo "data: error: data/mnist/ has $(basename "$f") but not ${missing[*]}: add the missing IDX files (.gz or raw), or move data/mnist/ away" >&2
    exit 1
  done
fi
if [ ${#missing[@]} -gt 0 ] && command -v curl >/dev/null 2>&1; then
  for n in "${missing[@]}"; do fetch "$n" || break; done
fi

all=yes
for n in "${NAMES[@]}"; do [ -n "$(present "$n")" ] || all=no; done
if [ "$all" = yes ]; then
  mnist=yes what=''
  for n in "${NAMES[@]}"; do
    f=$(present "$n")
    mnist_gz "$f" && continue
    mnist=no
    k=$(known_as "$f" "$n")
    [ "$what" = "${k:-?}" ] || what=$([ -z "$what" ] && echo "${k:-?}" || echo mixed)
  done
  ln -sfn mnist current
  if [ "$mnist" = yes ]; then
    echo "data: MNIST ready in data/mnist (checksums verified); data/current -> mnist"
  elif [ "$what" != '?' ] && [ "$what" != mixed ]; then
    echo "data: data/mnist holds $what (checksums match); data/current -> mnist"
  else
    echo "data: note: data/mnist holds IDX files whose checksums are neither MNIST's nor Fashion-MNIST's: used as they are (the loader checks them); data/current -> mnist"
  fi
  exit 0
fi

if [ -d "$FASHION" ] && [ -s "$FASHION/train-images-idx3-ubyte.gz" ]; then
  ln -sfn "$FASHION" current
  echo "data: MNIST could not be downloaded (offline?); using Fashion-MNIST from $FASHION instead."
  echo "data: data/current -> $FASHION (expect ~0.87-0.88 test precision, not MNIST's ~0.98)"
  exit 0
fi

echo "data: error: MNIST could not be downloaded (missing: ${missing[*]}) and FASHION_MNIST_DIR ($FASHION) has no Fashion-MNIST: put the four IDX files ({train,t10k}-{images-idx3,labels-idx1}-ubyte, .gz or raw) in data/mnist/, or set FASHION_MNIST_DIR to a directory of them" >&2
exit 1
