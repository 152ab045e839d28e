#!/usr/bin/env python3
"""Sizes a newcomer can read in one sitting (run by `make test-build`).

Every C++/CUDA source under the given directories (default: src/) must be at most MAX_FILE
lines, and every function body at most MAX_FUNC lines (from the line of its opening brace to
the line of its closing one). Functions are found by brace matching on the source with
comments and string literals blanked out: a '{' at namespace or class scope that follows a
parameter list ')' (with qualifiers, a trailing return type or a constructor's initialiser
list) opens a function body; lambdas and local classes count toward their enclosing function.

Kernels: a function whose declaration says `__global__` may be longer than MAX_FUNC lines, up to
MAX_KERNEL (120), where the comment directly above its declaration (the comment lines touching
the declaration's first line, `template <...>` included in the declaration) contains the marker
`longer than N lines because`, followed by the reason, e.g.
    // Kernel longer than 60 lines because its main loop keeps the fragments in registers.
Without the marker a kernel has MAX_FUNC lines like any function; with it, never over MAX_KERNEL.

Usage: check_sizes.py [--max-file N] [--max-func N] [--max-kernel N] [DIR_OR_FILE ...]
Exit status 1 with one line per violation, `FILE:LINE: what`.
"""
import argparse
import pathlib
import re
import sys

SUFFIXES = {'.cpp', '.h', '.cu', '.cuh'}


def blank_comments_and_strings(text):
    """Comments and string/char literals become spaces; newlines stay, so lines still count."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            close = ')' + (m.group(1) if m else '') + '"'
            j = text.find(close, i)
            j = n if j < 0 else j + len(close)
        elif text[i] in '"\'' and not (text[i] == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000 separators
            j = i + 1
            while j < n and text[j] != text[i] and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j += 1
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(re.sub(r'[^\n]', ' ', text[i:j]))
        i = j
    return ''.join(out)


def function_name(text, brace):
    """The identifier before the parameter list that precedes the body at `brace`."""
    head = text[max(0, brace - 2000):brace]
    close = head.rfind(')')
    depth = 0
    for k in range(close, -1, -1):
        depth += head[k] == ')'
        depth -= head[k] == '('
        if depth == 0:
            m = re.search(r'([A-Za-z_~][\w:~<>,\s]*?)\s*$', head[:k])
            if m:
                return m.group(1).split()[-1] if m.group(1).split() else '?'
            return '?'
    return '?'


BODY_AFTER_PARAMS = re.compile(
    r'\)\s*(?:const\b|noexcept\b|override\b|final\b|mutable\b|&|\s)*(?:->[^;{}]*)?$')
INIT_LIST = re.compile(r'\)\s*(?:noexcept\s*)?:(?!:)[^;{}]*$')
CONTROL = re.compile(r'\b(if|for|while|switch|catch|constexpr)\s*\([^;{}]*\)\s*$')


LONG_KERNEL_MARKER = re.compile(r'longer than \d+ lines because', re.IGNORECASE)


def declaration(code, text, brace):
    """(is it a __global__ kernel, does the comment directly above say why it is long) for the
    function whose body opens at `brace`."""
    start = max(code.rfind(c, 0, brace) for c in ';{}') + 1
    kernel = '__global__' in code[start:brace]
    code_lines, src_lines = code.split('\n'), text.split('\n')
    first = code.count('\n', 0, start)  # 0-based line where the declaration may start
    tail = code[start:code.find('\n', start)] if '\n' in code[start:] else code[start:]
    if not tail.strip() or tail.lstrip().startswith('#'):
        first += 1
        while not code_lines[first].strip() or code_lines[first].lstrip().startswith('#'):
            first += 1
    above, k = [], first - 1
    while k >= 0 and src_lines[k].strip() and not code_lines[k].strip():  # comment lines only
        above.append(src_lines[k])
        k -= 1
    return kernel, bool(LONG_KERNEL_MARKER.search(' '.join(above)))


def functions(text):
    """(length in lines, first line, name, kernel, reason given) of every function body in the
    source text."""
    code = blank_comments_and_strings(text)
    stack, found = [], []
    for m in re.finditer(r'[{}]', code):
        pos = m.start()
        if m.group() == '{':
            if any(kind == 'func' for kind, _ in stack):
                stack.append(('inner', pos))
                continue
            head = re.sub(r'\s+', ' ', code[max(0, pos - 600):pos]).rstrip()
            is_func = bool(BODY_AFTER_PARAMS.search(head) or INIT_LIST.search(head))
            if is_func and CONTROL.search(head):
                is_func = False
            stack.append(('func' if is_func else 'scope', pos))
        elif stack:
            kind, start = stack.pop()
            if kind == 'func':
                first = code.count('\n', 0, start) + 1
                last = code.count('\n', 0, pos) + 1
                found.append((last - first + 1, first, function_name(code, start))
                             + declaration(code, text, start))
    return found


def sources(paths):
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            yield from sorted(f for f in p.rglob('*') if f.suffix in SUFFIXES)
        elif p.suffix in SUFFIXES:
            yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--max-file', type=int, default=400)
    ap.add_argument('--max-func', type=int, default=60)
    ap.add_argument('--max-kernel', type=int, default=120)
    ap.add_argument('paths', nargs='*', default=['src'])
    a = ap.parse_args()
    bad = checked = 0
    for f in sources(a.paths):
        text = f.read_text(errors='replace')
        checked += 1
        n = text.count('\n')
        if n > a.max_file:
            print(f'{f}:1: {n} lines (at most {a.max_file}: split it by concept)')
            bad += 1
        for length, line, name, kernel, why in functions(text):
            if length <= a.max_func or (kernel and why and length <= a.max_kernel):
                continue
            if kernel and why:
                print(f'{f}:{line}: kernel {name} is {length} lines (at most {a.max_kernel}, even with '
                      f'a reason)')
            elif kernel:
                print(f'{f}:{line}: kernel {name} is {length} lines (at most {a.max_func}; up to '
                      f'{a.max_kernel} with a comment directly above: "longer than {a.max_func} lines '
                      f'because ...")')
            else:
                print(f'{f}:{line}: function {name} is {length} lines (at most {a.max_func})')
            bad += 1
    if not checked:
        print('check_sizes: no sources found in ' + ' '.join(a.paths))
        return 1
    if not bad:
        print(f'check_sizes: {checked} files, each at most {a.max_file} lines, every function at most '
              f'{a.max_func} lines (a kernel that says why, at most {a.max_kernel})')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
