#!/usr/bin/env python3
"""Checks that every command the documentation shows is run as written by CI, or is tagged as
needing what CI lacks (standard library only).

    python3 tests/build/check_doc_commands.py [--list] [ROOT]   # ROOT: the repository (default: .)
    python3 tests/build/check_doc_commands.py --self-test       # the rules against planted samples

The documentation is README.md and docs/*.md. Its commands are:

1. Every line of a code block fenced with the info string sh, bash, shell or console that is
   not blank and not only a comment; and in any other code block (fenced without those, or
   indented by 4 spaces) the lines that have the form of an invocation (rule 2; there a
   repository file at the start of a line needs no argument). A code line's comment starts at
   ` #`; a comment that holds `or:` (at its start or after `; `) shows one more command, up to
   ` (` or the end (`make x   # or: bash y.sh`).
2. Every code span outside code blocks that has the form of an invocation: after any leading
   `VAR=value` assignments, its first word is
   - `make` (alone too: the default goal);
   - bash, sh, python3 or /usr/bin/python3, followed by a repository file;
   - mpirun, srun, sbatch or salloc, with a repository file, a build's binary
     (`build/NAME/bin/PROG`), `nn_train` or `...` among its arguments;
   - module with two words after it (`module load X`), spack, pip or pip3 with one;
   - `nn_train`, a repository file (a path that exists, also as `./PATH`; a top-level `*.sh`
     such as `nsys.sh`) or a build's binary, with at least one argument.
   Other programs' spans (nsys, scontrol, grep, nvidia-smi, ...) are those tools' own usage, and a
   span or line that expands a shell variable or argument (`$NAME`, `${...}`, `"$@"`) quotes a
   script's code: neither is a command here. A span that names an option alone (`--save FILE`)
   is not one either.
3. `A && B` is two commands, A and B.
4. A command may be a template: `...` stands for any arguments (or none), `[X]` for optional
   words (each word inside for one argument), `<word>` and a whole word in capitals (FILE, N,
   KIT, OUT, COMPONENT) for one argument, `a|b|c` inside a word for one of them.

Each command must be, at each place it is shown, either
(a) tagged there, visibly: a code span followed by `(needs a GPU` or `(needs a cluster` (the
    parenthesis may go on: `(needs a GPU; tests/cuda/...)`); a code line whose comment starts
    with `needs a GPU` or `needs a cluster`, or that follows, in its block with no blank line
    between, a line that is only such a comment (`# needs a cluster`);
(b) or in tests/docs/commands.txt, one line `COMMAND | PHASE | WHERE [| RUN]`: RUN (default: the
    command itself; for a template, its instance, which must match it) is run as written in
    CI's phase PHASE (a `phase NAME` of .ci/run) by WHERE:
    - `.ci/run`: the text of .ci/run holds RUN;
    - `make`: RUN is `make GOAL...`, and the phase's make (a `phase` command that sets no
      variable) reaches each GOAL through prerequisites that are plain words and recipe lines
      `$(MAKE) ... GOAL` that set no variable;
    - `FILE:TARGET` (the Makefile or a .mk file it includes): TARGET's recipe in FILE holds RUN,
      and the phase's make reaches TARGET (as above, variables allowed);
    - a script: its text outside comment lines holds RUN, and the script is named in the
      recipe of a target the phase reaches, or in another script so named (any depth).
    "Holds" compares with whitespace collapsed and a line continuation read as a space; in make
    files `$(MAKE)` reads as make, `$(PYTHON)` as python3, a variable set once with `:=` to a
    plain value (`TEST_NP_LIST := 1 2`) as that value, and `$(X_DIR)` set to the .mk file's own
    folder as that folder; make's `--no-print-directory` and `-j1` options are dropped (they
    change what is printed and in what order, not what runs). RUN must stand as whole words
    (`make test` is not in `make test-more`).
    Two PHASE values are not phases: `ci` with WHERE `.ci/run` is for `bash .ci/run`, the CI
    run itself; `none` marks a command CI does not run, WHERE saying why (`--list` counts them).
    Every manifest line must name a command some doc still shows (else it is stale).

Nothing else is exempt. Each problem is printed as `FILE:LINE: WHAT`; the exit status is 1 if
there was any, else 0. `--list` prints every command found, where, and how it is covered.
"""

