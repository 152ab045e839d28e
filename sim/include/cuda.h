// Thin alias of <cuda_runtime.h> for the SIMT CPU emulator.
#pragma once
#include "cuda_runtime.h"
