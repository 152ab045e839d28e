#!/usr/bin/env python3
"""The GEMM variant registry against everything that lists the variants.

The registry is kernels/gemm/variants.h (one X(NUMBER, NAME, fused|plain, "HELP") row per
variant; fused: it has the fused step's epilogue). Every row is a variant with its
launcher. Checked against it:
  1. the registry itself: rows numbered 0, 1, 2, ... in order, names unique identifiers;
  2. the sources: every live variant N has kernels/gemm/N_NAME.cu defining gemm_NAME, and every
     kernels/gemm/N_*.cu belongs to a registered N (a file without its registry line);
  3. nn_train --help: the --gemm line reads "GEMM: " + "N HELP" for every row, joined by ", "
     (retired rows with " (retired)"), then "; auto: ..." (--gemm auto), run through
     slurm/mpirun.sh with NN_MPIRUN=env;
  4. kernels/gemm/README.md: its "## Variants" table has one row "| N | `NAME` | ..." per row;
  5. gemm_bench --list: one "N NAME" line per live row.
Usage (from anywhere; the repository is the one this file is in):
    python3 tests/build/check_gemm_registry.py NN_TRAIN_BINARY GEMM_BENCH_BINARY
As root, Open MPI's OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 must be set (the
Makefile's MPI_ENV). Prints one line per check and `gemm-registry: N passed, M failed`; exit
status 1 when any check fails, 2 on bad usage.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEMM = os.path.join(ROOT, "kernels", "gemm")
ROW = re.compile(r'^\s*X\(\s*(\d+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)\s*\\?\s*$')

results = []


def check(ok, what, why=""):
    results.append(ok)
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not why else ":\n    " + why.replace("\n", "\n    ")))


def registry():
    """[(number, name, live, help)] from variants.h, or exits on a row it cannot read."""
    rows, bad = [], []
    path = os.path.join(GEMM, "variants.h")
    for n, line in enumerate(open(path), 1):
        if not re.match(r"\s*X\(", line):
            continue
        m = ROW.match(line)
        if not m or m.group(3) not in ("fused", "plain"):
            bad.append(f"{path}:{n}: {line.strip()}")
            continue
        rows.append((int(m.group(1)), m.group(2), True, m.group(4).replace('\\"', '"')))
    if bad or not rows:
        print("FAIL the registry: " + ("rows not of the form X(N, name, fused|plain, \"help\"):\n    " +
                                       "\n    ".join(bad) if bad else f"no X(...) row in {path}"))
        print("gemm-registry: 0 passed, 1 failed")
        sys.exit(1)
    return rows


def check_registry(rows):
    numbers = [r[0] for r in rows]
    names = [r[1] for r in rows]
    dup = sorted({x for x in names if names.count(x) > 1})
    check(numbers == list(range(len(rows))) and not dup,
          f"registry kernels/gemm/variants.h: {len(rows)} rows numbered 0..{len(rows) - 1}, names unique",
          f"numbers in order {numbers}" + (f", duplicate names {dup}" if dup else ""))


def check_sources(rows):
    problems = []
    registered = {r[0] for r in rows}
    for number, name, live, _ in rows:
        path = os.path.join(GEMM, f"{number}_{name}.cu")
        if not live:
            continue
        if not os.path.exists(path):
            problems.append(f"variant {number} ({name}): no kernels/gemm/{number}_{name}.cu")
        elif not re.search(r"\bvoid\s+gemm_" + name + r"\s*\(", open(path).read()):
            problems.append(f"kernels/gemm/{number}_{name}.cu does not define gemm_{name}")
    for f in sorted(os.listdir(GEMM)):
        m = re.match(r"(\d+)_.*\.cu$", f)
        if m and int(m.group(1)) not in registered:
            problems.append(f"kernels/gemm/{f}: variant {m.group(1)} has no registry row in variants.h")
    check(not problems, "sources: kernels/gemm/N_name.cu defines gemm_name for every live row, "
          "no N_*.cu without a row", "\n".join(problems))


def expected_help(rows):
    return ", ".join(f"{n} {h}" + ("" if live else " (retired)") for n, _, live, h in rows)


def check_help(rows, nn_train):
    env = dict(os.environ)
    env.setdefault("NN_MPIRUN", "env")
    cmd = [os.path.join(ROOT, "slurm", "mpirun.sh"), nn_train, "--help"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    idx = [i for i, l in enumerate(lines) if re.match(r"\s*--gemm\b", l)]
    if p.returncode != 0 or len(idx) != 1:
        check(False, "nn_train --help has one --gemm line",
              f"{' '.join(cmd)}: exit {p.returncode}, {len(idx)} --gemm line(s)\n{(p.stdout + p.stderr)[-800:]}")
        return
    # The description, with any continuation lines a narrow terminal wraps it into.
    text = lines[idx[0]]
    for l in lines[idx[0] + 1:]:
        if not l.startswith(" ") or l.lstrip().startswith("-"):
            break
        text += " " + l.strip()
    m = re.search(r"GEMM: (.*?)\s*(\[default: [^\]]*\])?\s*$", text)
    got = m.group(1) if m else None
    # "; auto: ..." after the rows: what --gemm auto picks (kernels/gemm/auto_table.h).
    if got is not None and "; auto: " in got:
        got = got[:got.index("; auto: ")]
    want = expected_help(rows)
    missing = [f"{n} {h}" for n, _, _, h in rows if got is None or f"{n} {h}" not in got]
    check(got == want, "nn_train --help: --gemm lists every registry row",
          f"--help says: {text.strip()}\nregistry says: GEMM: {want}" +
          (f"\nnot in --help: {', '.join(missing)}" if missing else ""))


def check_readme(rows):
    path = os.path.join(GEMM, "README.md")
    section, table = False, {}
    for line in open(path):
        if line.startswith("## "):
            section = line.strip() == "## Variants"
            continue
        m = re.match(r"\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|(.*)", line) if section else None
        if m:
            table.setdefault(int(m.group(1)), []).append((m.group(2), "retired" in m.group(3)))
    problems = []
    for n, name, live, _ in rows:
        got = table.get(n, [])
        if not got:
            problems.append(f"variant {n} ({name}): no row '| {n} | `{name}` | ...' in the table")
        elif len(got) > 1 or got[0][0] != name:
            problems.append(f"variant {n}: the table says {', '.join(g[0] for g in got)}, the registry {name}")
        elif got[0][1] == live:
            problems.append(f"variant {n} ({name}): the registry says {'live' if live else 'retired'}, "
                            f"the table row {'says' if got[0][1] else 'does not say'} retired")
    extra = sorted(set(table) - {r[0] for r in rows})
    if extra:
        problems.append(f"table rows for unregistered variants: {extra}")
    check(not problems, "kernels/gemm/README.md: the '## Variants' table has one row per registry row",
          "\n".join(problems))


def check_bench(rows, bench):
    p = subprocess.run([bench, "--list"], capture_output=True, text=True, timeout=60)
    got = [tuple(l.split()) for l in p.stdout.splitlines() if l.strip()]
    want = [(str(n), name) for n, name, live, _ in rows if live]
    check(p.returncode == 0 and got == want, f"{os.path.basename(bench)} --list: one 'N name' per live row",
          f"exit {p.returncode}; --list says {[' '.join(g) for g in got]}, "
          f"the registry's live rows {[' '.join(w) for w in want]}" + (f"\n{p.stderr.strip()[:400]}" if p.stderr else ""))


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    nn_train, bench = (os.path.abspath(a) for a in sys.argv[1:3])
    rows = registry()
    check_registry(rows)
    check_sources(rows)
    check_help(rows, nn_train)
    check_readme(rows)
    check_bench(rows, bench)
    failed = results.count(False)
    print(f"gemm-registry: {len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
