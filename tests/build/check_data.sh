#!/usr/bin/env bash
# data/get_mnist.sh in a scratch copy, offline (no curl on PATH): a user's own IDX files are used
# and never deleted (known checksums named, unknown ones used with one note), a partial set is
# refused in one line naming the missing file, the fallback and its error name FASHION_MNIST_DIR.
# Run by make test-build; prints `data: N passed, M failed`.
set -uo pipefail
src=$(cd "$(dirname "$0")/../../data" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
passes=0 fails=0
ok() { if eval "$2"; then echo "ok   $1"; passes=$((passes + 1)); else echo "FAIL $1"; fails=$((fails + 1)); fi; }
# An IDX set of our own: 2 images of 28x28, 2 labels.
idx() {  # idx DIR
  mkdir -p "$1"
  for s in train t10k; do
    printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c' >"$1/$s-images-idx3-ubyte"
    head -c 1568 /dev/zero >>"$1/$s-images-idx3-ubyte"
    printf '\x00\x00\x08\x01\x00\x00\x00\x02\x03\x07' >"$1/$s-labels-idx1-ubyte"
  done
}
nocurl=$tmp/bin; mkdir -p "$nocurl"
for t in bash cat gzip md5sum grep awk sed cut mkdir ln rm mv head basename dirname env; do ln -s "$(command -v $t)" "$nocurl/$t"; done
run() { (cd "$1" && PATH=$nocurl FASHION_MNIST_DIR=${2:-/nonexistent} bash get_mnist.sh 2>&1); }
new() { rm -rf "$tmp/d"; mkdir -p "$tmp/d"; cp "$src/get_mnist.sh" "$src/mnist.md5" "$src/known.md5" "$tmp/d/"; }

new; idx "$tmp/d/mnist"; out=$(run "$tmp/d"); rc=$?
ok "own IDX files: used with one note, exit 0" '[ $rc = 0 ] && [ "$(grep -c note <<<"$out")" = 1 ] && [ "$(readlink "$tmp/d/current")" = mnist ]'
ok "own IDX files: all four still there, unchanged" '[ "$(ls "$tmp/d/mnist" | wc -l)" = 4 ] && cmp -s "$tmp/d/mnist/t10k-labels-idx1-ubyte" <(printf "\x00\x00\x08\x01\x00\x00\x00\x02\x03\x07")'
rm "$tmp/d/mnist/train-labels-idx1-ubyte"; out=$(run "$tmp/d"); rc=$?
ok "three of four: one error line naming the missing file, exit 1, nothing deleted" \
  '[ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "not train-labels-idx1-ubyte" <<<"$out" && [ "$(ls "$tmp/d/mnist" | wc -l)" = 3 ]'
new; out=$(run "$tmp/d"); rc=$?
ok "nothing offline, no fallback: one error line naming FASHION_MNIST_DIR, exit 1" '[ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q FASHION_MNIST_DIR <<<"$out"'
idx "$tmp/fashion"; gzip -k "$tmp/fashion"/*; out=$(run "$tmp/d" "$tmp/fashion"); rc=$?
ok "offline fallback: data/current -> FASHION_MNIST_DIR" '[ $rc = 0 ] && [ "$(readlink "$tmp/d/current")" = "$tmp/fashion" ]'
if [ -s /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ]; then
  new; mkdir -p "$tmp/d/mnist"; cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$tmp/d/mnist/"; gzip -d "$tmp/d/mnist/t10k-labels-idx1-ubyte.gz"
  out=$(run "$tmp/d"); rc=$?
  ok "Fashion-MNIST copied in by hand (one file raw): named by its checksums" '[ $rc = 0 ] && grep -q "holds Fashion-MNIST" <<<"$out"'
fi
echo "data: $passes passed, $fails failed"
[ "$fails" = 0 ]
