#!/usr/bin/env python3
"""Each run's time an epoch from its per-epoch record: the median of epochs FIRST..E in ms.

    python3 bench/epoch_medians.py [--first N] FILE...

FILE is nn_train's --metrics CSV (the `seconds` column, one row an epoch) or a peer's log
(bench/peer_jax.py, bench/peer_torch.py: its `epoch_seconds:` line). FIRST defaults to 2 (epoch
1, the warm-up, left out; a run of one epoch gives epoch 1). Prints one line a file:

    FILE  MEDIAN_MS  (epochs FIRST-E: S1 S2 ... seconds)

These are the medians docs/performance.md's tables give; each table's provenance line names the
files. Exit status 1 when a file has no epoch times.
"""
import csv
import statistics
import sys


def epoch_seconds(path):
    with open(path, newline="") as f:
        text = f.read()
    for line in text.splitlines():
        if line.startswith("epoch_seconds:"):
            return [float(x) for x in line.split(":", 1)[1].split()]
    rows = list(csv.DictReader(text.splitlines()))
    if rows and "seconds" in rows[0]:
        return [float(r["seconds"]) for r in sorted(rows, key=lambda r: int(r["epoch"]))]
    return []


def main(argv):
    first = 2
    if len(argv) >= 2 and argv[0] == "--first":
        first = int(argv[1])
        argv = argv[2:]
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    status = 0
    for path in argv:
        secs = epoch_seconds(path)
        if not secs:
            print(f"{path}: no epoch times (neither a --metrics CSV nor an epoch_seconds: line)",
                  file=sys.stderr)
            status = 1
            continue
        lo = first if len(secs) >= first else 1
        used = secs[lo - 1:]
        print(f"{path}  {statistics.median(used) * 1000:.2f}  "
              f"(epochs {lo}-{len(secs)}: {' '.join(f'{s:g}' for s in used)} s)")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
