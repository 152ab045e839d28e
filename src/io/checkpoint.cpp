// Checkpoint files (format: docs/checkpoint.md): a 32-byte little-endian header, the four
// tensors column-major, a CRC32 trailer. Saved through a temp file + fsync + rename;
// loaded with every field checked before any allocation. Tests: tests/io/test_checkpoint.cpp;
// fuzzed through decode_checkpoint by tests/fuzz/targets/fuzz_checkpoint.cpp (`make fuzz`).
#include "io/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.h"

namespace nn::train {
namespace {

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
constexpr std::uint64_t kMaxStrategy = 2;

using Bytes = std::vector<unsigned char>;

// Explicit byte order, so files move between machines (and numpy reads them as '<f4').
void put_le(unsigned char* p, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint64_t get_le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

// zlib's crc32 takes a 32-bit length; feed it in chunks so any size works.
std::uint32_t crc32_of(const unsigned char* p, std::size_t n) {
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
bool layout(std::uint64_t D, std::uint64_t H, std::uint64_t C, std::uint64_t precision,
            std::uint64_t& values, std::uint64_t& file_bytes) {
  std::uint64_t w1 = 0, w2 = 0, data = 0;
  return !__builtin_mul_overflow(H, D, &w1) && !__builtin_mul_overflow(C, H, &w2) &&
         !__builtin_add_overflow(w1, H, &values) && !__builtin_add_overflow(values, w2, &values) &&
         !__builtin_add_overflow(values, C, &values) &&
         !__builtin_mul_overflow(values, precision, &data) &&
         !__builtin_add_overflow(data, kHeaderBytes + kTrailerBytes, &file_bytes);
}

std::string errno_text(int err) { return std::strerror(err); }

std::uint64_t bits_of(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}
double double_of(std::uint64_t b) {
  double v;
  std::memcpy(&v, &b, 8);
  return v;
}

std::size_t state_bytes(const TrainState& st) {
  return kStateFixedBytes + kStatePerRank * st.loss_sum.size() + kStatePerEpoch * st.epochs.size();
}

// The state section at p (state_bytes(st) bytes), fields in TrainState's order.
void put_state(unsigned char* p, const TrainState& st) {
  const RunFingerprint& f = st.fingerprint;
  std::size_t at = 0;
  const auto put = [&](std::uint64_t v, int bytes) {
    put_le(p + at, v, bytes);
    at += static_cast<std::size_t>(bytes);
  };
  put(f.seed, 8), put(f.batch, 8), put(f.n_fit, 8), put(f.n_val, 8);
  put(bits_of(f.lr), 8), put(bits_of(f.reg), 8);
  put(f.ranks, 4), put(f.strategy, 4), put(f.gemm, 4), put(f.shuffle, 4), put(f.data_crc, 4);
  put(st.epoch, 4), put(st.batch, 8);
  for (std::size_t r = 0; r < st.loss_sum.size(); ++r) put(bits_of(st.loss_sum[r]), 8), put(st.hits[r], 8);
  for (const EpochRecord& e : st.epochs) put(bits_of(e.loss), 8), put(bits_of(e.train_acc), 8), put(bits_of(e.val_acc), 8);
}

// Set only by tests (set_checkpoint_write_hook); called after every write() of a save.
CheckpointWriteHook g_write_hook = nullptr;

// One write() call never asks for more than this, so a save of a large checkpoint is
// several calls and the test hook can stop it between two of them.
constexpr std::size_t kWriteChunk = std::size_t{1} << 20;

// Writes all of `b` to `fd`, retrying short writes and EINTR; false with errno set on error.
bool write_all(int fd, const Bytes& b, const std::string& tmp) {
  std::size_t done = 0;
  while (done < b.size()) {
    const std::size_t want = b.size() - done < kWriteChunk ? b.size() - done : kWriteChunk;
    const ssize_t n = ::write(fd, b.data() + done, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
    if (g_write_hook) g_write_hook(tmp, done, b.size());
  }
  return true;
}

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

}  // namespace

std::vector<unsigned char> encode_checkpoint(const Checkpoint& ck) {
  if (ck.D <= 0 || ck.H <= 0 || ck.C <= 0)
    throw std::invalid_argument("save_checkpoint: D, H and C must be positive");
  const std::size_t D = static_cast<std::size_t>(ck.D), H = static_cast<std::size_t>(ck.H),
                    C = static_cast<std::size_t>(ck.C);
  if (ck.W1.size() != H * D || ck.b1.size() != H || ck.W2.size() != C * H || ck.b2.size() != C)
    throw std::invalid_argument("save_checkpoint: tensor sizes do not match D, H, C");
  const int precision = ck.is_double ? 8 : 4;
  std::uint64_t values = 0, file_bytes = 0;
  if (!layout(D, H, C, static_cast<std::uint64_t>(precision), values, file_bytes))
    throw std::invalid_argument("save_checkpoint: sizes overflow");
  if (ck.state) {
    const TrainState& st = *ck.state;
    if (st.loss_sum.size() != st.fingerprint.ranks || st.hits.size() != st.fingerprint.ranks ||
        st.epochs.size() != st.epoch || st.fingerprint.ranks == 0)
      throw std::invalid_argument("save_checkpoint: state sizes do not match its ranks and epochs");
    file_bytes += state_bytes(st);
  }

  Bytes b(file_bytes);
  unsigned char* p = b.data();
  std::memcpy(p, kMagic, sizeof kMagic);
  put_le(p + 8, ck.state ? kVersionState : kVersionWeights, 4);
  put_le(p + 12, static_cast<std::uint64_t>(precision), 4);
  put_le(p + 16, D, 4);
  put_le(p + 20, H, 4);
  put_le(p + 24, C, 4);
  put_le(p + 28, 0, 4);  // reserved
  p += kHeaderBytes;
  for (const auto* t : {&ck.W1, &ck.b1, &ck.W2, &ck.b2}) {
    for (double v : *t) {
      if (ck.is_double) {
        std::uint64_t bits;
        std::memcpy(&bits, &v, 8);
        put_le(p, bits, 8);
      } else {
        const float f = static_cast<float>(v);  // exact for values that came from floats
        std::uint32_t bits;
        std::memcpy(&bits, &f, 4);
        put_le(p, bits, 4);
      }
      p += precision;
    }
  }
  if (ck.state) {
    put_state(p, *ck.state);
    p += state_bytes(*ck.state);
  }
  put_le(p, crc32_of(b.data(), b.size() - kTrailerBytes), 4);
  return b;
}

namespace {

[[noreturn]] void fail_write(const std::string& path, int err) {
  throw UserError(path + ": cannot write checkpoint: " + errno_text(err));
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ck) {
  const Bytes bytes = encode_checkpoint(ck);
  // Same directory as the target, so rename() is atomic (same file system). mkstemp's
  // unique name keeps concurrent savers apart, and a stale temp file left by a killed run
  // (pids are reused, e.g. in containers) cannot block a later save.
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) fail_write(path, errno);  // nothing created, nothing to remove
  // mkstemp creates 0600; give the checkpoint the usual 0666 & ~umask.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  int err = 0;
  if (!write_all(fd, bytes, tmp) || ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;  // NFS reports write errors at close
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail_write(path, err);
  }
  // Make the rename itself durable; the data already is, so a failure here is not fatal.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

namespace {

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

CheckpointWriteHook set_checkpoint_write_hook(CheckpointWriteHook hook) {
  const CheckpointWriteHook old = g_write_hook;
  g_write_hook = hook;
  return old;
}

void check_writable(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  const std::string what = option + " " + path + ": ";
  if (path.empty()) throw UserError(option + ": empty path");
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UserError(what + "is a directory");
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const fs::file_status s = fs::status(dir, ec);
  if (!fs::exists(s)) throw UserError(what + "directory " + dir + " does not exist");
  if (!fs::is_directory(s)) throw UserError(what + dir + " is not a directory");
  // Creating the temp file and renaming it need write and search permission on the
  // directory (root passes this check regardless of the mode bits).
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw UserError(what + "directory " + dir + " is not writable (" + errno_text(errno) + ")");
}

}  // namespace nn::train
