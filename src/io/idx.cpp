// IDX loader implementation: gzip is detected by content and inflated in one pass straight into
// the final buffer, whose size comes from the (validated) header; raw files are read with pread.
// Tested by tests/io/test_idx.cpp, fuzzed by tests/fuzz/targets/fuzz_idx.cpp (`make fuzz`); timed
// against zcat by bench/idx_load_vs_zcat.sh.
#include "io/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>

#include "io/idx_stream.h"

namespace nn::io {
namespace {

using namespace idx_detail;

constexpr std::uint32_t kImagesMagic = 0x00000803;
constexpr std::uint32_t kLabelsMagic = 0x00000801;
// Counts end up in int-typed MPI/cuBLAS arguments, so anything past INT32_MAX is unusable.
constexpr std::uint64_t kMaxCount = 0x7FFFFFFF;
constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 40;
constexpr std::size_t kTrailingProbe = 1 << 20;

const char* type_name(unsigned t) {
  switch (t) {
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return nullptr;
  }
}

void check_magic(const std::string& path, std::uint32_t found, std::uint32_t want) {
  const bool images = want == kImagesMagic;
  auto bad = [&](const std::string& why) {
    fail(path, "bad magic number: expected " + hex(want, 8) + ", found " + hex(found, 8) + ": " + why);
  };
  if (found >> 16 != 0) bad(std::string("not an IDX ") + (images ? "image" : "label") + " file");
  const unsigned type = (found >> 8) & 0xFF, ndims = found & 0xFF;
  if (type != 0x08) {
    const char* name = type_name(type);
    fail(path, "unsupported IDX data type " + hex(type, 2) + " (" + (name ? name : "unknown") +
                   "); only unsigned byte (0x08) is supported");
  }
  if (found == want) return;
  if (images && found == kLabelsMagic) bad("labels file given where images expected");
  if (!images && found == kImagesMagic) bad("images file given where labels expected");
  bad(std::string("not an IDX ") + (images ? "image" : "label") + " file (" + num(ndims) +
      " dimensions, expected " + (images ? "3" : "1") + ")");
}

// Returns the dimension sizes; the header length is 4 + 4 * dims.size().
std::vector<std::uint64_t> read_header(Stream& s, const std::string& path, std::uint32_t want) {
  std::uint8_t b[4 + 4 * 3];
  std::size_t got = s.read(b, 4);
  if (got < 4) fail(path, "truncated: " + num(got) + " bytes is too short for an IDX header");
  const std::uint32_t magic = be32(b);
  check_magic(path, magic, want);
  const std::size_t ndims = magic & 0xFF, need = 4 * ndims;
  got = s.read(b + 4, need);
  if (got < need)
    fail(path, "truncated: the IDX header needs " + num(4 + need) + " bytes, " + s.noun() + " " +
                   num(4 + got));
  std::vector<std::uint64_t> dims(ndims);
  for (std::size_t i = 0; i < ndims; ++i) dims[i] = be32(b + 4 + 4 * i);
  return dims;
}

void check_count(const std::string& path, std::uint64_t count, const char* what) {
  if (count == 0) fail(path, std::string("contains zero ") + what + "s");
  if (count > kMaxCount)
    fail(path, std::string(what) + " count " + num(count) + " exceeds the limit of " + num(kMaxCount));
}

// Reads exactly `payload` bytes and insists the data ends right there.
std::vector<std::uint8_t> read_payload(Stream& s, const std::string& path, std::uint64_t header,
                                       std::uint64_t payload) {
  const std::uint64_t expected = header + payload;
  auto truncated = [&](const std::string& actual) {
    fail(path, "truncated: expected " + num(expected) + " bytes (per the header), " + actual);
  };
  if (payload > s.max_remaining()) {
    if (s.size_known()) truncated(std::string(s.noun()) + " " + num(header + s.max_remaining()));
    truncated("but the compressed input is too small to decompress to that many");
  }
  std::vector<std::uint8_t> data;
  try {
    data.resize(static_cast<std::size_t>(payload));
  } catch (const std::bad_alloc&) {
    fail(path, "out of memory allocating " + num(payload) + " bytes");
  }
  const std::size_t got = s.read(data.data(), data.size());
  if (got < payload) truncated(std::string(s.noun()) + " " + num(header + got));
  const std::uint64_t rest = s.count_rest(kTrailingProbe);
  if (rest > 0)
    fail(path, (rest >= kTrailingProbe ? "over " : "") + num(rest) +
                   " trailing bytes after the data (expected " + num(expected) + " bytes per the header)");
  return data;
}

Images images_from(const Source& src, std::size_t expected_dim) {
  const std::string& path = src.path();
  auto s = open_stream(src);
  const auto d = read_header(*s, path, kImagesMagic);
  const std::uint64_t count = d[0], rows = d[1], cols = d[2];
  check_count(path, count, "image");
  const std::string size = num(rows) + "x" + num(cols);
  if (rows == 0 || cols == 0) fail(path, "image size " + size + " is empty");
  const std::uint64_t dim = rows * cols;  // both < 2^32, so no overflow
  if (expected_dim != 0 && dim != expected_dim)
    fail(path, "image size " + size + " = " + num(dim) + " pixels, expected " + num(expected_dim));
  std::uint64_t payload = 0;
  if (__builtin_mul_overflow(count, dim, &payload) || payload > kMaxPayload)
    fail(path, "declares " + num(count) + " images of " + size + ": too large (limit " + num(kMaxPayload) +
                   " bytes)");
  Images img;
  img.pixels = read_payload(*s, path, 16, payload);
  img.count = count;
  img.rows = rows;
  img.cols = cols;
  return img;
}

std::vector<std::uint8_t> labels_from(const Source& src) {
  const std::string& path = src.path();
  auto s = open_stream(src);
  const std::uint64_t count = read_header(*s, path, kLabelsMagic)[0];
  check_count(path, count, "label");
  auto labels = read_payload(*s, path, 8, count);
  auto bad = std::find_if(labels.begin(), labels.end(), [](std::uint8_t v) { return v > 9; });
  if (bad != labels.end())
    fail(path, "label " + num(*bad) + " at index " + num(static_cast<std::uint64_t>(bad - labels.begin())) +
                   " is out of range 0..9");
  return labels;
}

}  // namespace

Images load_images(const std::string& path, std::size_t expected_dim) {
  return images_from(File(path), expected_dim);
}

std::vector<std::uint8_t> load_labels(const std::string& path) { return labels_from(File(path)); }

Images parse_images(const std::uint8_t* data, std::size_t n, const std::string& name,
                    std::size_t expected_dim) {
  return images_from(Memory(data, n, name), expected_dim);
}

std::vector<std::uint8_t> parse_labels(const std::uint8_t* data, std::size_t n, const std::string& name) {
  return labels_from(Memory(data, n, name));
}

Dataset load_dataset(const std::string& images_path, const std::string& labels_path,
                     std::size_t expected_dim) {
  Dataset d;
  d.images = load_images(images_path, expected_dim);
  d.labels = load_labels(labels_path);
  if (d.images.count != d.labels.size())
    fail(images_path, "image count " + num(d.images.count) + " does not match label count " +
                          num(d.labels.size()) + " in " + labels_path);
  d.images_path = images_path;
  d.labels_path = labels_path;
  return d;
}

std::string find_idx_file(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  for (const std::string& name : {stem, stem + ".gz"}) {
    const fs::path p = fs::path(dir) / name;
    std::error_code ec;
    if (fs::exists(p, ec)) return p.string();
  }
  fail(dir, "no " + stem + " or " + stem + ".gz");
}

Dataset load_split(const std::string& dir, const std::string& split, std::size_t expected_dim) {
  const std::string images = find_idx_file(dir, split + "-images-idx3-ubyte");
  const std::string labels = find_idx_file(dir, split + "-labels-idx1-ubyte");
  return load_dataset(images, labels, expected_dim);
}

}  // namespace nn::io
