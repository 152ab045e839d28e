// CUDA runtime surface of the SIMT CPU emulator (see sim/README.md).
#pragma once
#include "sim/cuda_sim.h"
