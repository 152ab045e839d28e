// Shared by the WMMA tests, tests/sim/test_sim_wmma*.cu: the SimWmma fixture (one class for every
// file: gtest requires one fixture per suite) and the wmma namespace.
#pragma once

#include <mma.h>

#include "sim_test_util.h"

class SimWmma : public simtest::SimTest {};

namespace wmma = nvcuda::wmma;
