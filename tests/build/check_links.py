#!/usr/bin/env python3
"""Checks the links of the repository's Markdown files (standard library only, no network).

    python3 tests/build/check_links.py [ROOT]        # ROOT: the repository (default: .)

1. Every relative Markdown link, `[text](path)`, `[text](path#anchor)`, `![alt](path)` or a
   reference definition `[name]: path`, in every Markdown file git knows (`git ls-files
   '*.md'`, plus new files not yet added and not ignored; bench/results/** is skipped) must
   name an existing file or directory, relative to the Markdown file (a leading `/`: to the
   repository root). An `#anchor` must be the GitHub slug of a heading of the target
   (lowercase, spaces to '-', punctuation other than '-' and '_' dropped, `-1`, `-2` ...
   for repeated headings); a link to a directory checks the anchor against its README.md;
   a link to a non-Markdown file accepts only GitHub's line anchors (`#L10`, `#L10-L20`).
   http(s), mailto and other URLs with a scheme are skipped (never fetched).
2. Every backticked repository path in README.md and docs/*.md that starts with src/,
   kernels/, sim/, tests/, bench/, docs/, slurm/, data/ or .ci/ must exist. Only the first
   word of a backticked command counts (`sim/simcc -O2 prog.cu` checks sim/simcc); a
   trailing `:LINE` is stripped; `*` globs and `{a,b}` alternatives are expanded (every
   alternative must exist, a glob must match something); a `<placeholder>` matches like
   `*`. Paths under build/ are not checked, nor paths git ignores (what `make data` and the
   builds create, such as data/current).

Links inside fenced or indented code blocks and inside code spans are not links. Each
problem is printed as `FILE:LINE: broken link: TARGET` (a backticked path: `FILE:LINE:
broken path: PATH`); the exit status is 1 if there was any, else 0.
"""

import glob
import os
import re
import subprocess
import sys
import urllib.parse

PATH_PREFIXES = ("src/", "kernels/", "sim/", "tests/", "bench/", "docs/", "slurm/", "data/", ".ci/")
SKIP_MD_DIRS = ("bench/results/",)
# Generated paths, when git cannot tell (ROOT is not a git checkout).
FALLBACK_IGNORED = ("build/", "data/current", "data/mnist/", "profiles/")

FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
LIST_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
# [text](target "title"): text without brackets, or one level of nested brackets.
INLINE_LINK_RE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
REF_DEF_RE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LINE_ANCHOR_RE = re.compile(r"^L\d+(?:C\d+)?(?:-L\d+(?:C\d+)?)?$")


def git_lines(root, *args):
    try:
        out = subprocess.run(
            ["git", "-C", root, *args], check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [line for line in out.split("\n") if line]


def markdown_files(root):
    files = git_lines(root, "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.md")
    if files is None:  # not a git checkout: walk the tree
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if x not in (".git", "build")]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(".md")]
    files = sorted(set(f.replace(os.sep, "/") for f in files))
    return [
        f
        for f in files
        if not f.startswith(SKIP_MD_DIRS) and os.path.isfile(os.path.join(root, f))
    ]


def mask_code(text):
    """The text with fenced and indented code blocks blanked (line breaks kept)."""
    lines = text.split("\n")
    out = []
    fence = None  # the opening fence while inside a fenced block
    in_indented = False
    prev_blank = True
    for line in lines:
        if fence is not None:
            out.append("")
            m = FENCE_RE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and \
                    not line.strip()[len(m.group(1)):].strip():
                fence = None
            continue
        m = FENCE_RE.match(line)
        if m:
            fence = m.group(1)
            out.append("")
            in_indented = False
            prev_blank = False
            continue
        blank = not line.strip()
        indented = line.startswith("    ") or line.startswith("\t")
        if in_indented and (blank or indented):
            out.append("")
            continue
        in_indented = False
        if indented and prev_blank and not blank and not LIST_RE.match(line):
            in_indented = True
            out.append("")
            prev_blank = False
            continue
        out.append(line)
        prev_blank = blank
    return "\n".join(out)


def code_spans(text):
    """(start, end, content) of each inline code span of text (code blocks already masked)."""
    spans = []
    i = 0
    n = len(text)
    while i < n:
        if text[i] == "\\" and i + 1 < n:
            i += 2
            continue
        if text[i] != "`":
            i += 1
            continue
        j = i
        while j < n and text[j] == "`":
            j += 1
        ticks = text[i:j]
        k = j
        found = -1
        while True:
            k = text.find(ticks, k)
            if k < 0:
                break
            end = k + len(ticks)
            if (end < n and text[end] == "`") or text[k - 1] == "`":
                k = end
                while k < n and text[k] == "`":
                    k += 1
                continue
            found = k
            break
        if found < 0:
            i = j
            continue
        content = text[j:found]
        if "\n\n" not in content:  # a span never crosses a paragraph break
            spans.append((i, found + len(ticks), content.replace("\n", " ")))
            i = found + len(ticks)
        else:
            i = j
    return spans


def blank_spans(text, spans):
    chars = list(text)
    for start, end, _ in spans:
        for p in range(start, end):
            if chars[p] != "\n":
                chars[p] = " "
    return "".join(chars)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def heading_text_to_slug(text):
    t = text
    t = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", t)  # images: alt text
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t)  # links: their text
    t = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", t)
    t = re.sub(r"<[^>]+>", "", t)  # HTML tags
    t = t.replace("`", "").replace("*", "")
    t = t.strip().lower()
    t = "".join(c for c in t if c.isalnum() or c in " -_")
    return t.replace(" ", "-")


