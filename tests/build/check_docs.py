#!/usr/bin/env python3
"""Checks that the documentation describes the product (standard library only).

    python3 tests/build/check_docs.py [--help-text FILE] [ROOT]   # ROOT: the repository (default: .)
    python3 tests/build/check_docs.py --self-test                 # rule 6 against sample lines

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
6. No narration in the prose of a Markdown file, provenance lines included: the docs say what
   the product does and what was measured, not how it differs from before. Flagged:
   - the words "previously" (not after a determiner: "the previously saved file"), "formerly",
     "no longer" and "any longer" (not before "than": "no longer than 5 ms" is a limit),
     "anymore" and "any more" (not "any more than"), "until now", "until recently";
   - "used to", unless a form of "be" or "get" comes up to two words before it ("is used to
     build", "are not used to" say what a thing is for);
   - "now" next to a verb: "is/are/has/can/... now"; "now" + a word ending in -s, -ed or -ing
     ("now takes", "now runs", "now fixed"; not "now its", "now this", "now as", "now us");
     "now" + a plain verb (take, run, correct, ...) when a word comes before it (a sentence that
     starts "Now run ..." is an instruction);
   - "was"/"were" ... "now" within one sentence: up to 200 characters, across line breaks but
     not past a sentence's end, into a new paragraph, list item, table row or cell;
   - "since <commit>" (also inside a code span);
   - a table whose header row has cells "before" and "after", "was" and "now", "old" and "new"
     or "then" and "now", each the bare word or the word with a parenthesis or a commit after
     it ("before the exchange" is an order within a step, not a comparison with the past).
   "now and then" is never narration. Fenced code blocks, code spans, one-line double-quoted
   text (quoted output) and link targets are not read. Each problem is printed as
   `FILE:LINE: narration: "TEXT"`; `--self-test` runs the rule on sample lines (SELF_TEST)
   instead of a repository.

bench/results/ (each run's folder is the dated record of that run) is exempt from 3-6 and
CHANGELOG.md (what changed and when) from 4-6; data files (data/mnist.md5, patches, CSVs)
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
# Rule 6 (narration in Markdown prose).
# "the previously saved file" (a determiner before it) describes the file, not the past.
NARRATION_WORDS_RE = re.compile(
    r"(?<!\bthe )(?<!\ba )(?<!\ban )(?<!\bany )(?<!\bits )(?<!\btheir )(?<!\beach )(?<!\bevery )\bpreviously\b"
    r"|\b(?:formerly|(?:no|any)\s+longer(?!\s+than)|anymore|any\s+more(?!\s+than)|until\s+(?:now|recently))\b",
    re.I)
USED_TO_RE = re.compile(r"\b(?:\w+\s+)?(?P<used>used)\s+to\b", re.I)
# "is used to build", "are also used to", "gets used to": what a thing is for, not the past.
USED_TO_OK_RE = re.compile(
    r"\b(?:is|are|was|were|be|been|being|get|gets|got|getting)\s+(?:\w+\s+)?(?:\w+\s+)?$", re.I)
NOT_NOW_AND_THEN = r"(?!\s+and\s+then\b)"
PLAIN_VERBS = ("take|run|use|need|correct|cover|give|hold|keep|leave|accept|print|pass|fail|build|make|"
               "read|write|show|include|work|wait|call|check|match|fit|agree|differ|stay|start|stop|go")
NOW_VERB_RE = re.compile(
    r"\b(?:is|are|was|were|has|have|had|does|do|did|can|could|will|would|must|may|should)\s+now\b"
    + NOT_NOW_AND_THEN
    + r"|\bnow\s+(?!(?:its|this|thus|as|us)\b)[a-z]+(?:s|ed|ing)\b"
    + r"|(?<=\w\s)now\s+(?:" + PLAIN_VERBS + r")\b",
    re.I)
# Inside one sentence: not past a sentence's end (". ", "! ", "? "), a table cell's bar or a line
# that starts a paragraph, list item, table row, heading or quote.
SENTENCE_CHAR = r"(?:[^.!?|\n]|[.!?](?!\s)|\n(?![ \t]*(?:\n|$|[-*+>#|]|[0-9]+[.)]\s)))"
WAS_NOW_RE = re.compile(r"\b(?:was|were)\b" + SENTENCE_CHAR + r"{0,200}?\bnow\b" + NOT_NOW_AND_THEN, re.I)
SINCE_HASH_RE = re.compile(r"\b[Ss]ince\s+`?" + HASH_CORE + r"`?(?![\w-])")
TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
HEADER_WORD_RE = re.compile(r"^(before|after|was|now|old|new|then)(?:\s*\(.*\)|\s+`?" + HASH_CORE + r"`?)?$", re.I)
HEADER_PAIRS = ({"before", "after"}, {"was", "now"}, {"old", "new"}, {"then", "now"})
CODE_SPAN_RE = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
QUOTED_RE = re.compile(r'"[^"\n]*"')
LINK_TARGET_RE = re.compile(r"\]\([^)\n]*\)")
FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
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


def markdown_prose(text):
    """(raw lines, masked lines) of a Markdown file, fenced code blocks blanked in both; in the
    masked lines code spans, one-line double-quoted text and link targets are emptied."""
    raw, masked, fence = [], [], None
    for line in text.split("\n"):
        m = FENCE_RE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            raw.append("")
            masked.append("")
            continue
        if m:
            fence = m.group(1)
            raw.append("")
            masked.append("")
            continue
        raw.append(line)
        line = CODE_SPAN_RE.sub("`…`", line)
        line = LINK_TARGET_RE.sub("](…)", line)
        masked.append(QUOTED_RE.sub('"…"', line))
    return raw, masked


def table_header_narration(lines):
    """[(line number, 'a | b')] for table headers with a before/after or was/now pair of cells."""
    found = []
    for i in range(len(lines) - 1):
        if not lines[i].lstrip().startswith("|") or not TABLE_SEP_RE.match(lines[i + 1]):
            continue
        cells = [c.strip().strip("*_").strip() for c in lines[i].strip().strip("|").split("|")]
        words = {}
        for c in cells:
            m = HEADER_WORD_RE.match(c)
            if m:
                words.setdefault(m.group(1).lower(), c)
        for pair in HEADER_PAIRS:
            if pair <= words.keys():
                a, b = sorted(pair, key=lambda w: cells.index(words[w]))
                found.append((i + 1, f"{words[a]} | {words[b]}"))
                break
    return found


def narration(text):
    """[(line number, matched text)] of rule 6 in a Markdown file's text, in line order."""
    raw, masked = markdown_prose(text)
    found = []

    def scan(lines, regexes):
        joined = "\n".join(lines)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)
        for rx in regexes:
            for m in rx.finditer(joined):
                if rx is USED_TO_RE and USED_TO_OK_RE.search(joined[max(0, m.start() - 40):m.start("used")]):
                    continue
                n = next(k for k in range(len(lines)) if starts[k + 1] > m.start()) + 1
                found.append((n, m.start() - starts[n - 1], " ".join(m.group(0).split())))

    scan(masked, (NARRATION_WORDS_RE, USED_TO_RE, NOW_VERB_RE, WAS_NOW_RE))
    scan(raw, (SINCE_HASH_RE,))
    found += [(n, 0, what) for n, what in table_header_narration(masked)]
    return [(n, what) for n, _, what in sorted(set(found))]


