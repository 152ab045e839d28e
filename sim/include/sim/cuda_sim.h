// Everything a .cu file sees under the SIMT CPU emulator; simcc force-includes it
// at the top of each rewritten .cu file. Host .cpp files reach it through
// <cuda_runtime.h>. Tested by tests/sim and sim/examples.
#pragma once
#ifndef SIM_EMULATOR
#define SIM_EMULATOR 1
#endif
// Standard headers that nvcc makes implicitly available, included before our
// macros (libstdc++'s <memory> spells __attribute__((__noinline__))).
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <new>
#include "vector_types.h"
#include "runtime_api.h"
#include "device.h"
#include "launch.h"
#include "launch_ex.h"
#include "sim_api.h"
