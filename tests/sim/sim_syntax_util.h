// Shared by the tests of the CUDA C++ the emulator accepts, tests/sim/test_sim_syntax*.cu: the
// SimSyntax fixture (one class for every file: gtest requires one fixture per suite).
#pragma once

#include "sim_test_util.h"

class SimSyntax : public simtest::SimTest {};
