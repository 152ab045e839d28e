#!/usr/bin/env python3
"""Checks that the documentation describes the product (standard library only).

    python3 tests/build/check_docs.py [--help-text FILE] [ROOT]   # ROOT: the repository (default: .)

1. Options: every long option nn_train accepts appears in docs/usage.md as `--NAME` (not as
   the start of a longer name). The options come from FILE, nn_train's --help output, when
   given; otherwise from src/app/options.cpp: the names of the option table (kSpecs) and the
   literal add_option/add_flag names. --help itself is exempt.
2. GEMM variants: every variant of the registry (kernels/gemm/variants.h, NN_GEMM_VARIANTS)
   appears in README.md's results table (a table row that starts with the variant's number)
   and in its concept map (the `kernels/gemm/` row names the variant's number and its file
   NUMBER_NAME.cu, or a range `0_...cu` ... `N_...cu` that covers it).
3. Product, not history: no Markdown file (README.md, docs/, every other README.md) and no
   source file (C++, CUDA, Python, shell, make) matches JOURNAL_RE: words about how the work
   went (sessions, lent machines, numbered calls or issues). bench/results/ is exempt: each
   run's folder is a dated record of that run.

Each problem is printed as `FILE:LINE: WHAT`; the exit status is 1 if there was any, else 0.
"""

import os
import re
import subprocess
import sys

JOURNAL_RE = re.compile(
    r"this session|next session|last session|\blent\b|\bcall [0-9]+\b|device tool|\bissue [0-9]+\b",
    re.I,
)
SOURCE_EXT = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".py", ".sh", ".mk", ".sbatch")
SOURCE_NAMES = ("Makefile",)
EXEMPT_DIRS = ("bench/results/",)
# This file names the phrases it looks for.
SELF = "tests/build/check_docs.py"
# Files whose comments still hold such phrases; remove an entry once its file is clean.
PENDING = ()

SPEC_NAME_RE = re.compile(r'^\s*\{"([a-z][a-z0-9-]*)",', re.M)
ADD_RE = re.compile(r'add_(?:option|flag)\(\s*"(--[a-z][a-z0-9-]*)')
HELP_OPT_RE = re.compile(r"(?:^|[\s,])(--[a-z][a-z0-9-]*)", re.M)
VARIANT_RE = re.compile(r"^\s*X\((\d+),\s*([a-z0-9_]+),\s*(live|retired)", re.M)


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def repo_files(root):
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
            check=True, capture_output=True, text=True,
        ).stdout
        return sorted(set(out.split()))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x not in (".git", "build")]
            found += [os.path.relpath(os.path.join(d, f), root) for f in files]
        return sorted(found)


def options_from_source(root):
    text = read(root, "src/app/options.cpp")
    start = text.find("kSpecs[]")
    end = text.find("\n};", start)
    if start < 0 or end < 0:
        return None
    names = {"--" + n for n in SPEC_NAME_RE.findall(text[start:end])}
    names |= set(ADD_RE.findall(text))
    return names


def options_from_help(path):
    with open(path, encoding="utf-8") as f:
        return set(HELP_OPT_RE.findall(f.read()))


def check_options(root, help_file, problems):
    opts = options_from_help(help_file) if help_file else options_from_source(root)
    if not opts:
        problems.append("src/app/options.cpp:1: no options found (the kSpecs table moved?)")
        return
    usage = read(root, "docs/usage.md")
    for opt in sorted(opts - {"--help"}):
        if not re.search(re.escape(opt) + r"(?![a-z0-9-])", usage):
            problems.append(f"docs/usage.md:1: option {opt} (nn_train --help) is not documented")


def table_rows(text):
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("|"):
            yield n, [c.strip() for c in line.strip().strip("|").split("|")]


def check_variants(root, problems):
    variants = VARIANT_RE.findall(read(root, "kernels/gemm/variants.h"))
    if not variants:
        problems.append("kernels/gemm/variants.h:1: no NN_GEMM_VARIANTS rows found")
        return
    readme = read(root, "README.md")
    rows = list(table_rows(readme))
    # The results table: rows whose first cell starts with a variant number.
    result_numbers = {m.group(1) for _, cells in rows
                      if (m := re.match(r"\**(\d+)\**(?:\s|$)", cells[0]))}
    gemm_rows = [(n, " ".join(cells)) for n, cells in rows if "kernels/gemm/" in " ".join(cells)]
    for number, name, _state in variants:
        if number not in result_numbers:
            problems.append(f"README.md:1: GEMM variant {number} ({name}) has no row in the results table")
        covered = False
        for _, row in gemm_rows:
            if f"{number}_{name}.cu" in row:
                covered = True
            for lo, hi in re.findall(r"`(\d+)_[a-z0-9_]+\.cu`\s*\.\.\.\s*`(\d+)_[a-z0-9_]+\.cu`", row):
                if int(lo) <= int(number) <= int(hi):
                    covered = True
        if not covered:
            problems.append(f"README.md:1: GEMM variant {number} ({name}, kernels/gemm/{number}_{name}.cu) "
                            "is missing from the concept map's kernels/gemm/ row")


def journal_scope(rel):
    if rel == SELF or rel in PENDING or rel.startswith(EXEMPT_DIRS):
        return False
    base = os.path.basename(rel)
    return rel.endswith(".md") or rel.endswith(SOURCE_EXT) or base in SOURCE_NAMES


def check_journal(root, problems):
    for rel in repo_files(root):
        if not journal_scope(rel) or not os.path.isfile(os.path.join(root, rel)):
            continue
        try:
            text = read(root, rel)
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = JOURNAL_RE.search(line)
            if m:
                problems.append(f"{rel}:{n}: journal phrase '{m.group(0)}': describe the product "
                                "(a run's dated record belongs in bench/results/<run>/README.md)")


def main(argv):
    help_file = None
    args = list(argv[1:])
    if len(args) >= 2 and args[0] == "--help-text":
        help_file = args[1]
        args = args[2:]
    root = args[0] if args else "."
    problems = []
    check_options(root, help_file, problems)
    check_variants(root, problems)
    check_journal(root, problems)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
