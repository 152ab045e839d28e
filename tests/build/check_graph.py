#!/usr/bin/env python3
"""The Makefile's dependency graph, checked from make's own database (make -p).

1. dependencies first: every target with a recipe, in every configuration below, reaches `setup`
   or a dependency stamp $(BUILD)/.need-ROLE (make/deps.mk) through its prerequisites (normal or
   order-only), so under any -j nothing compiles, links or runs before its dependencies were
   found (and, as root on Debian, installed). The few targets that need nothing are listed in
   EXEMPT, each with its reason.
   Each target needs only what it uses: make trainer (CUDA) reaches no GoogleTest or
   Boost.Context stamp, make trainer (no nvcc) no GoogleTest stamp, make data none at all.
   A goal that builds a test binary puts every step behind GoogleTest's stamp (make/deps.mk):
   without GoogleTest, make .../nn_tests stops before compiling anything, under any -j.
2. `make run` builds only what it runs: without a GPU, the emulator trainer and nothing
   under the CUDA build directory (no nvcc); with a GPU (and nvcc), the CUDA trainer and
   nothing of the emulator build.
3. `make` (all) still builds both builds when nvcc exists.

The database comes from `make -p -n -B` on a scratch BUILD directory with the recursive
$(MAKE) calls disabled, so nothing is built or run. Usage (from the repository root):
    python3 tests/build/check_graph.py [make]
Prints one line per check and `build-graph: N passed, M failed`; exit status 1 on failure.
"""
import os
import re
import subprocess
import sys
import tempfile

MAKE = sys.argv[1] if len(sys.argv) > 1 else "make"
GOALS = ["all", "run", "bench", "plots", "peer", "test", "test-cpu", "test-gpu-grid",
         "test-nvtx", "test-sim-examples", "test-cli", "test-cuda", "sanitize-gpu",
         "test-slurm", "fuzz", "scaling", "data"]
# Targets whose recipe needs nothing that setup installs.
EXEMPT = {
    "setup": "setup itself",
    "help": "prints text",
    "clean": "rm -rf",
    "all": "its recipe only prints a note; its prerequisites are checked",
    "data": "data/get_mnist.sh needs no library",
    "trainer": "its recipe only prints the trainer's path; its prerequisites are checked",
    "test-cluster": "builds inside the simulated login node (tests/cluster/run.sh), with that node's modules",
    "test-cuda12": "tests/cluster/cuda12.sh fetches its own CUDA 12 and runs a make of its own, which probes",
}
EXEMPT_PATTERNS = [
    (re.compile(r"/\.setup-done$"), "the setup stamp: runs .ci/setup.sh itself"),
    (re.compile(r"/nvtx-include/nvtx3$"), "a symbolic link to the CUDA toolkit's NVTX headers"),
    (re.compile(r"/(deps\.mk|deps\.env|\.need-[a-z]+|\.cuda-arch-[0-9_]+)$"), "the dependency probe and its stamps"),
]


def database(build, extra, goals=(*GOALS, "trainer")):
    cmd = [MAKE, "-p", "-n", "-B", "--no-print-directory", "MAKE=:", f"BUILD={build}",
           "SANITIZE=", "USE_DOUBLE=", "DEBUG=", "NN_NO_PROBE=1", *extra, *goals]
    # Not the calling make's flags and variables (SANITIZE=1, say): the default configuration.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if "# Files" not in out.stdout:
        sys.exit(f"check_graph: `{' '.join(cmd)}` printed no database:\n{out.stderr[-2000:]}")
    return out.stdout.split("# Files", 1)[1]


def parse(files_section):
    """{target: (prerequisites, has_recipe)} from the '# Files' part of make -p."""
    graph = {}
    for entry in files_section.split("\n\n"):
        lines = entry.strip("\n").split("\n")
        if not lines or lines[0].startswith("# Not a target:"):
            continue
        # The rule line; not a target-specific variable (`target: VAR += value`), which make
        # prints in the same entry.
        head = next((l for l in lines if l and not l.startswith(("#", "\t")) and
                     not re.match(r"^[^:]+:\s*[A-Za-z_][A-Za-z0-9_]*\s*[+:?!]?=", l)), None)
        m = re.match(r"^(.+?)::?(?!=)\s*(.*)$", head or "")
        if not m or re.fullmatch(r"\.[A-Z_]+", m.group(1).strip()):  # .PHONY, .DEFAULT_GOAL, ...
            continue
        target, rest = m.group(1).strip(), m.group(2)
        prereqs = rest.replace("|", " ").split()
        has_recipe = any(l.startswith("\t") and l.strip() for l in lines)
        old = graph.get(target, (set(), False))
        graph[target] = (old[0] | set(prereqs), old[1] or has_recipe)
    return graph


