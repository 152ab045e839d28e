// Checkpoint files (format: docs/checkpoint.md): a 32-byte little-endian header, the four
// tensors column-major, a CRC32 trailer. Saved through a temp file + fsync + rename;
// loaded with every field checked before any allocation (checkpoint_read.cpp). Tests:
// tests/io/test_checkpoint.cpp; decoding is fuzzed by tests/fuzz/targets/fuzz_checkpoint.cpp.
#include "io/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.h"
#include "io/checkpoint_format.h"

namespace nn::io {

using namespace checkpoint_format;

namespace {

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

}  // namespace nn::io
