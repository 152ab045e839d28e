// Shared by the CUDA runtime API tests, tests/sim/test_sim_runtime*.cu: the SimRuntime fixture
// (one class for every file: gtest requires one fixture per suite).
#pragma once

#include "sim_test_util.h"

class SimRuntime : public simtest::SimTest {};