import glob
import os
import re
import sys

MANIFEST = "tests/docs/commands.txt"
CI_RUN = ".ci/run"
SHELL_INFO = ("sh", "bash", "shell", "console")
INTERPRETERS = ("bash", "sh", "python3", "/usr/bin/python3")
LAUNCHERS = ("mpirun", "srun", "sbatch", "salloc")
ENV_TOOLS = ("module", "spack", "pip", "pip3")
ASSIGN_RE = re.compile(r"""[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|"[^"]*"|[^\s'"]*)+\s*""")
FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")
CODE_SPAN_RE = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")
EXPANSION_RE = re.compile(r"\$(?:[A-Za-z_@*#?{(0-9])")
BINARY_RE = re.compile(r"^build/[^/\s]+/bin/[\w.-]+$")
TAG_SPAN_RE = re.compile(r"^\s*\(needs a (GPU|cluster)\b")
TAG_COMMENT_RE = re.compile(r"^needs a (GPU|cluster)\b")


# ---- what a doc command is ----------------------------------------------------------------------

def strip_assignments(text):
    rest = text.strip()
    while True:
        m = ASSIGN_RE.match(rest)
        if not m or m.end() == 0:
            return rest
        rest = rest[m.end():]


def is_repo_file(root, word):
    if BINARY_RE.match(word):
        return True
    path = word[2:] if word.startswith("./") else word
    if not path or path.startswith("-") or not re.match(r"^[\w./-]+$", path):
        return False
    return ("/" in path or path.endswith((".sh", ".py", ".sbatch"))) and os.path.isfile(os.path.join(root, path))


def is_command(root, text, in_code):
    """Has TEXT (a span, or a code block's line when in_code) the form of an invocation?"""
    if EXPANSION_RE.search(text):
        return False
    words = strip_assignments(text).split()
    if not words:
        return False
    w, args = words[0], words[1:]
    if w == "make":
        return True
    if w in INTERPRETERS:
        return bool(args) and is_repo_file(root, args[0])
    if w in LAUNCHERS:
        return any(a in ("nn_train", "...") or is_repo_file(root, a) for a in args)
    if w in ENV_TOOLS:
        return len(args) >= (2 if w == "module" else 1)
    if w == "nn_train" or is_repo_file(root, w):
        return in_code or bool(args)
    return False


def split_commands(text):
    """`A && B` -> [A, B] (not inside quotes)."""
    parts, cur, quote, i = [], "", "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif text.startswith("&&", i):
            parts.append(cur)
            cur, i = "", i + 2
            continue
        cur += ch
        i += 1
    parts.append(cur)
    return [" ".join(p.split()) for p in parts if p.strip()]


