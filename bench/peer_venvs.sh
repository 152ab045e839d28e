#!/usr/bin/env bash
# The virtual environments of `make peer`'s PyPI peers, one per framework, each created on first
# use under $VENVS (build/ by default) and reused while it imports the pinned version:
#   venv-peer-torch2  torch==$PEER_TORCH   (PyPI's Linux wheel: MKL and oneDNN inside; it also
#                                           pulls NVIDIA's CUDA libraries, about 5.4 GB, because
#                                           it does not import without them)
#   venv-peer-jax     jax[cpu]==$PEER_JAX  (about 0.6 GB)
#   venv-peer-tf      tensorflow-cpu==$PEER_TF (oneDNN; about 1.6 GB)
# Usage: bench/peer_venvs.sh NAME...   (NAME: torch2 jax tf); prints, per name, one line
#   NAME PYTHON      the venv's python, ready
#   NAME - REASON    not available (REASON: why, e.g. pip's last error line when offline)
# and exits 0 either way: a peer that cannot be installed is left out of the comparison, not fatal.
# Needs python3 with venv (Debian: python3-venv; `.ci/setup.sh peer` installs it).
# Environment: VENVS=build PEER_TORCH=2.15.0 PEER_JAX=0.10.2 PEER_TF=2.21.0 PYTHON3=/usr/bin/python3
set -uo pipefail

cd "$(dirname "$0")/.."
VENVS=${VENVS:-build}
PYTHON3=${PYTHON3:-/usr/bin/python3}
PEER_TORCH=${PEER_TORCH:-2.15.0}
PEER_JAX=${PEER_JAX:-0.10.2}
PEER_TF=${PEER_TF:-2.21.0}

for name in "$@"; do
  case $name in
    torch2) module=torch spec="torch==$PEER_TORCH numpy" want=$PEER_TORCH ;;
    jax) module=jax spec="jax[cpu]==$PEER_JAX" want=$PEER_JAX ;;
    tf) module=tensorflow spec="tensorflow-cpu==$PEER_TF" want=$PEER_TF ;;
    *) echo "$name - unknown peer (torch2, jax or tf)"; continue ;;
  esac
  venv=$VENVS/venv-peer-$name
  py=$venv/bin/python
  # The installed version, without importing the framework (TensorFlow's import takes seconds).
  have() { "$py" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('$1') == '$2' else 1)" 2>/dev/null; }
  dist=$module; [ "$name" = tf ] && dist=tensorflow-cpu
  if ! have "$dist" "$want"; then
    echo "peer_venvs: installing $spec from PyPI into $venv (once)" >&2
    log=$venv.pip.log
    mkdir -p "$VENVS"
    if ! { [ -x "$py" ] || "$PYTHON3" -m venv "$venv"; } >"$log" 2>&1 ||
       ! { read -r -a pkgs <<<"$spec"; "$venv/bin/pip" install -q "${pkgs[@]}" >>"$log" 2>&1; }; then
      echo "$name - pip install $spec failed: $(grep -v '^ *$' "$log" | tail -n 1) (log: $log)"
      continue
    fi
  fi
  echo "$name $py"
done
