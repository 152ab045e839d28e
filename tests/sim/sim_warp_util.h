// Shared by the warp operation tests, tests/sim/test_sim_warp*.cu: the SimWarp fixture (one class
// for every file: gtest requires one fixture per suite) and the full-warp mask.
#pragma once

#include "sim_test_util.h"

class SimWarp : public simtest::SimTest {};

constexpr unsigned kFull = 0xFFFFFFFFu;
