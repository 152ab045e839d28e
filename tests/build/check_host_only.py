#!/usr/bin/env python3
"""The host-only objects (the Makefile's HOST_ONLY_SRCS, in build/host*) are linked into both
builds, so each must be the same code in both: no file it includes may be CUDA's or the
emulator's, or look at the macros that tell the builds apart.

    tests/build/check_host_only.py HOST_DIR [SOURCE...]

HOST_DIR  the host-only build directory (build/host), after a build
SOURCE    the sources that should have been compiled there (HOST_ONLY_SRCS)

Reads each object's dependency file (HOST_DIR/obj/*.d, written by the compiler's -MMD): every
file it lists is read, and fails the check if it lies under sim/ (the emulator), under a CUDA
toolkit's include directory other than nvtx3/ (NVTX's headers are plain C++, the same in both
builds), or if its text mentions SIM_EMULATOR, __CUDACC__, __CUDA_ARCH__ or __NVCC__. The
compiler lists the project's headers only (-MMD); system headers cannot see these macros
differently in the two builds. Prints one line per object, then "host-only: N passed, M failed".
"""
import os
import re
import sys

MACROS = re.compile(r"\b(SIM_EMULATOR|__CUDACC__|__CUDA_ARCH__|__NVCC__)\b")


def deps_of(dfile):
    """The prerequisites of the first rule in a make dependency file."""
    with open(dfile) as f:
        text = f.read().replace("\\\n", " ")
    first = text.split("\n", 1)[0]
    _, _, prereqs = first.partition(":")
    return prereqs.split()


def problem(path):
    real = os.path.realpath(path)
    rel = os.path.relpath(real)
    if rel.startswith("sim" + os.sep):
        return "includes the emulator's " + rel
    m = re.search(r"/(cuda[^/]*|targets/[^/]+)/include/(.*)$", real)
    if m and not m.group(2).startswith("nvtx3/"):
        return "includes CUDA's " + m.group(2)
    try:
        with open(real, errors="replace") as f:
            hit = MACROS.search(f.read())
    except OSError as e:
        return f"cannot read {path}: {e}"
    if hit:
        return f"{path} mentions {hit.group(1)}"
    return None


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    host_dir, sources = argv[1], argv[2:]
    obj_dir = os.path.join(host_dir, "obj")
    passed = failed = 0
    for src in sources:
        dfile = os.path.join(obj_dir, os.path.splitext(src)[0] + ".d")
        if not os.path.exists(dfile):
            print(f"FAIL {src}: no {dfile} (build {host_dir} first)")
            failed += 1
            continue
        issues = [p for p in map(problem, deps_of(dfile)) if p]
        if issues:
            print(f"FAIL {src}: " + "; ".join(issues))
            failed += 1
        else:
            passed += 1
    listed = {os.path.splitext(s)[0] for s in sources}
    for root, _, files in os.walk(obj_dir):
        for name in files:
            if name.endswith(".d"):
                stem = os.path.relpath(os.path.join(root, name[:-2]), obj_dir)
                if stem not in listed:
                    print(f"note: {os.path.join(root, name)} is left from an older HOST_ONLY_SRCS")
    print(f"host-only: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