def split_comment(line):
    """(code, comment) of a shell line: the comment starts at a # after a space, outside quotes."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i], line[i + 1:].strip()
    return line, ""


def code_blocks(lines):
    """[(line number, text, info)] of the lines in code blocks; the rest is prose."""
    out, fence, info, prev_blank, in_indented = [], None, "", True, False
    for n, line in enumerate(lines, 1):
        m = FENCE_RE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2):
                fence = None
            else:
                out.append((n, line, info))
            prev_blank = False
            continue
        if m:
            fence, info = m.group(1), m.group(2).lower()
            in_indented = False
            prev_blank = False
            continue
        if line.startswith("    ") and line.strip() and (prev_blank or in_indented):
            out.append((n, line, "indented"))
            in_indented = True
        elif line.strip():
            in_indented = False
        prev_blank = not line.strip()
    return out


def prose_spans(lines, code_lines):
    """[(line number, span text, the text after the span on its line)] outside code blocks."""
    out = []
    for n, line in enumerate(lines, 1):
        if n in code_lines or FENCE_RE.match(line):
            continue
        for m in CODE_SPAN_RE.finditer(line):
            out.append((n, m.group(2).strip(), line[m.end():]))
    return out


def doc_commands(root, rel, text):
    """[(line number, command, tag or None)] of a Markdown file: tag is 'GPU' or 'cluster'."""
    lines = text.split("\n")
    found = []
    blocks = code_blocks(lines)
    code_lines = {n for n, _, _ in blocks}
    # A comment line `# needs a GPU` tags the lines after it, up to a blank line or the block's end.
    block_tag, last = None, None
    for n, line, info in blocks:
        if last is None or n != last + 1:
            block_tag = None
        last = n
        code, comment = split_comment(line)
        m = TAG_COMMENT_RE.match(comment)
        if not code.strip():
            if m:
                block_tag = m.group(1)
            continue
        tag = m.group(1) if m else block_tag
        texts = [code]
        alt = re.search(r"(?:^|;\s*)or:\s*(.*)", comment)
        if alt:
            texts.append(alt.group(1).split(" (")[0])
        for t in texts:
            if info in SHELL_INFO or is_command(root, t, in_code=True):
                for c in split_commands(t):
                    if info in SHELL_INFO or is_command(root, c, in_code=True):
                        found.append((n, c, tag))
    for n, span, after in prose_spans(lines, code_lines):
        if not is_command(root, span, in_code=False):
            continue
        m = TAG_SPAN_RE.match(after)
        for c in split_commands(span):
            if is_command(root, c, in_code=False) or c.split()[0] == "make":
                found.append((n, c, m.group(1) if m else None))
    return found


def docs(root):
    files = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    return [f for f in files if os.path.isfile(os.path.join(root, f))]


# ---- templates and "holds" ----------------------------------------------------------------------

def template_regex(command):
    """A regex that a run of COMMAND (rule 4) matches in full."""
    # Optional [...] groups may nest and span words: `[OLD [NEW]]`.
    pat, depth = "", 0
    for w in re.split(r"(\s+)", command.strip()):
        if not w:
            continue
        if w.isspace():
            pat += r"\s+" if depth == 0 else r"\s*"
            continue
        piece = ""
        while w.startswith("["):
            pat = pat[:-3] if pat.endswith(r"\s+") else pat
            piece += r"(?:\s+"
            depth += 1
            w = w[1:]
        closes = 0
        while w.endswith("]") and depth - closes > 0:
            closes += 1
            w = w[:-1]
        piece += word_regex(w) if depth == 0 else (r"\S+" if w else "")
        piece += ")?" * closes
        depth -= closes
        pat += piece
    return re.compile(pat)


def word_regex(w):
    if w == "...":
        return r"(?:\S.*?)?"
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", w):
        return r"\S+"
    if "|" in w and not re.search(r"['\"]", w) and re.fullmatch(r"[\w.=-]+(?:\|[\w.=-]+)+", w):
        m = re.match(r"^(.*?=)?(.*)$", w)
        head, alts = m.group(1) or "", m.group(2).split("|")
        return re.escape(head) + "(?:" + "|".join(re.escape(a) for a in alts) + ")"
    out = ""
    for part in re.split(r"(<[a-z][a-z0-9_-]*>|\.\.\.)", w):
        if part == "...":
            out += r".*?"
        elif part.startswith("<") and part.endswith(">"):
            out += r"\S+?"
        else:
            out += re.escape(part)
    return out


def is_template(command):
    return template_regex(command).pattern != r"\s+".join(re.escape(w) for w in command.split())


def normalise(text, make_file):
    text = text.replace("\\\n", " ")
    if make_file:
        text = text.replace("$(MAKE)", "make").replace("$(PYTHON)", "python3")
        text = re.sub(r"(?m)^\t@?", "\t", text)
    text = re.sub(r"\bmake((?:[ \t]+(?:--no-print-directory|-j1))+)(?=\s)", "make", text)
    return "\n".join(" ".join(line.split()) for line in text.split("\n"))


def holds(text, run):
    """Does TEXT (normalised) hold RUN as a whole command: not inside a longer word, and ending
    where its line, a quote, a comment, a redirection or a shell operator (; & | )) ends it?"""
    pattern = (r"(?<![\w./-])" + re.escape(" ".join(run.split()))
               + r"(?=[ \t]*(?:$|[;&|)\"'`#]|[0-9]*[<>]))")
    return re.search(pattern, text, re.M) is not None


def without_comment_lines(text):
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("#"))


# ---- make's targets, CI's phases -----------------------------------------------------------------

RULE_RE = re.compile(r"^([^\t#=:][^=:]*?)\s*::?(?![=])\s*(.*)$")
DIRECTIVE_RE = re.compile(r"^\s*(?:ifeq|ifneq|ifdef|ifndef|else|endif)\b")


def make_files(root):
    files = ["Makefile"]
    text = read(root, "Makefile")
    for m in re.finditer(r"^-?include\s+(\S+\.mk)\s*$", text, re.M):
        if os.path.isfile(os.path.join(root, m.group(1))):
            files.append(m.group(1))
    return files


def plain_variables(root):
    """{NAME: value} of the make variables set once, with `:=`, to a value that refers to nothing."""
    seen = {}
    for rel in make_files(root):
        for m in re.finditer(r"^(\w+)\s*(:?=|\?=|\+=)\s*(.*?)\s*$", read(root, rel), re.M):
            seen.setdefault(m.group(1), []).append((m.group(2), m.group(3)))
    return {name: sets[0][1] for name, sets in seen.items()
            if len(sets) == 1 and sets[0][0] == ":=" and "$" not in sets[0][1] and "#" not in sets[0][1]}


def recipes(root):
    """{target: [(file, prerequisites, recipe text)]} of the Makefile and its included .mk files."""
    rules = {}
    for rel in make_files(root):
        targets, prereq, body = None, "", []

        def flush():
            if targets:
                for t in targets:
                    rules.setdefault(t, []).append((rel, prereq, "\n".join(body)))
        text = read(root, rel)
        # `X_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))`: the .mk file's own folder.
        for var in re.findall(r"^(\w+)\s*:?=\s*\$\(patsubst %/,%,\$\(dir \$\(lastword \$\(MAKEFILE_LIST\)\)\)\)\s*$",
                              text, re.M):
            text = text.replace(f"$({var})", os.path.dirname(rel) or ".")
        for name, value in plain_variables(root).items():
            text = text.replace(f"$({name})", value)
        lines = text.replace("\\\n", " ").split("\n")
        for line in lines:
            if line.startswith("\t"):
                if targets:
                    body.append(line)
                continue
            if DIRECTIVE_RE.match(line) or not line.strip() or line.lstrip().startswith("#"):
                continue
            m = RULE_RE.match(line)
            flush()
            targets, body = None, []
            if m and not line.startswith((".PHONY", "export ", "override ")):
                targets = m.group(1).split()
                prereq = m.group(2).split(";")[0].replace("|", " ")
        flush()
    return rules


def make_goals(command):
    words = command.split()
    if not words or words[0] not in ("make", "$(MAKE)"):
        return []
    return [w for w in words[1:] if not w.startswith("-") and "=" not in w and not w.startswith(("'", '"'))]


def ci_phases(root):
    """{phase name: its command} of .ci/run's `phase NAME CMD...` lines."""
    phases = {}
    for line in without_comment_lines(read(root, CI_RUN)).split("\n"):
        for m in re.finditer(r"(?:^\s*|[;&|]\s*|\b(?:then|else)\s+)phase\s+([\w-]+)\s+([^;]*)", line):
            phases.setdefault(m.group(1), []).append(m.group(2).strip())
    return phases


