// libFuzzer target for the checkpoint reader (src/io/checkpoint.cpp) through
// nn::io::decode_checkpoint, the validation and decoding behind load_checkpoint. Built and run
// by `make fuzz` (tests/fuzz/run.sh); seeds in tests/fuzz/corpus/checkpoint/, fixed crashers in
// tests/fuzz/regressions/checkpoint/ (replayed by make test).
#include <zlib.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/errors.h"
#include "io/checkpoint.h"

namespace {

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool has_nan(const nn::io::Checkpoint& ck) {
  for (const auto* t : {&ck.W1, &ck.b1, &ck.W2, &ck.b2})
    for (double v : *t)
      if (std::isnan(v)) return true;
  return false;
}

void decode_and_round_trip(const std::uint8_t* data, std::size_t size) {
  nn::io::Checkpoint ck;
  try {
    ck = nn::io::decode_checkpoint(data, size, "<fuzz>");
  } catch (const nn::UserError&) {
    return;  // a clean refusal
  }
  // Accepted: writing it back must give the same file. A float file's signalling NaN comes
  // back quiet (float -> double -> float sets the quiet bit), so with NaNs present require
  // only that a second round trip changes nothing.
  const std::vector<unsigned char> again = nn::io::encode_checkpoint(ck);
  if (!has_nan(ck) && (again.size() != size || std::memcmp(again.data(), data, size) != 0)) __builtin_trap();
  const nn::io::Checkpoint ck2 = nn::io::decode_checkpoint(again.data(), again.size(), "<again>");
  if (ck2.D != ck.D || ck2.H != ck.H || ck2.C != ck.C || ck2.is_double != ck.is_double ||
      !same_bits(ck2.W1, ck.W1) || !same_bits(ck2.b1, ck.b1) || !same_bits(ck2.W2, ck.W2) ||
      !same_bits(ck2.b2, ck.b2))
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  decode_and_round_trip(data, size);
  // Mutations almost never keep the CRC32 trailer right, so on their own they stop at the CRC
  // check and never reach tensor decoding. A second pass with the trailer recomputed (the
  // fix-up a checksum needs under fuzzing) lets every header/body combination through.
  if (size >= 36) {
    std::vector<std::uint8_t> fixed(data, data + size);
    const uLong crc = crc32(0L, fixed.data(), static_cast<uInt>(size - 4));
    for (int i = 0; i < 4; ++i) fixed[size - 4 + i] = static_cast<std::uint8_t>(crc >> (8 * i));
    decode_and_round_trip(fixed.data(), fixed.size());
  }
  return 0;
}
