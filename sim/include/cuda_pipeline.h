// <cuda_pipeline.h> under the SIMT CPU emulator: the pipeline primitives
// (cuda_pipeline_primitives.h). Tested by tests/sim/test_sim_async_copy.cu.
#pragma once
#include "cuda_pipeline_primitives.h"
