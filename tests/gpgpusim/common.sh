# Sourced by build.sh and run.sh: which GPGPU-Sim, and where its build is cached.
# The cache key is the pinned commit plus a hash of our patch and build script, so a change
# to either builds anew and an unchanged one is found again.
GPGPUSIM_COMMIT=667834cfe5214523edd7769aeab77f91b7137686   # accel-sim dev, "Version 4.2.0"
GPGPUSIM_REPO=https://github.com/accel-sim/gpgpu-sim_distribution.git
GPGPUSIM_TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gpgpusim_key() {
  local h
  h=$(cat "$GPGPUSIM_TESTS_DIR/gpgpu-sim.patch" "$GPGPUSIM_TESTS_DIR/build.sh" | sha256sum | cut -c1-12)
  echo "${GPGPUSIM_COMMIT:0:12}-$h"
}
GPGPUSIM_CACHE=${GPGPUSIM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nn-gpgpusim}
GPGPUSIM_HOME=${GPGPUSIM_HOME:-$GPGPUSIM_CACHE/$(gpgpusim_key)}
