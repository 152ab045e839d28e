// Shared by the IDX tests, tests/io/test_idx*.cpp: IDX files built byte by byte (header, pixels,
// images, labels, gzip), EXPECT_IDX_ERROR (the error type, the file name and phrase in a one-line
// message) and the IdxTest fixture (a fresh mkdtemp directory per test).
#pragma once

#include "io/idx.h"

#include "../fuzz/regression_files.h"
#include "../temp_dir.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nn::io::IdxError;
using Bytes = std::vector<std::uint8_t>;

inline void put_be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

inline Bytes idx_header(std::uint32_t magic, std::initializer_list<std::uint32_t> dims) {
  Bytes b;
  put_be32(b, magic);
  for (auto d : dims) put_be32(b, d);
  return b;
}

// A pattern that differs between pixels and images, so misplaced bytes show up.
inline Bytes pixel_data(std::size_t n) {
  Bytes p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>((i * 37 + i / 7) & 0xFF);
  return p;
}

inline Bytes image_file(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  Bytes b = idx_header(0x803, {count, rows, cols});
  Bytes p = pixel_data(std::size_t{count} * rows * cols);
  b.insert(b.end(), p.begin(), p.end());
  return b;
}

inline Bytes label_file(const Bytes& labels) {
  Bytes b = idx_header(0x801, {static_cast<std::uint32_t>(labels.size())});
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

// In-memory gzip (windowBits 16+15), so tests can cut, corrupt and concatenate streams.
inline Bytes gzip(const Bytes& raw) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&zs, raw.size()) + 64);
  zs.next_in = const_cast<Bytes::value_type*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// EXPECT_THROW for the type, then the message: names the file, has the key phrase, one line.
#define EXPECT_IDX_ERROR(stmt, file, phrase)                                         \
  do {                                                                               \
    EXPECT_THROW(stmt, IdxError);                                                    \
    try {                                                                            \
      stmt;                                                                          \
    } catch (const IdxError& e) {                                                    \
      const std::string m = e.what();                                                \
      EXPECT_TRUE(contains(m, file)) << "message lacks file name: " << m;            \
      EXPECT_TRUE(contains(m, phrase)) << "message lacks '" << phrase << "': " << m; \
      EXPECT_FALSE(contains(m, "\n")) << "message spans lines: " << m;               \
    }                                                                                \
  } while (0)

}  // namespace

// One class for every file (gtest requires one fixture per suite), so not in an anonymous
// namespace.
class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    dir_ = tmp_.str();
  }
  // Writes bytes under the test directory and returns the full path.
  std::string file(const std::string& name, const Bytes& b) {
    std::string p = dir_ + "/" + name;
    write_file(p, b);
    return p;
  }
  static void write_file(const std::string& path, const Bytes& b) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    ASSERT_TRUE(f.good()) << path;
  }
  nn::test::TempDir tmp_{"nn_idx_test"};
  std::string dir_;
};

namespace {

using nn::io::load_dataset;
using nn::io::load_images;
using nn::io::load_labels;

}  // namespace
