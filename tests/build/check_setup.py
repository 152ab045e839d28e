#!/usr/bin/env python3
"""Setup components (.ci/setup.sh COMPONENT): the wiring, without removing any package.

1. `bash .ci/setup.sh nosuch` fails with exit 2 and one line; `--check` with a python that
   cannot import matplotlib fails (exit 1), names the module and installs nothing.
2. Every component of `.ci/setup.sh --list` runs before each target that needs it: for the
   targets below, and every other target whose prerequisites name setup-COMPONENT, a dry run
   (`make -n -j1 --trace`, in a scratch BUILD directory, so every stamp is missing) must show
   the base setup, then `bash .ci/setup.sh COMPONENT`, then the target's own recipe.
3. Each optional component's check agrees with this machine: `.ci/setup.sh --check C` passes,
   or one of the Debian packages it names is not installed here (dpkg-query); a check that
   fails although all its packages are installed would install them again on every run. Off
   Debian (no dpkg-query: a cluster) a component that is not there is reported, not counted.
Usage (from the repository root): python3 tests/build/check_setup.py [make]
Prints one line per check and `setup-components: N passed, M failed`; exit 1 on failure.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MAKE = sys.argv[1] if len(sys.argv) > 1 else "make"
SETUP = ".ci/setup.sh"
# The targets each component is for (more are found from the Makefile's own rules).
TARGETS = {
    "plots": ["plots", "bench-gpgpusim"],
    "scaling": ["scaling"],
    "peer": ["peer"],
    "fuzz": ["fuzz", "fuzz-setup"],
    "slurm": ["test-slurm"],
    "gpgpusim": ["gpgpusim", "test-gpgpusim", "bench-gpgpusim"],
    "multinode": ["setup-multinode"],
    "gemmlab": ["cpu-gemm-lab"],
    "nsys": ["test-nsys"],
}
# The default configuration, whatever the calling make was given (SANITIZE=1, say).
ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    if ok:
        passed += 1
    else:
        failed += 1


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, env={**ENV, **kw.pop("env", {})}, **kw)


def make(build, *args):
    return run([MAKE, "--no-print-directory", "MAKE=:", f"BUILD={build}", "NN_NO_PROBE=1", "HAVE_NVCC=yes", "GPU_VISIBLE=",
                "SANITIZE=", "USE_DOUBLE=", "DEBUG=", *args])


def rules(build):
    """{target: prerequisites} of the Makefile's rules (from make -p), special targets aside."""
    out = make(build, "-p", "-n", "setup").stdout
    files = out.split("# Files", 1)[1] if "# Files" in out else ""
    found = {}
    for line in files.split("\n"):
        m = re.match(r"^([^#.\t\s][^:=]*?):(?![=:])\s*(.*)$", line)
        if m:
            found.setdefault(m.group(1).strip(), set()).update(m.group(2).replace("|", " ").split())
    return found


# ---- 1. the command line ----
r = run(["bash", SETUP, "nosuch"])
lines = (r.stdout + r.stderr).strip("\n").split("\n")
check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("setup: "),
      f"bash {SETUP} nosuch: exit 2 and one `setup: ...` line (exit {r.returncode}, {len(lines)} line(s))")
r = run(["bash", SETUP, "--check", "plots"], env={"PLOTS_PYTHON": "/nonexistent/python3"})
out = r.stdout + r.stderr
check(r.returncode == 1 and "matplotlib" in out and "installing" not in out,
      f"bash {SETUP} --check plots with a python without matplotlib: exit 1, names it, installs nothing"
      + ("" if r.returncode == 1 else f" (exit {r.returncode}: {out.strip()[-200:]})"))
r = run(["bash", SETUP, "--list"])
components = r.stdout.split()
check(r.returncode == 0 and components[:1] == ["base"] and set(TARGETS) <= set(components),
      f"bash {SETUP} --list: base, then {' '.join(components[1:])}")

# ---- 2. the order, from dry runs ----
with tempfile.TemporaryDirectory() as tmp:
    build = os.path.join(tmp, "b")
    graph = rules(build)
    for c in components[1:]:
        users = {t for t, pre in graph.items() if f"setup-{c}" in pre and not t.startswith("setup-")}
        targets = sorted(set(TARGETS.get(c, [])) | users)
        check(bool(targets), f"[{c}] some target needs it")
        for t in targets:
            r = make(build, "-n", "-j1", "--trace", t)
            out = r.stdout.split("\n")

            def first(pred):
                return next((i for i, l in enumerate(out) if pred(l)), None)

            base = first(lambda l: re.search(r"update target '.*/\.setup-done'", l))
            comp = first(lambda l: re.search(rf"\bbash {re.escape(SETUP)} {c}\s*$", l))
            own = first(lambda l: f"update target '{t}'" in l)
            ok = r.returncode == 0 and None not in (base, comp) and base < comp and (own is None or comp < own)
            where = (f"dry-run lines {base}, {comp}, {'-' if own is None else own}"
                     if r.returncode == 0 else f"make -n failed: {r.stderr.strip()[-300:]}")
            check(ok, f"[{c}] make {t}: the base setup, then `bash {SETUP} {c}`, then {t}'s own recipe"
                      f"{'' if own is not None else ' (none)'} ({where})")

# ---- 3. each check against this machine ----
have_dpkg = shutil.which("dpkg-query") is not None


def installed(pkg):
    r = run(["dpkg-query", "-W", "-f=${Status}", pkg])
    return r.returncode == 0 and r.stdout.endswith(" installed")


for c in components[1:]:  # base: `make setup` ran it before this (every target comes after it)
    r = run(["bash", SETUP, "--check", c])
    out = r.stdout + r.stderr
    if r.returncode == 0:
        check(True, f"[{c}] `{SETUP} --check {c}`: everything present")
        continue
    m = re.search(r"apt-get install (.+)", out)
    pkgs = m.group(1).split() if m else []
    absent = [p for p in pkgs if have_dpkg and not installed(p)]
    if r.returncode == 1 and not have_dpkg:
        print(f"note [{c}] `{SETUP} --check {c}`: not all there (no dpkg-query to say which packages; "
              f"make setup-{c} says what it needs)")
    elif r.returncode == 1 and absent:
        check(True, f"[{c}] `{SETUP} --check {c}`: {' '.join(absent)} not installed here"
                    f" (make setup-{c} installs {'it' if len(absent) == 1 else 'them'})")
    else:
        check(False, f"[{c}] `{SETUP} --check {c}` fails (exit {r.returncode}) although"
                     f" {' '.join(pkgs) or 'its packages'} are installed: {out.strip()[-300:]}")

print(f"setup-components: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
