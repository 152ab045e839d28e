// libFuzzer target for the IDX parser (src/io/idx.cpp) through nn::io::parse_images/parse_labels,
// the code behind load_images/load_labels. Built and run by `make fuzz` (tests/fuzz/run.sh); seeds
// in tests/fuzz/corpus/idx/, fixed crashers in tests/fuzz/regressions/idx/ (replayed by make test).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/idx.h"

namespace {

// Any of these may throw IdxError: that is the parser doing its job. Anything else
// (another exception, a sanitizer report, a broken invariant) is a finding.
void parse_all(const std::uint8_t* data, std::size_t size) {
  try {
    const nn::io::Images img = nn::io::parse_images(data, size, "<fuzz>", 0);
    // A parse that succeeds must account for every byte: header + count*rows*cols pixels.
    if (img.count == 0 || img.dim() == 0 || img.pixels.size() != img.count * img.dim()) __builtin_trap();
  } catch (const nn::io::IdxError&) {
  }
  try {
    const auto labels = nn::io::parse_labels(data, size, "<fuzz>");
    if (labels.empty()) __builtin_trap();
    for (auto l : labels)
      if (l > 9) __builtin_trap();
  } catch (const nn::io::IdxError&) {
  }
}

// Random bytes almost never form a gzip stream whose CRC checks out, so on their own they
// reach the header checks through gzip only as far as the first corrupt block. Compressing
// the input here sends every IDX-shaped input down the gzip path as well, with a valid
// stream: truncation, trailing data and huge counts are then seen through inflate, where
// the size bound is an estimate rather than the file size.
std::vector<std::uint8_t> gzip_of(const std::uint8_t* data, std::size_t size) {
  z_stream zs{};
  if (deflateInit2(&zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) __builtin_trap();
  std::vector<std::uint8_t> out(deflateBound(&zs, size) + 64);
  zs.next_in = const_cast<std::uint8_t*>(data);
  zs.avail_in = static_cast<uInt>(size);
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) __builtin_trap();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  parse_all(data, size);  // raw, or gzip exactly as given when it starts with 1F 8B
  const bool is_gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  if (!is_gzip && size >= 4 && size <= (1u << 16)) {
    const std::vector<std::uint8_t> gz = gzip_of(data, size);
    parse_all(gz.data(), gz.size());
  }
  return 0;
}
