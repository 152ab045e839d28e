#!/usr/bin/env python3
"""The rows of kernels/gemm/auto_table.h (--gemm auto, --persistent auto), from the measurements.

    python3 bench/auto_table.py           print the rows the committed CSVs give
    python3 bench/auto_table.py --check   compare them with kernels/gemm/auto_table.h
    python3 bench/auto_table.py --self-test
    python3 bench/auto_table.py --run DIR [--class 9.0]
                                          the rows of a newer GPU run: the table_* CSVs that
                                          tests/cuda/gpu_session.sh writes (its "0w" block)

Provenance: bench/results/h200-2026-11-28c/ (session/, sweep/, check/), nn_train's --metrics
CSVs at one rank on an NVIDIA H200 (compute capability 9.0).

A file's name says what ran (docs/performance.md, "The GPU step", lists the same groups); its time is the median of
epochs 2-4 (bench/epoch_medians.py). Per shape and configuration the fastest run counts:
gemm is the faster fused-step variant, persistent whether the persistent step beat it.
--check exits 1 when the header's rows differ from these, 0 when they agree.
"""
import glob
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from epoch_medians import epoch_seconds  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "bench", "results", "h200-2026-11-28c")
HEADER = os.path.join(ROOT, "kernels", "gemm", "auto_table.h")
CLASS = (9, 0)  # NVIDIA H200

# Configuration -> file-name patterns (under RUN), each ending in _H_B[_rN].csv.
GROUPS = {
    "gemm4": ["session/pdl_off_*.csv", "sweep/sweep_pdl0_*.csv", "sweep/sweep_gemm4_*.csv"],
    "gemm5": ["sweep/sweep_gemm5_*.csv", "session/gemm5w_mma_*.csv"],
    "persistent": ["session/persist2_train_*.csv", "session/peer_ours_persistent_*.csv",
                   "sweep/sweep_tile_*.csv", "check/check_tile_*.csv"],
}
# The same configurations as a gpu_session.sh run's table_* steps name them (one folder).
RUN_GROUPS = {
    "gemm4": ["table_gemm4_*.csv"],
    "gemm5": ["table_gemm5_*.csv"],
    "persistent": ["table_persist2_*.csv"],
}
SHAPE = re.compile(r"_(\d+)_(\d+)(?:_r\d+)?\.csv$")
ROW = re.compile(r"^\s*\{\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(true|false),\s*([\d.]+),"
                 r"\s*([\d.]+),\s*([\d.]+)\s*\},\s*$")


def median_ms(path):
    secs = epoch_seconds(path)
    used = secs[1:] if len(secs) >= 2 else secs  # epoch 1, the warm-up, left out
    return round(statistics.median(used) * 1000, 2)


def fastest(run_dir, groups=None):
    """{(H, B): {config: ms}}: each configuration's fastest run at each shape."""
    best = {}
    for config, patterns in (groups or GROUPS).items():
        for pattern in patterns:
            for path in glob.glob(os.path.join(run_dir, pattern)):
                m = SHAPE.search(path)
                if not m:
                    continue
                shape = (int(m.group(1)), int(m.group(2)))
                ms = median_ms(path)
                cell = best.setdefault(shape, {})
                cell[config] = min(ms, cell.get(config, ms))
    return best


def derive(run_dir=RUN, groups=None, cls=CLASS):
    """The table's rows, sorted by shape: (major, minor, H, B, gemm, persistent, g4, g5, p)."""
    rows = []
    for (h, b), cell in sorted(fastest(run_dir, groups).items()):
        if "gemm4" not in cell or "gemm5" not in cell:
            continue  # a shape needs both fused variants measured to choose
        g4, g5 = cell["gemm4"], cell["gemm5"]
        gemm, fused = (5, g5) if g5 < g4 else (4, g4)
        p = cell.get("persistent", 0.0)
        rows.append((*cls, h, b, gemm, bool(p) and p < fused, g4, g5, p))
    return rows


def shown(row):
    a, b, h, bb, g, p, g4, g5, pm = row
    num = lambda x: f"{x:g}"
    return f"  {{{a}, {b}, {h}, {bb}, {g}, {'true' if p else 'false'}, {num(g4)}, {num(g5)}, {num(pm)}}},"


def header_rows(path=HEADER):
    rows = []
    with open(path) as f:
        for line in f:
            m = ROW.match(line)
            if m:
                v = m.groups()
                rows.append((int(v[0]), int(v[1]), int(v[2]), int(v[3]), int(v[4]), v[5] == "true",
                             float(v[6]), float(v[7]), float(v[8])))
    return rows


def check():
    want, got = derive(), header_rows()
    if not want:
        print(f"auto-table: FAIL no rows derived from {RUN}")
        return 1
    if got != want:
        print("auto-table: FAIL kernels/gemm/auto_table.h differs from the measurements; their rows:")
        for r in want:
            print(shown(r))
        print("the header's:")
        for r in got:
            print(shown(r))
        return 1
    print(f"auto-table: {len(want)} rows of kernels/gemm/auto_table.h agree with {os.path.relpath(RUN, ROOT)}")
    return 0


def self_test():
    """The rule on a made-up run: 5 faster, the persistent step faster only at the first shape."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        for sub in ("session", "sweep", "check"):
            os.makedirs(os.path.join(d, sub))
        def put(name, ms):
            with open(os.path.join(d, name), "w") as f:
                f.write("epoch,loss,train_acc,val_acc,seconds,images_per_s\n")
                for e, s in enumerate([0.1, ms / 1000, ms / 1000, ms / 1000], 1):
                    f.write(f"{e},1,0,0,{s},1\n")
        put("session/pdl_off_64_10.csv", 9.0)
        put("sweep/sweep_pdl0_64_10_r1.csv", 8.0)
        put("sweep/sweep_gemm5_64_10.csv", 8.5)
        put("check/check_tile_8x8_64_10.csv", 3.0)
        put("session/pdl_off_128_20.csv", 5.0)
        put("session/gemm5w_mma_128_20.csv", 4.0)
        put("session/gemm5w_wgmma_128_20.csv", 1.0)  # opt-in kernel: not counted
        put("session/persist2_train_128_20.csv", 6.0)
        put("session/pdl_off_32_5.csv", 1.0)  # no --gemm 5 run: no row
        got = derive(d)
    want = [(9, 0, 64, 10, 4, True, 8.0, 8.5, 3.0), (9, 0, 128, 20, 5, False, 5.0, 4.0, 6.0)]
    ok = got == want
    print(f"auto-table self-test: {'ok' if ok else 'FAIL ' + repr(got)}")
    return 0 if ok else 1


def main(argv):
    if argv == ["--check"]:
        return check()
    if argv == ["--self-test"]:
        return self_test()
    if argv[:1] == ["--run"] and len(argv) in (2, 4) and (len(argv) == 2 or argv[2] == "--class"):
        cls = tuple(int(x) for x in argv[3].split(".")) if len(argv) == 4 else CLASS
        rows = derive(argv[1], RUN_GROUPS, cls)
        if not rows:
            print(f"auto-table: no shape of {argv[1]} has both table_gemm4_* and table_gemm5_* runs", file=sys.stderr)
            return 1
        for r in rows:
            print(shown(r))
        return 0
    if argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for r in derive():
        print(shown(r))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