def reached(rules, goals, plain=False):
    """Every target make reaches from GOALS: plain-word prerequisites and recipe `make GOAL` calls
    (plain: only calls that set no variable)."""
    seen, todo = set(), list(goals)
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        for rel, prereq, body in rules.get(t, []):
            todo += [w for w in prereq.split() if "$" not in w and "%" not in w]
            for line in normalise(body.replace("\n", " ; "), True).split(" ; "):
                for m in re.finditer(r"(?:^|[;&|]\s*|@)make\s+([^;&|]*)", line):
                    if not (plain and re.search(r"(?:^|\s)\w+=", m.group(1))):
                        todo += make_goals("make " + m.group(1))
    return seen


def scripts_run(root, rules, targets):
    """Repository files named in the recipes of TARGETS, and in those files, to any depth."""
    named = set()
    texts = [body for t in targets for _, _, body in rules.get(t, [])]
    while texts:
        text = texts.pop()
        for m in re.finditer(r"(?<![\w./-])([\w.-]+(?:/[\w.-]+)+\.(?:sh|py|sbatch))\b", text):
            rel = m.group(1)
            if rel not in named and os.path.isfile(os.path.join(root, rel)):
                named.add(rel)
                texts.append(without_comment_lines(read(root, rel)))
    return named


# ---- the check ---------------------------------------------------------------------------------