def reaches(graph, start, goal, memo):
    if start == goal:
        return True
    if start in memo:
        return memo[start]
    memo[start] = False  # cycles: not through here
    memo[start] = any(reaches(graph, p, goal, memo) for p in graph.get(start, ((), False))[0])
    return memo[start]


def closure(graph, start):
    seen, todo = set(), [start]
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        todo.extend(graph.get(t, ((), False))[0])
    return seen


passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    if ok:
        passed += 1
    else:
        failed += 1


def exempt(target):
    if target in EXEMPT:
        return True
    return any(p.search(target) for p, _ in EXEMPT_PATTERNS)


with tempfile.TemporaryDirectory() as tmp:
    build = os.path.join(tmp, "b")
    configs = {
        "no GPU, nvcc": ["HAVE_NVCC=yes", "GPU_VISIBLE="],
        "no GPU, no nvcc": ["HAVE_NVCC=", "GPU_VISIBLE="],
        "GPU and nvcc": ["HAVE_NVCC=yes", "GPU_VISIBLE=yes"],
    }
    graphs = {name: parse(database(build, extra)) for name, extra in configs.items()}

    for name, graph in graphs.items():
        with_recipe = [t for t, (_, r) in graph.items() if r and not exempt(t)]
        stamps = {t for t in graph if re.search(r"/\.need-[a-z]+$", t)} | {"setup"}
        memos = {g: {} for g in stamps}
        late = sorted(t for t in with_recipe if not any(reaches(graph, t, g, memos[g]) for g in stamps))
        check(len(with_recipe) > 50 and not late,
              f"[{name}] all {len(with_recipe)} targets with a recipe come after setup or a dependency stamp"
              + (f"; not: {', '.join(late[:8])}{' ...' if len(late) > 8 else ''}" if late else ""))

    cpu, cuda = f"{build}/cpu/", f"{build}/cuda/"
    for name in ("no GPU, nvcc", "no GPU, no nvcc"):
        run = closure(graphs[name], "run")
        built_cuda = sorted(t for t in run if t.startswith(cuda))
        check(f"{cpu}bin/nn_train" in run and not built_cuda,
              f"[{name}] make run builds the emulator trainer and nothing under build/cuda"
              + (f"; it would build {built_cuda[:3]}" if built_cuda else ""))
        extra = sorted(t for t in run if t.startswith(cpu + "bin/") and not t.endswith("/nn_train"))
        check(not extra, f"[{name}] make run links no other program" + (f"; it would link {extra}" if extra else ""))
    run = closure(graphs["GPU and nvcc"], "run")
    check(f"{cuda}bin/nn_train" in run and not any(t.startswith(cpu) for t in run),
          "[GPU and nvcc] make run builds the CUDA trainer and nothing of the emulator build")
    for name, binary, never in (("no GPU, nvcc", f"{cuda}bin/nn_train", ("tests", "emulator")),
                                ("no GPU, no nvcc", f"{cpu}bin/nn_train", ("tests", "cuda"))):
        # The graph of make trainer alone: a goal that builds a test binary adds GoogleTest's
        # stamp to every step (GOAL_NEEDS, make/deps.mk).
        t = closure(parse(database(build, configs[name], ["trainer"])), "trainer")
        wrong = sorted(r for r in never if f"{build}/.need-{r}" in t)
        check(binary in t and f"{build}/.need-trainer" in t and not wrong,
              f"[{name}] make trainer builds {binary[len(build) + 1:]} and checks no {' or '.join(never)} dependency"
              + (f"; it checks {wrong}" if wrong else ""))
    for name in ("no GPU, nvcc", "no GPU, no nvcc"):
        binary = f"{cpu if name.endswith('no nvcc') else cuda}bin/nn_tests"
        graph = parse(database(build, configs[name], [binary]))
        memo = {}
        steps = [x for x in closure(graph, binary) if graph.get(x, ((), False))[1] and not exempt(x)]
        early = sorted(x for x in steps if not reaches(graph, x, f"{build}/.need-tests", memo))
        check(len(steps) > 50 and not early,
              f"[{name}] make {binary[len(build) + 1:]}: all {len(steps)} steps wait for GoogleTest's stamp"
              + (f"; not: {', '.join(early[:4])}" if early else ""))
    t = closure(graphs["no GPU, nvcc"], "data")
    check(not any("/.need-" in x or x == "setup" for x in t), "make data checks no dependency")
    everything = closure(graphs["no GPU, nvcc"], "all")
    check(f"{cuda}bin/nn_tests" in everything and f"{cpu}bin/nn_tests" in everything,
          "[no GPU, nvcc] make (all) still builds both builds' test binaries")

print(f"build-graph: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
