// Shared by the tests of the emulated cuBLAS, tests/sim/test_sim_cublas_*.cu: the SimCublas
// fixture (a handle made and destroyed for every test).
#pragma once

#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "sim_test_util.h"

// One class for every file (gtest requires one fixture per suite), so not in an anonymous
// namespace.
class SimCublas : public simtest::SimTest {
 protected:
  void SetUp() override {
    simtest::SimTest::SetUp();
    ASSERT_EQ(cublasCreate(&h_), CUBLAS_STATUS_SUCCESS);
    ASSERT_NE(h_, nullptr);
  }
  void TearDown() override {
    if (h_) {
      EXPECT_EQ(cublasDestroy(h_), CUBLAS_STATUS_SUCCESS);
    }
    simtest::SimTest::TearDown();
  }
  cublasHandle_t h_ = nullptr;
};
