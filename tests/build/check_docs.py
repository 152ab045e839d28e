#!/usr/bin/env python3
"""Checks that the documentation describes the product (standard library only).

    python3 tests/build/check_docs.py [--help-text FILE] [ROOT]   # ROOT: the repository (default: .)

1. Options: every long option nn_train accepts appears in docs/usage.md as `--NAME` (not as
   the start of a longer name). The options come from FILE, nn_train's --help output, when
   given; otherwise from src/app/options.cpp: the names of the option table (kSpecs) and the
   literal add_option/add_flag names. --help itself is exempt.
2. GEMM variants: every variant of the registry (kernels/gemm/variants.h, NN_GEMM_VARIANTS)
   has a row in the speed table of kernels/gemm/README.md, and that table is what
   bench/gemm_table.py makes of its gemm_bench CSV (`python3 bench/gemm_table.py --write`
   rewrites it); and every variant is in README.md's concept map (the `kernels/gemm/` row names
   the variant's number and its file NUMBER_NAME.cu, or a range `0_...cu` ... `N_...cu` that
   covers it).
3. Product, not history: no Markdown file (README.md, docs/, every other README.md) and no
   source file (C++, CUDA, Python, shell, make) matches JOURNAL_RE: words about how the work
   went (sessions, lent machines, numbered calls or issues).
4. Dates and commits only in provenance: no ISO date (YYYY-MM-DD, also inside a name such as a
   run folder's) and no commit hash (7 to 40 lower-case hex digits with at least one digit and
   one letter, as a whole word: not part of 0x..., a UUID's dashed groups or a longer word) in
   the prose of a Markdown file or in a comment of a source file (C/C++/CUDA `//` and `/* */`,
   `#` in Python, shell, Slurm and make files, and Python's triple-quoted strings), except in a
   provenance line. Hashes count in comments and prose only: code (hex literals, checksums,
   format strings) is not looked at. A provenance line starts with `Provenance:` (after the
   indentation, a comment marker, a list marker or `**`) and runs to the end of its paragraph:
   the next blank line, or a line that starts a list item, table row, heading or code fence (in
   a source file: the next line that is not a comment line).
5. No "from <commit> to <commit>" narration anywhere in that prose, provenance lines included.

bench/results/ (each run's folder is the dated record of that run) is exempt from 3-5 and
CHANGELOG.md (what changed and when) from 4 and 5; data files (data/mnist.md5, patches, CSVs)
are not read.

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
CHANGELOG = "CHANGELOG.md"
C_EXT = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh")
HASH_CORE = r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}"
DATE_RE = re.compile(r"(?<![0-9])(?:19|20)[0-9]{2}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])(?![0-9])")
HASH_RE = re.compile(r"(?<![\w.-])" + HASH_CORE + r"(?![\w-])")
FROM_TO_RE = re.compile(r"\b[Ff]rom\s+`?" + HASH_CORE + r"`?(?:'s)?\s+to\s+`?" + HASH_CORE + r"`?(?![\w-])")
PROVENANCE_RE = re.compile(r"^(?:[-*+>]\s+|[0-9]+[.)]\s+)*(?:\*\*|__)?Provenance(?:\*\*|__)?:")
BLOCK_START_RE = re.compile(r"^\s*(?:[-*+]\s|[0-9]+[.)]\s|\||#|```|~~~|<!--)")
# This file names the phrases it looks for.
SELF = "tests/build/check_docs.py"
# Files whose comments still hold such phrases; remove an entry once its file is clean.
PENDING = ()

SPEC_NAME_RE = re.compile(r'^\s*\{"([a-z][a-z0-9-]*)",', re.M)
ADD_RE = re.compile(r'add_(?:option|flag)\(\s*"(--[a-z][a-z0-9-]*)')
HELP_OPT_RE = re.compile(r"(?:^|[\s,])(--[a-z][a-z0-9-]*)", re.M)
VARIANT_RE = re.compile(r"^\s*X\((\d+),\s*([a-z0-9_]+),\s*(fused|plain)", re.M)


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


def gemm_table_module(root):
    """bench/gemm_table.py, loaded from ROOT (None when it is missing)."""
    import importlib.util
    path = os.path.join(root, "bench", "gemm_table.py")
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location("gemm_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_variants(root, problems):
    variants = VARIANT_RE.findall(read(root, "kernels/gemm/variants.h"))
    if not variants:
        problems.append("kernels/gemm/variants.h:1: no NN_GEMM_VARIANTS rows found")
        return
    gemm_table = gemm_table_module(root)
    if gemm_table is None:
        problems.append("bench/gemm_table.py:1: missing (it makes kernels/gemm/README.md's speed table)")
        return
    problems += gemm_table.check(root)
    _, block = gemm_table.readme_block(read(root, gemm_table.README))
    result_numbers = {m.group(1) for _, cells in table_rows(block or "")
                      if (m := re.match(r"(\d+) `", cells[0]))}
    rows = list(table_rows(read(root, "README.md")))
    gemm_rows = [(n, " ".join(cells)) for n, cells in rows if "kernels/gemm/" in " ".join(cells)]
    for number, name, state in variants:
        if number not in result_numbers:
            problems.append(f"{gemm_table.README}:1: GEMM variant {number} ({name}) has no row in the speed table "
                            "(python3 bench/gemm_table.py --write)")
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


def source_kind(root, rel):
    """'md', 'c', 'py', 'sh' (shell, Slurm and make files) or None (not read)."""
    base = os.path.basename(rel)
    if rel.endswith(".md"):
        return "md"
    if rel.endswith(C_EXT):
        return "c"
    if rel.endswith(".py"):
        return "py"
    if rel.endswith((".sh", ".sbatch", ".mk")) or base in SOURCE_NAMES:
        return "sh"
    if "." not in base:  # a script without an extension: its #! line says which
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                first = f.readline()
        except (OSError, UnicodeDecodeError):
            return None
        if first.startswith("#!"):
            return "py" if "python" in first else "sh" if re.search(r"\b(ba|z|da)?sh\b", first) else None
    return None


def c_prose(text):
    """Per line: (comment text, the line holds nothing but comment and space)."""
    lines = text.split("\n")
    out = [["", True] for _ in lines]
    state, n, i = "code", 0, 0
    raw_end = ""
    while i < len(text):
        ch = text[i]
        if ch == "\n":
            n += 1
            if state == "line":
                state = "code"
            i += 1
            continue
        if state == "code":
            if text.startswith("//", i):
                state, i = "line", i + 2
                continue
            if text.startswith("/*", i):
                state, i = "block", i + 2
                continue
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                state, raw_end = "raw", ")" + m.group(1) + '"'
                out[n][1] = False
                i += m.end()
                continue
            if ch == '"':
                state = "str"
            elif ch == "'" and not (i > 0 and text[i - 1].isalnum()):  # not a digit separator (1'000)
                state = "chr"
            if not ch.isspace():
                out[n][1] = False
            i += 1
        elif state in ("line", "block"):
            if state == "block" and text.startswith("*/", i):
                state, i = "code", i + 2
                continue
            out[n][0] += ch
            i += 1
        elif state == "raw":
            if text.startswith(raw_end, i):
                state, i = "code", i + len(raw_end)
                continue
            i += 1
        else:  # "str" or "chr"
            if ch == "\\" and text[i + 1:i + 2] != "\n":
                i += 2
                continue
            if (state == "str" and ch == '"') or (state == "chr" and ch == "'"):
                state = "code"
            i += 1
    return [(t, only) for t, only in out]


def py_prose(text):
    """Per line: (comment or triple-quoted string text, the line holds nothing else)."""
    lines = text.split("\n")
    out = [["", True] for _ in lines]
    state, quote, n, i = "code", "", 0, 0
    while i < len(text):
        ch = text[i]
        if ch == "\n":
            n += 1
            if state == "comment":
                state = "code"
            i += 1
            continue
        if state == "code":
            if ch == "#":
                state = "comment"
            elif text.startswith('"""', i) or text.startswith("'''", i):
                state, quote = "doc", text[i:i + 3]
                i += 3
                continue
            elif ch in "\"'":
                state, quote = "str", ch
                out[n][1] = False
            elif not ch.isspace():
                out[n][1] = False
            i += 1
        elif state in ("comment", "doc"):
            if state == "doc" and text.startswith(quote, i):
                state = "code"
                i += 3
                continue
            if state == "doc" and ch == "\\" and text[i + 1:i + 2] not in ("", "\n"):
                out[n][0] += text[i:i + 2]
                i += 2
                continue
            out[n][0] += ch
            i += 1
        else:  # a one-line string
            if ch == "\\" and text[i + 1:i + 2] != "\n":
                i += 2
                continue
            if ch == quote:
                state = "code"
            i += 1
    return [(t, only) for t, only in out]


HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def sh_prose(text):
    """Per line: (comment text, the line holds nothing but a comment). Heredoc bodies are code."""
    out = []
    quote, heredoc = "", None
    for line in text.split("\n"):
        if heredoc:
            out.append(("", False))
            if line.strip() == heredoc:
                heredoc = None
            continue
        comment, only, i = "", True, 0
        while i < len(line):
            ch = line[i]
            if quote:
                if ch == "\\" and quote == '"':
                    i += 2
                    continue
                if ch == quote:
                    quote = ""
            elif ch == "\\":
                i += 2
                only = False
                continue
            elif ch in "\"'":
                quote, only = ch, False
            elif ch == "#" and (i == 0 or line[i - 1] in " \t;&|()"):
                comment = line[i + 1:]
                break
            elif not ch.isspace():
                only = False
            i += 1
        m = HEREDOC_RE.search(line[: len(line) - len(comment)])
        if m and not quote:
            heredoc = m.group(2)
        out.append((comment, only))
    return out


def prose_lines(kind, text):
    """[(line number, prose text, is a provenance line)] of a file's prose or comments."""
    if kind == "md":
        per_line = [(line, True) for line in text.split("\n")]
    else:
        per_line = {"c": c_prose, "py": py_prose, "sh": sh_prose}[kind](text)
    result, in_prov = [], False
    for n, (prose, only) in enumerate(per_line, 1):
        body = prose.strip()
        if kind != "md":
            body = body.lstrip("*/#!").strip()
        if PROVENANCE_RE.match(body):
            in_prov = True
        elif not body or not only or (kind == "md" and BLOCK_START_RE.match(prose)):
            in_prov = False
        result.append((n, prose, in_prov))
    return result


