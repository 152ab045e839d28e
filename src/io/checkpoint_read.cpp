// Reading checkpoints (checkpoint.h, format: docs/checkpoint.md): every field checked against
// the input's size before any allocation, the CRC32 last. Tests: tests/io/test_checkpoint.cpp;
// decode_checkpoint is fuzzed by tests/fuzz/targets/fuzz_checkpoint.cpp (`make fuzz`).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/errors.h"
#include "io/checkpoint.h"
#include "io/checkpoint_format.h"

namespace nn::io {

using namespace checkpoint_format;

namespace {

bool read_all(int fd, unsigned char* p, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, p + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) {
      errno = EIO;  // the file shrank under us
      return false;
    }
    done += static_cast<std::size_t>(r);
  }
  return true;
}

struct Layout {
  std::uint32_t version = 0;
  std::uint64_t D = 0, H = 0, C = 0, precision = 0;
  std::uint64_t bytes = 0;  // version 1: the whole file; version 2: without the state's per-rank
                            // and per-epoch parts (checked once the fixed part is read)
};

[[noreturn]] void fail_read(const std::string& path, const std::string& what) {
  throw UserError(path + ": " + what);
}

// Validates the header against the input's total size. `head` holds the first
// min(size, 32) bytes. Everything is checked here, before the caller allocates anything,
// so a corrupt size cannot ask for more memory than the input itself occupies.
Layout check_header(const std::string& path, const unsigned char* head, std::uint64_t size) {
  const auto fail = [&](const std::string& what) { fail_read(path, what); };
  if (size < sizeof kMagic || std::memcmp(head, kMagic, sizeof kMagic) != 0)
    fail("not a checkpoint file (bad magic)");
  if (size < kHeaderBytes)
    fail("truncated (" + std::to_string(size) + " bytes, shorter than the " +
         std::to_string(kHeaderBytes) + "-byte header)");
  const auto version = static_cast<std::uint32_t>(get_le(head + 8, 4));
  if (version != kVersionWeights && version != kVersionState)
    fail("unsupported checkpoint version " + std::to_string(version) + " (this build reads versions " +
         std::to_string(kVersionWeights) + " and " + std::to_string(kVersionState) + ")");
  Layout l;
  l.version = version;
  l.precision = get_le(head + 12, 4);
  if (l.precision != 4 && l.precision != 8)
    fail("corrupt header: precision " + std::to_string(l.precision) + " (expected 4 or 8 bytes per value)");
  l.D = get_le(head + 16, 4), l.H = get_le(head + 20, 4), l.C = get_le(head + 24, 4);
  const std::string dims =
      "D=" + std::to_string(l.D) + " H=" + std::to_string(l.H) + " C=" + std::to_string(l.C);
  if (l.D == 0 || l.H == 0 || l.C == 0) fail("corrupt header: zero size (" + dims + ")");
  std::uint64_t values = 0;
  if (l.D > INT_MAX || l.H > INT_MAX || l.C > INT_MAX || !layout(l.D, l.H, l.C, l.precision, values, l.bytes))
    fail("corrupt header: implausible sizes (" + dims + ")");
  if (get_le(head + 28, 4) != 0) fail("corrupt header: reserved field is not zero");
  if (version == kVersionState && __builtin_add_overflow(l.bytes, kStateFixedBytes, &l.bytes))
    fail("corrupt header: implausible sizes (" + dims + ")");
  if (size < l.bytes)
    fail("truncated (" + std::to_string(size) + " bytes; its header (" + dims + ", precision " +
         std::to_string(l.precision) + ") needs " + std::to_string(l.bytes) + ")");
  if (version == kVersionWeights && size > l.bytes)
    fail(std::to_string(size - l.bytes) + " trailing bytes after the checkpoint (" + dims + " needs " +
         std::to_string(l.bytes) + " bytes)");
  return l;
}

// Version 2: the state section's size from its fixed part (before the CRC is checked, so
// that a wrong size is reported as such), then the exact file size.
void check_state_size(const std::string& path, const unsigned char* b, std::uint64_t size, const Layout& l) {
  const unsigned char* f = b + l.bytes - kTrailerBytes - kStateFixedBytes;
  const std::uint64_t ranks = get_le(f + 48, 4), epochs = get_le(f + 68, 4);
  if (ranks == 0 || ranks > kMaxRanks)
    fail_read(path, "corrupt training state: " + std::to_string(ranks) + " ranks");
  const std::uint64_t want = l.bytes + kStatePerRank * ranks + kStatePerEpoch * epochs;  // < 2^64: bounded above
  if (size < want)
    fail_read(path, "truncated (" + std::to_string(size) + " bytes; its training state (" + std::to_string(ranks) +
                        " ranks, " + std::to_string(epochs) + " epochs) needs " + std::to_string(want) + ")");
  if (size > want)
    fail_read(path, std::to_string(size - want) + " trailing bytes after the checkpoint (it needs " +
                        std::to_string(want) + " bytes)");
}

