#!/usr/bin/env python3
"""The phase table of `.ci/run` logs as Markdown: one column a run, one row a phase.

    python3 bench/ci_phase_table.py LOG...

LOG is the whole output of one `bash .ci/run` (plain or .gz), named ci-COMMIT[-LABEL].log[.gz];
the column is headed by COMMIT and LABEL. Each row is a phase of the table `.ci/run` prints at
its end (`== ci: phase times ==`), in seconds, with the share of idle CPU in parentheses;
the last row is the total and whether the run passed. docs/performance.md's build and test
table is this script's output for bench/results/build-times/ci-*.log.gz. Exit status 1 when a
log holds no phase table.
"""
import gzip
import os
import re
import sys


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        return f.read()


def phases(text):
    """[(phase, seconds, idle or '', status)] and the total line's (seconds, status)."""
    start = text.rfind("== ci: phase times ==")
    if start < 0:
        return None, None
    rows, total = [], None
    for line in text[start:].splitlines()[2:]:
        m = re.match(r"\s+(\S+)\s+(\d+)\s+\d+:\d\d\s+(\S*)\s+(.*)$", line)
        if not m:
            break
        name, secs, idle, status = m.group(1), int(m.group(2)), m.group(3), m.group(4).strip()
        if name == "total":
            total = (secs, idle if status == "" else status)
            break
        rows.append((name, secs, idle, status))
    return rows, total


def label(path):
    base = os.path.basename(path)
    base = re.sub(r"\.log(\.gz)?$", "", base)
    return base[3:] if base.startswith("ci-") else base


def main(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = []
    for path in argv:
        rows, total = phases(read(path))
        if rows is None:
            print(f"{path}: no `.ci/run` phase table", file=sys.stderr)
            return 1
        runs.append((label(path), rows, total))
    names = []
    for _, rows, _ in runs:
        for r in rows:
            if r[0] not in names:
                names.append(r[0])
    print("| phase | " + " | ".join(f"`{lab}`" for lab, _, _ in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for name in names:
        cells = []
        for _, rows, _ in runs:
            hit = [r for r in rows if r[0] == name]
            if not hit:
                cells.append("-")
                continue
            _, secs, idle, status = hit[0]
            cell = f"{secs}" + (f" ({idle} idle)" if idle not in ("", "-") else "")
            if status != "ok":
                cell += f" {status}"
            cells.append(cell)
        print(f"| {name} | " + " | ".join(cells) + " |")
    cells = []
    for _, _, total in runs:
        secs, status = total
        cells.append(f"**{secs}** ({secs // 60}:{secs % 60:02d}, {status})")
    print("| total | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
