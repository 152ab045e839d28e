// Shared by the checkpoint tests, tests/io/test_checkpoint*.cpp: a sample checkpoint whose values
// catch a lossy or misordered encoding, bit-level comparisons, little-endian field access and the
// CheckpointFile fixture (a fresh mkdtemp directory per test, reading, writing and corrupting
// files there). In a named namespace: gtest requires one fixture class per suite.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../fuzz/regression_files.h"
#include "../temp_dir.h"
#include "common/errors.h"
#include "io/checkpoint.h"

namespace checkpoint_test {

namespace fs = std::filesystem;
using nn::io::Checkpoint;
using Bytes = std::vector<unsigned char>;

// Values that catch a lossy or misordered encoding: signs, -0, subnormals, extremes,
// infinities, and a pattern that differs between tensors and positions.
inline Checkpoint sample(int D, int H, int C, bool is_double) {
  Checkpoint ck;
  ck.D = D, ck.H = H, ck.C = C, ck.is_double = is_double;
  const double specials[] = {-0.0,
                             std::numeric_limits<float>::denorm_min(),
                             std::numeric_limits<float>::max(),
                             -std::numeric_limits<float>::infinity(),
                             is_double ? std::numeric_limits<double>::denorm_min() : 1.0,
                             is_double ? 0.1 : static_cast<double>(0.1f)};
  int k = 0;
  for (auto [t, n] : {std::pair{&ck.W1, H * D}, {&ck.b1, H}, {&ck.W2, C * H}, {&ck.b2, C}}) {
    for (int i = 0; i < n; ++i, ++k) {
      double v = (k % 7 == 3) ? specials[(k / 7) % std::size(specials)]
                              : (k * 0.731 - 17.5) / (1 + k % 13);
      t->push_back(is_double ? v : static_cast<double>(static_cast<float>(v)));
    }
  }
  return ck;
}

// Bit-level equality, so -0 vs 0 and NaN payloads would show.
inline void expect_same_bits(const std::vector<double>& a, const std::vector<double>& b,
                      const char* name) {
  ASSERT_EQ(a.size(), b.size()) << name;
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0)
        << name << "[" << i << "]: " << a[i] << " vs " << b[i];
}

inline void expect_same(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.D, b.D);
  EXPECT_EQ(a.H, b.H);
  EXPECT_EQ(a.C, b.C);
  EXPECT_EQ(a.is_double, b.is_double);
  expect_same_bits(a.W1, b.W1, "W1");
  expect_same_bits(a.b1, b.b1, "b1");
  expect_same_bits(a.W2, b.W2, "W2");
  expect_same_bits(a.b2, b.b2, "b2");
}

inline std::uint32_t le32(const Bytes& b, std::size_t at) {
  return b[at] | b[at + 1] << 8 | b[at + 2] << 16 | static_cast<std::uint32_t>(b[at + 3]) << 24;
}
inline void put_le32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}

class CheckpointFile : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    dir_ = tmp_.str();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static Bytes read(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), {});
  }
  static void write(const std::string& p, const Bytes& b) {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  // A valid float checkpoint's bytes, to corrupt.
  Bytes valid_bytes() {
    nn::io::save_checkpoint(path("valid.bin"), sample(5, 4, 3, false));
    return read(path("valid.bin"));
  }
  // Loading `bytes` must fail with "<file>: ...<phrase>..." on one line.
  void expect_refused(const Bytes& bytes, const std::string& phrase) {
    const std::string p = path("bad.bin");
    write(p, bytes);
    try {
      nn::io::load_checkpoint(p);
      ADD_FAILURE() << "accepted; expected: " << phrase;
    } catch (const nn::UserError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  nn::test::TempDir tmp_{"nn_ckpt"};
  fs::path dir_;
};

}  // namespace checkpoint_test
