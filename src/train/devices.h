// The GPU a rank trains on: the node-local rank modulo the node's devices, and what the
// GPGPU-Sim simulator cannot run. Returns problems as strings, for all_ranks_ok (agree.h).
#pragma once
#include <string>

#include "train/config.h"

namespace nn::train {

// cudaSetDevice(local rank % devices): the rank within the node, not the global rank,
// so a multi-node job uses every node's GPUs. Collective. Returns a problem, or "".
std::string select_device(std::string& description, std::string& name);

// On GPGPU-Sim (tests/gpgpusim/run.sh): the options it cannot run, as one line, or "".
std::string simulator_limits(const std::string& device_name, const Config& cfg);

}  // namespace nn::train
