// Internal to src/io (checkpoint.cpp writes, checkpoint_read.cpp reads): the checkpoint
// format's constants and byte-level helpers. The format itself: docs/checkpoint.md.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace nn::io::checkpoint_format {

constexpr char kMagic[8] = {'N', 'N', 'M', 'N', 'I', 'S', 'T', '\0'};
constexpr std::uint32_t kVersionWeights = 1;  // weights only
constexpr std::uint32_t kVersionState = 2;    // weights + training state (TrainState)
constexpr std::size_t kHeaderBytes = 32;  // magic, version, precision, D, H, C, reserved
constexpr std::size_t kTrailerBytes = 4;  // CRC32
// Version 2's state section after the tensors: the fixed part (fingerprint, epoch, batch),
// then 16 bytes per rank (loss sum, hits) and 24 per finished epoch (loss, accuracies).
constexpr std::size_t kStateFixedBytes = 80;
constexpr std::size_t kStatePerRank = 16;
constexpr std::size_t kStatePerEpoch = 24;
// Plausibility bounds of a state (far beyond any real run; they keep sizes from overflowing).
constexpr std::uint64_t kMaxRanks = std::uint64_t{1} << 24;
constexpr std::uint64_t kMaxStrategy = 4;  // RunFingerprint::kExact

using Bytes = std::vector<unsigned char>;

// Explicit byte order, so files move between machines (and numpy reads them as '<f4').
inline void put_le(unsigned char* p, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline std::uint64_t get_le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

// zlib's crc32 takes a 32-bit length; feed it in chunks so any size works.
inline std::uint32_t crc32_of(const unsigned char* p, std::size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const std::size_t chunk = n < (1u << 30) ? n : (1u << 30);
    crc = crc32(crc, p, static_cast<uInt>(chunk));
    p += chunk;
    n -= chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

// Number of stored values and total file size for D, H, C, precision; false on overflow.
inline bool layout(std::uint64_t D, std::uint64_t H, std::uint64_t C, std::uint64_t precision,
            std::uint64_t& values, std::uint64_t& file_bytes) {
  std::uint64_t w1 = 0, w2 = 0, data = 0;
  return !__builtin_mul_overflow(H, D, &w1) && !__builtin_mul_overflow(C, H, &w2) &&
         !__builtin_add_overflow(w1, H, &values) && !__builtin_add_overflow(values, w2, &values) &&
         !__builtin_add_overflow(values, C, &values) &&
         !__builtin_mul_overflow(values, precision, &data) &&
         !__builtin_add_overflow(data, kHeaderBytes + kTrailerBytes, &file_bytes);
}

inline std::string errno_text(int err) { return std::strerror(err); }

inline std::uint64_t bits_of(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}
inline double double_of(std::uint64_t b) {
  double v;
  std::memcpy(&v, &b, 8);
  return v;
}

inline std::size_t state_bytes(const TrainState& st) {
  return kStateFixedBytes + kStatePerRank * st.loss_sum.size() + kStatePerEpoch * st.epochs.size();
}

}  // namespace nn::io::checkpoint_format