def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def read_manifest(root):
    entries = []
    if not os.path.isfile(os.path.join(root, MANIFEST)):
        return entries
    for n, line in enumerate(read(root, MANIFEST).split("\n"), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        entries.append((n, parts))
    return entries


def check_entry(root, n, parts, rules, phases, problems):
    where_line = f"{MANIFEST}:{n}"
    if len(parts) not in (3, 4):
        problems.append(f"{where_line}: expected `COMMAND | PHASE | WHERE [| RUN]`")
        return
    command, phase, where = parts[:3]
    run = parts[3] if len(parts) == 4 else command
    if not template_regex(command).fullmatch(" ".join(run.split())):
        problems.append(f"{where_line}: `{run}` is not an instance of `{command}`")
        return
    if phase == "ci":
        if (command, where) != ("bash .ci/run", CI_RUN):
            problems.append(f"{where_line}: phase `ci` is for `bash .ci/run` alone")
        return
    if phase == "none":
        return
    if phase not in phases:
        problems.append(f"{where_line}: no CI phase `{phase}` in {CI_RUN} (phases: {', '.join(phases)})")
        return
    goals = [g for cmd in phases[phase] for g in make_goals(cmd)]
    targets = reached(rules, goals)
    if where == "make":
        goals_run = make_goals(run)
        plain_targets = reached(rules, [g for cmd in phases[phase] if not re.search(r"\s\w+=", cmd)
                                        for g in make_goals(cmd)], plain=True)
        if not goals_run or goals_run != run.split()[1:]:
            problems.append(f"{where_line}: `make` as WHERE is for `make GOAL...` without options or variables")
        for g in goals_run:
            if g not in plain_targets:
                problems.append(f"{where_line}: CI phase `{phase}` ({'; '.join(phases[phase])}) does not make `{g}` "
                                "(as a prerequisite or a `$(MAKE) GOAL` that sets no variable)")
        return
    if where == CI_RUN:
        if not holds(normalise(without_comment_lines(read(root, CI_RUN)), False), run):
            problems.append(f"{where_line}: {CI_RUN} does not run `{run}`")
        return
    rel, _, target = where.partition(":")
    if not os.path.isfile(os.path.join(root, rel)):
        problems.append(f"{where_line}: {rel}: no such file")
        return
    if target:
        bodies = [body for f, _, body in rules.get(target, []) if f == rel]
        if not bodies:
            problems.append(f"{where_line}: {rel} has no recipe for `{target}`")
        elif not any(holds(normalise(b, True), run) for b in bodies):
            problems.append(f"{where_line}: the recipe of `{target}` in {rel} does not run `{run}`")
        elif target not in targets:
            problems.append(f"{where_line}: CI phase `{phase}` ({'; '.join(phases[phase])}) does not reach make target `{target}`")
        return
    if not holds(normalise(without_comment_lines(read(root, rel)), rel.endswith(".mk")), run):
        problems.append(f"{where_line}: {rel} does not run `{run}`")
    elif rel not in scripts_run(root, rules, targets):
        problems.append(f"{where_line}: CI phase `{phase}` ({'; '.join(phases[phase])}) does not run {rel}")


def check(root, problems, listing=None):
    found = []
    for rel in docs(root):
        for n, command, tag in doc_commands(root, rel, read(root, rel)):
            found.append((rel, n, command, tag))
    entries = read_manifest(root)
    by_command = {}
    for n, parts in entries:
        if parts:
            if parts[0] in by_command:
                problems.append(f"{MANIFEST}:{n}: `{parts[0]}` is listed twice")
            by_command[parts[0]] = (n, parts)
    rules, phases = recipes(root), ci_phases(root)
    for n, parts in entries:
        check_entry(root, n, parts, rules, phases, problems)
    shown = set()
    for rel, n, command, tag in found:
        shown.add(command)
        entry = by_command.get(command)
        if listing is not None:
            how = f"needs a {tag}" if tag else (f"{entry[1][1]}: {entry[1][2]}" if entry else "NOT COVERED")
            listing.append(f"{rel}:{n}: {command}  [{how}]")
        if not tag and not entry:
            problems.append(f"{rel}:{n}: `{command}` is run by no test ({MANIFEST}) and not tagged "
                            "'(needs a GPU)' or '(needs a cluster)'")
    for command, (n, _) in by_command.items():
        if command not in shown:
            problems.append(f"{MANIFEST}:{n}: stale: no doc shows `{command}`")
    return found


# ---- --self-test ---------------------------------------------------------------------------------

SELF_TEST_DOC = """\
# Sample

```sh
make run     # train
make trainer && make data
sbatch --ntasks=4 slurm/train.sbatch --epochs 1   # needs a cluster: 4 GPUs
make bench   # or: bash bench/run.sh --quick
```

Indented:

    # needs a GPU
    build/cuda/bin/nn_train --epochs 1
    make sanitize-gpu

    deps: cxx  found

`make test-more` runs the rest; `make gone` (needs a GPU) is tagged; `make untested` is not.
`tests/cli/` is a path, `nn_train` a name, `--device cpu` an option, `nsys stats` a tool's,
`nn_train --data $NN_DATA "$@"` a script's line; `bash tests/x.sh FILE` is a template and
`nn_train --save FILE` (needs a GPU) one too. `make all`, `make lost`, `make peer`, `bash tests/y.sh`,
`make test-build` and `make test-cpu NP_LIST='1 2'` are in the manifest; `module load`, `spack install`.
`make tidy` is run only with more words after it.
"""

SELF_TEST_MANIFEST = """\
make run | test | tests/docs/commands.sh
make trainer | test | Makefile:test-build
make data | test | .ci/run
make bench | test | tests/docs/commands.sh | make bench
bash bench/run.sh --quick | test | tests/docs/commands.sh
make test-more | test-more | .ci/run
bash tests/x.sh FILE | test | tests/docs/commands.sh | bash tests/x.sh /tmp/a b
make gone | test | .ci/run
make stale | test | .ci/run
make bench | test | tests/docs/commands.sh
make all | test | make
make lost | test | make
make peer | none | PyPI downloads
bash tests/y.sh | test | tests/y.sh
make test-build | test | Makefile:test-build
make test-cpu NP_LIST='1 2' | test | Makefile:test
make tidy | test | tests/docs/commands.sh
"""

SELF_TEST_FILES = {
    "README.md": SELF_TEST_DOC,
    ".ci/run": "phase test make test\nphase test-more make test-more\n# make data\n",
    "Makefile": ("include tests/docs/docs.mk\nTEST_NP := 1 2\ntest: all\n\t@$(MAKE) --no-print-directory -j1 test-build\n"
                 "\t@$(MAKE) -j1 test-cpu NP_LIST='$(TEST_NP)'\n\t$(MAKE) X=1 lost\n"
                 "test-build: data\n\t@bash tests/docs/commands.sh\n\t$(MAKE) trainer\n"),
    "tests/docs/docs.mk": "test-docs:\n\tbash tests/docs/commands.sh\n",
    "tests/docs/commands.sh": "make run\nmake benchmark\nbash bench/run.sh  --quick\n# bash tests/x.sh /tmp/a\nmake tidy V=1\n",
    "slurm/train.sbatch": "", "bench/run.sh": "", "tests/x.sh": "", "tests/y.sh": "bash tests/y.sh\n",
}

SELF_TEST_WANT = [
    "tests/docs/commands.txt:3: .ci/run does not run `make data`",
    "tests/docs/commands.txt:4: tests/docs/commands.sh does not run `make bench`",
    "tests/docs/commands.txt:7: `bash tests/x.sh /tmp/a b` is not an instance of `bash tests/x.sh FILE`",
    "tests/docs/commands.txt:8: .ci/run does not run `make gone`",
    "tests/docs/commands.txt:9: .ci/run does not run `make stale`",
    "tests/docs/commands.txt:10: `make bench` is listed twice",
    "tests/docs/commands.txt:10: tests/docs/commands.sh does not run `make bench`",
    "README.md:18: `make untested` is run by no test (tests/docs/commands.txt) and not tagged "
    "'(needs a GPU)' or '(needs a cluster)'",
    "tests/docs/commands.txt:9: stale: no doc shows `make stale`",
    "tests/docs/commands.txt:12: CI phase `test` (make test) does not make `lost` "
    "(as a prerequisite or a `$(MAKE) GOAL` that sets no variable)",
    "tests/docs/commands.txt:14: CI phase `test` (make test) does not run tests/y.sh",
    "tests/docs/commands.txt:15: the recipe of `test-build` in Makefile does not run `make test-build`",
    "tests/docs/commands.txt:17: tests/docs/commands.sh does not run `make tidy`",
    "README.md:22: `spack install` is run by no test (tests/docs/commands.txt) and not tagged "
    "'(needs a GPU)' or '(needs a cluster)'",
]

SELF_TEST_FOUND = [
    (4, "make run", None), (5, "make trainer", None), (5, "make data", None),
    (6, "sbatch --ntasks=4 slurm/train.sbatch --epochs 1", "cluster"),
    (7, "make bench", None), (7, "bash bench/run.sh --quick", None),
    (13, "build/cuda/bin/nn_train --epochs 1", "GPU"), (14, "make sanitize-gpu", "GPU"),
    (18, "make test-more", None), (18, "make gone", "GPU"), (18, "make untested", None),
    (20, "bash tests/x.sh FILE", None), (21, "nn_train --save FILE", "GPU"),
    (21, "make all", None), (21, "make lost", None), (21, "make peer", None), (21, "bash tests/y.sh", None),
    (22, "make test-build", None), (22, "make test-cpu NP_LIST='1 2'", None), (22, "spack install", None),
    (23, "make tidy", None),
]


def self_test():
    import tempfile
    failed = 0
    with tempfile.TemporaryDirectory() as root:
        for rel, text in dict(SELF_TEST_FILES, **{MANIFEST: SELF_TEST_MANIFEST}).items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        problems = []
        found = [(n, c, t) for _, n, c, t in check(root, problems)]
    for name, got, want in (("commands found", found, SELF_TEST_FOUND), ("problems", problems, SELF_TEST_WANT)):
        ok = sorted(got) == sorted(want)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(got)}" + ("" if ok else
              f"\n  missing: {sorted(set(want) - set(got))}\n  unexpected: {sorted(set(got) - set(want))}"))
    samples = [("bash tests/build/same_saves.sh [OLD [NEW]]", "bash tests/build/same_saves.sh", True),
               ("bash tests/build/same_saves.sh [OLD [NEW]]", "bash tests/build/same_saves.sh a b", True),
               ("bash tests/build/same_saves.sh [OLD [NEW]]", "bash tests/build/same_saves.sh a b c", False),
               ("bash slurm/train.sbatch ...", "bash slurm/train.sbatch --epochs 1", True),
               ("bash slurm/train.sbatch ...", "bash slurm/profile.sbatch", False),
               ("python3 bench/scaling_plot.py build/scaling/job<id>", "python3 bench/scaling_plot.py build/scaling/job7", True),
               ("nn_train --strategy allreduce|ps|model", "nn_train --strategy ps", True),
               ("nn_train --strategy allreduce|ps|model", "nn_train --strategy all", False),
               ("make run RUN_ARGS='--epochs 3'", "make run RUN_ARGS='--epochs 3'", True),
               ("make run RUN_ARGS='--epochs 3'", "make run RUN_ARGS='--epochs 4'", False)]
    for command, run, want in samples:
        got = template_regex(command).fullmatch(run) is not None
        failed += got != want
        print(f"{'ok  ' if got == want else 'FAIL'} `{run}` {'is' if got else 'is not'} an instance of `{command}`")
    total = 2 + len(samples)
    print(f"self-test: {total - failed} of {total} samples as expected")
    return 1 if failed else 0


def main(argv):
    args = list(argv[1:])
    if args == ["--self-test"]:
        return self_test()
    listing = None
    if args[:1] == ["--list"]:
        listing, args = [], args[1:]
    root = args[0] if args else "."
    problems = []
    found = check(root, problems, listing)
    if listing is not None:
        print("\n".join(listing))
        phase = {parts[0]: parts[1] for _, parts in read_manifest(root) if len(parts) > 1}
        tags = [t for _, _, _, t in found if t]
        untested = [c for _, _, c, t in found if not t and phase.get(c) == "none"]
        print(f"{len(found)} doc commands ({len({c for _, _, c, _ in found})} distinct): "
              f"{len(found) - len(tags) - len(untested)} run by CI ({len({c for _, _, c, t in found if not t and phase.get(c, 'none') != 'none'})} distinct), "
              f"{tags.count('GPU')} tagged as needing a GPU, {tags.count('cluster')} a cluster, "
              f"{len(untested)} not run by CI ({len(set(untested))} distinct: `none` in {MANIFEST})")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