def check_provenance(root, problems):
    for rel in repo_files(root):
        if rel == CHANGELOG or rel.startswith(EXEMPT_DIRS) or not os.path.isfile(os.path.join(root, rel)):
            continue
        kind = source_kind(root, rel)
        if kind is None:
            continue
        try:
            text = read(root, rel)
        except UnicodeDecodeError:
            continue
        lines = prose_lines(kind, text)
        for n, prose, in_prov in lines:
            if in_prov:
                continue
            where = ("what changed when: CHANGELOG.md; a run: bench/results/<run>/README.md; "
                     "a figure's source: a 'Provenance:' line")
            if m := DATE_RE.search(prose):
                problems.append(f"{rel}:{n}: date '{m.group(0)}' outside a provenance line ({where})")
            if m := HASH_RE.search(prose):
                problems.append(f"{rel}:{n}: commit '{m.group(0)}' outside a provenance line ({where})")
        joined = "\n".join(prose for _, prose, _ in lines)
        starts = [0]
        for _, prose, _ in lines:
            starts.append(starts[-1] + len(prose) + 1)
        for m in FROM_TO_RE.finditer(joined):
            n = next(k for k in range(len(lines)) if starts[k + 1] > m.start()) + 1
            narration = " ".join(m.group(0).split())
            problems.append(f"{rel}:{lines[n - 1][0]}: history narration '{narration}': say what is "
                            "(what changed between commits: CHANGELOG.md)")


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
    check_provenance(root, problems)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