// The state section at p, checked field by field (the CRC already matched).
TrainState get_state(const std::string& path, const unsigned char* p) {
  TrainState st;
  RunFingerprint& f = st.fingerprint;
  std::size_t at = 0;
  const auto get = [&](int bytes) {
    const std::uint64_t v = get_le(p + at, bytes);
    at += static_cast<std::size_t>(bytes);
    return v;
  };
  f.seed = get(8), f.batch = get(8), f.n_fit = get(8), f.n_val = get(8);
  f.lr = double_of(get(8)), f.reg = double_of(get(8));
  f.ranks = std::uint32_t(get(4)), f.strategy = std::uint32_t(get(4)), f.gemm = std::uint32_t(get(4));
  f.shuffle = std::uint32_t(get(4)), f.data_crc = std::uint32_t(get(4));
  st.epoch = std::uint32_t(get(4));
  st.batch = get(8);
  const auto bad = [&](const std::string& what) { fail_read(path, "corrupt training state: " + what); };
  if (f.batch == 0 || f.n_fit == 0 || f.batch > f.n_fit) bad("batch size " + std::to_string(f.batch) +
                                                                 " for " + std::to_string(f.n_fit) + " images");
  if (!(f.lr > 0) || !std::isfinite(f.lr) || !(f.reg >= 0) || !std::isfinite(f.reg)) bad("learning rate or reg");
  if (f.strategy > kMaxStrategy || f.shuffle > 1) bad("strategy or shuffle flag");
  if (st.batch >= (f.n_fit + f.batch - 1) / f.batch) bad("batch " + std::to_string(st.batch) + " past the epoch's end");
  for (std::uint32_t r = 0; r < f.ranks; ++r) {
    st.loss_sum.push_back(double_of(get(8)));
    st.hits.push_back(get(8));
  }
  for (std::uint32_t e = 0; e < st.epoch; ++e) {
    EpochRecord rec;
    rec.loss = double_of(get(8)), rec.train_acc = double_of(get(8)), rec.val_acc = double_of(get(8));
    st.epochs.push_back(rec);
  }
  return st;
}

// `b` holds the `size` bytes of a file whose header passed check_header.
Checkpoint decode_body(const std::string& path, const unsigned char* b, std::uint64_t size, const Layout& l) {
  if (l.version == kVersionState) check_state_size(path, b, size, l);
  const auto stored = static_cast<std::uint32_t>(get_le(b + size - kTrailerBytes, 4));
  if (crc32_of(b, size - kTrailerBytes) != stored) fail_read(path, "corrupt (CRC mismatch)");

  Checkpoint ck;
  ck.D = static_cast<int>(l.D);
  ck.H = static_cast<int>(l.H);
  ck.C = static_cast<int>(l.C);
  ck.is_double = l.precision == 8;
  const unsigned char* p = b + kHeaderBytes;
  const auto take = [&](std::vector<double>& t, std::uint64_t n) {
    t.resize(static_cast<std::size_t>(n));
    for (double& v : t) {
      if (l.precision == 8) {
        const std::uint64_t bits = get_le(p, 8);
        std::memcpy(&v, &bits, 8);
      } else {
        const auto bits = static_cast<std::uint32_t>(get_le(p, 4));
        float f;
        std::memcpy(&f, &bits, 4);
        v = f;
      }
      p += l.precision;
    }
  };
  take(ck.W1, l.H * l.D);
  take(ck.b1, l.H);
  take(ck.W2, l.C * l.H);
  take(ck.b2, l.C);
  if (l.version == kVersionState) ck.state = get_state(path, p);
  return ck;
}

}  // namespace

Checkpoint decode_checkpoint(const unsigned char* data, std::size_t size, const std::string& name) {
  const Layout l = check_header(name, data, size);
  return decode_body(name, data, size, l);
}

Checkpoint load_checkpoint(const std::string& path) {
  const auto fail = [&](const std::string& what) { fail_read(path, what); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot read checkpoint: " + errno_text(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("cannot read checkpoint: " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) fail("cannot read checkpoint: is a directory");
  if (!S_ISREG(st.st_mode)) fail("cannot read checkpoint: not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);

  // The header alone first: the file is read whole only once its size is known to be right.
  unsigned char h[kHeaderBytes] = {};
  const std::size_t head = size < kHeaderBytes ? static_cast<std::size_t>(size) : kHeaderBytes;
  if (!read_all(fd, h, head)) fail("cannot read checkpoint: " + errno_text(errno));
  const Layout l = check_header(path, h, size);

  // Version 2's exact size depends on its state section: read it all (the file's own size).
  Bytes b(static_cast<std::size_t>(size));
  std::memcpy(b.data(), h, kHeaderBytes);
  if (!read_all(fd, b.data() + kHeaderBytes, b.size() - kHeaderBytes))
    fail("cannot read checkpoint: " + errno_text(errno));
  return decode_body(path, b.data(), size, l);
}

}  // namespace nn::io