def heading_slugs(path, cache={}):
    if path in cache:
        return cache[path]
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        cache[path] = set()
        return cache[path]
    lines = mask_code(text).split("\n")
    titles = []
    for i, line in enumerate(lines):
        m = ATX_RE.match(line)
        if m:
            title = re.sub(r"[ \t]+#+[ \t]*$", "", m.group(2) or "")
            title = "" if re.fullmatch(r"#+", title.strip()) else title
            titles.append(title)
            continue
        if i > 0 and SETEXT_RE.match(line):
            prev = lines[i - 1]
            if prev.strip() and not ATX_RE.match(prev) and not LIST_RE.match(prev) \
                    and not SETEXT_RE.match(prev) and "|" not in prev:
                titles.append(prev.strip())
    slugs = set()
    seen = {}
    for title in titles:
        slug = heading_text_to_slug(title)
        if slug in seen:
            seen[slug] += 1
            slugs.add(f"{slug}-{seen[slug]}")
        else:
            seen[slug] = 0
            slugs.add(slug)
    # Explicit HTML anchors: <a name="x"> or id="x".
    for m in re.finditer(r"<a\s[^>]*(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", text):
        slugs.add(m.group(1))
    cache[path] = slugs
    return slugs


def check_link(root, md, target):
    """None if target resolves, else a short reason."""
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or SCHEME_RE.match(target) or target.startswith("//"):
        return None
    path, _, anchor = target.partition("#")
    path = urllib.parse.unquote(path.split("?", 1)[0])
    anchor = urllib.parse.unquote(anchor)
    md_abs = os.path.join(root, md)
    if path:
        if path.startswith("/"):
            full = os.path.normpath(os.path.join(root, path.lstrip("/")))
        else:
            full = os.path.normpath(os.path.join(os.path.dirname(md_abs), path))
        if not os.path.exists(full):
            return "no such file or directory"
    else:
        full = md_abs
    if not anchor:
        return None
    if os.path.isdir(full):
        readme = os.path.join(full, "README.md")
        if not os.path.isfile(readme):
            return "anchor on a directory without README.md"
        full = readme
    if not full.lower().endswith((".md", ".markdown")):
        return None if LINE_ANCHOR_RE.match(anchor) else "anchor on a file that has no headings"
    if anchor not in heading_slugs(full):
        return "no heading with this anchor"
    return None


def expand_braces(s):
    m = re.search(r"\{([^{}]*)\}", s)
    if not m:
        return [s]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(s[: m.start()] + alt + s[m.end():])
    return out


class Ignored:
    """Which paths git ignores (generated: build outputs, downloaded data)."""

    def __init__(self, root):
        self.root = root
        self.git = git_lines(root, "rev-parse", "--is-inside-work-tree") == ["true"]

    def __call__(self, rel):
        if rel.startswith("build/"):
            return True
        if not self.git:
            return rel.startswith(FALLBACK_IGNORED) or rel.rstrip("/") + "/" in FALLBACK_IGNORED
        # A missing path cannot tell git it is a directory: ask for both forms, so that a
        # directory pattern (/data/mnist/) matches too.
        for form in {rel.rstrip("/"), rel.rstrip("/") + "/"}:
            r = subprocess.run(
                ["git", "-C", self.root, "check-ignore", "-q", "--no-index", form],
                capture_output=True,
            )
            if r.returncode == 0:
                return True
        return False


def check_path(root, candidate, ignored):
    """None if the backticked path exists, else the first alternative that does not."""
    for alt in expand_braces(candidate):
        pattern = re.sub(r"<[^<>/]*>", "*", alt)
        if ignored(pattern.replace("*", "x")):
            continue
        if any(c in pattern for c in "*?["):
            if not glob.glob(os.path.join(root, pattern)):
                return alt
        elif not os.path.exists(os.path.join(root, pattern)):
            return alt
    return None


def path_candidate(content):
    word = content.strip().split()
    if not word:
        return None
    word = word[0]
    if not word.startswith(PATH_PREFIXES):
        return None
    word = re.sub(r":\d+(?:-\d+)?$", "", word)  # file.cpp:123
    word = word.rstrip(",;")
    return word


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    root = os.path.abspath(argv[1] if len(argv) == 2 else ".")
    if not os.path.isdir(root):
        print(f"check_links: {root}: not a directory", file=sys.stderr)
        return 2
    ignored = Ignored(root)
    problems = []
    n_links = n_paths = 0
    files = markdown_files(root)
    for md in files:
        with open(os.path.join(root, md), encoding="utf-8", errors="replace") as f:
            text = f.read()
        masked = mask_code(text)
        spans = code_spans(masked)
        prose = blank_spans(masked, spans)
        targets = [(m.start(1), m.group(1)) for m in INLINE_LINK_RE.finditer(prose)]
        targets += [(m.start(1), m.group(1)) for m in REF_DEF_RE.finditer(prose)]
        for offset, target in sorted(targets):
            n_links += 1
            if check_link(root, md, target) is not None:
                problems.append((md, line_of(prose, offset), "broken link", target))
        if md == "README.md" or re.fullmatch(r"docs/[^/]+\.md", md):
            for start, _, content in spans:
                cand = path_candidate(content)
                if cand is None:
                    continue
                n_paths += 1
                bad = check_path(root, cand, ignored)
                if bad is not None:
                    shown = cand if bad == cand else f"{cand} ({bad})"
                    problems.append((md, line_of(masked, start), "broken path", shown))
    order = {md: i for i, md in enumerate(files)}
    problems.sort(key=lambda p: (order[p[0]], p[1]))
    for md, line, kind, target in problems:
        print(f"{md}:{line}: {kind}: {target}")
    summary = (f"check_links: {len(files)} Markdown files, {n_links} links, "
               f"{n_paths} backticked paths: ")
    if problems:
        print(summary + f"{len(problems)} broken", file=sys.stderr)
        return 1
    print(summary + "all resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
