#!/usr/bin/env bash
# Gets the MNIST IDX files into data/mnist/ (primary mirror, then a fallback), verifies
# their published MD5 checksums (data/mnist.md5), and points data/current at them.
# Offline, it points data/current at Debian's Fashion-MNIST (package dataset-fashion-mnist,
# same IDX format) and says so. Run by `make data`; safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

MIRRORS=(
  "https://ossci-datasets.s3.amazonaws.com/mnist"
  "https://storage.googleapis.com/cvdf-datasets/mnist"
)
FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
       t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
FASHION=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}

verified() { [ -s "mnist/$1" ] && (cd mnist && grep " $1\$" ../mnist.md5 | md5sum -c --status -); }

fetch() {  # fetch <file>: try each mirror; keep only a file whose checksum matches
  local f=$1 url
  for url in "${MIRRORS[@]}"; do
    if curl -fsSL --connect-timeout 10 --max-time 300 -o "mnist/$f.part" "$url/$f" 2>/dev/null \
       && mv "mnist/$f.part" "mnist/$f" && verified "$f"; then
      return 0
    fi
    rm -f "mnist/$f.part"
    [ -f "mnist/$f" ] && ! verified "$f" && echo "data: checksum mismatch for $f from $url" >&2 && rm -f "mnist/$f"
  done
  return 1
}

mkdir -p mnist
ok=yes
for f in "${FILES[@]}"; do
  verified "$f" && continue
  if ! command -v curl >/dev/null 2>&1; then ok=no; break; fi
  fetch "$f" || { ok=no; break; }
done

if [ "$ok" = yes ]; then
  ln -sfn mnist current
  echo "data: MNIST ready in data/mnist (checksums verified); data/current -> mnist"
  exit 0
fi

if [ -d "$FASHION" ] && [ -s "$FASHION/train-images-idx3-ubyte.gz" ]; then
  ln -sfn "$FASHION" current
  echo "data: MNIST could not be downloaded (offline?); using Fashion-MNIST from $FASHION instead."
  echo "data: data/current -> $FASHION (expect ~0.87-0.88 test precision, not MNIST's ~0.98)"
  exit 0
fi

echo "data: error: MNIST could not be downloaded and Fashion-MNIST is not installed." >&2
echo "data: put the four MNIST IDX files (.gz or raw) in data/mnist/, or install dataset-fashion-mnist" >&2
exit 1