def check_narration(root, problems):
    for rel in repo_files(root):
        if (not rel.endswith(".md") or rel == CHANGELOG or rel.startswith(EXEMPT_DIRS)
                or not os.path.isfile(os.path.join(root, rel))):
            continue
        try:
            text = read(root, rel)
        except UnicodeDecodeError:
            continue
        for n, what in narration(text):
            problems.append(f'{rel}:{n}: narration: "{what}"')


# --self-test: (Markdown text, what rule 6 must report) pairs.
SELF_TEST = [
    ("The build previously took 12 minutes and now takes 8.",
     [(1, "previously"), (1, "now takes")]),
    ("The launch now leaves `SLURM_GPUS_PER_TASK=0` out.", [(1, "now leaves")]),
    ("One GPU's step at 256:100 is now shorter.", [(1, "is now")]),
    ("Two terms fitted to four tiles now correct it.", [(1, "now correct")]),
    ("The allowance was 60 s; it\nis 60 s x F now.", [(1, "was 60 s; it is 60 s x F now")]),
    ("Skipped there since `9d0b688`.", [(1, "since `9d0b688`")]),
    ("Since Slurm 22.05 srun no longer reads it.", [(1, "no longer")]),
    ("The script used to print one line.", [(1, "script used to")]),
    ("| check | was | now |\n|---|---|---|\n| a | 1 | 2 |", [(1, "was | now")]),
    ("| shape | before (ms) | after (ms) |\n| --- | ---: | ---: |", [(1, "before (ms) | after (ms)")]),
    ("Its step is not timed any longer.", [(1, "any longer")]),
    ("- The plan\n  was 16x100 and is 32x52 now.", [(2, "was 16x100 and is 32x52 now")]),
    ("A busy host stalls a rank now and then.", []),
    ("The flags are used to build the binary.", []),
    ("The flags are not\n  used to build the binary.", []),
    ("`--resume` reads the previously saved checkpoint.", []),
    ("A step no longer than 5 ms is not reported.", []),
    ("`now`: the time `MPI_Allreduce` took.", []),
    ('rank 0 prints "resuming now" and exits.', []),
    ("Each rank saves before it exits; the file is read after the barrier.", []),
    ("| phase | before the exchange | after the exchange |\n|---|---|---|", []),
    ("It was measured on an H200.\n\nNow run `make test`.", []),
    ("It was measured on an H200. Now run `make test`.", []),
    ("The watchdog waited since it hung a profile.", []),
    ("```\nthe log previously said so\n```\nThe script accepts either.", []),
    ("See [the table](performance.md#now-takes-longer).", []),
]


def self_test():
    failed = 0
    for text, want in SELF_TEST:
        got = narration(text)
        ok = got == want
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {text!r}: {got}" + ("" if ok else f", expected {want}"))
    print(f"self-test: {len(SELF_TEST) - failed} of {len(SELF_TEST)} samples as expected")
    return 1 if failed else 0


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
    if args == ["--self-test"]:
        return self_test()
    if len(args) >= 2 and args[0] == "--help-text":
        help_file = args[1]
        args = args[2:]
    root = args[0] if args else "."
    problems = []
    check_options(root, help_file, problems)
    check_variants(root, problems)
    check_journal(root, problems)
    check_provenance(root, problems)
    check_narration(root, problems)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
