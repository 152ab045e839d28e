// Checkpoint files (format: docs/checkpoint.md): a 32-byte little-endian header, the four
// tensors column-major, a CRC32 trailer. Saved through a temp file + fsync + rename;
// loaded with every field checked before any allocation. Tests: tests/trainer/test_checkpoint.cpp;
// fuzzed through decode_checkpoint by tests/fuzz/targets/fuzz_checkpoint.cpp (`make fuzz`).
#include "trainer/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/check.h"

namespace nn::train {
namespace {

constexpr char kMagic[8] = {'N', 'N', 'M', 'N', 'I', 'S', 'T', '\0'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 32;  // magic, version, precision, D, H, C, reserved
constexpr std::size_t kTrailerBytes = 4;  // CRC32

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

  Bytes b(file_bytes);
  unsigned char* p = b.data();
  std::memcpy(p, kMagic, sizeof kMagic);
  put_le(p + 8, kVersion, 4);
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
  std::uint64_t D = 0, H = 0, C = 0, precision = 0;
  std::uint64_t bytes = 0;  // the whole file: header, tensors, CRC
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
  if (version != kVersion)
    fail("unsupported checkpoint version " + std::to_string(version) + " (this build reads version " +
         std::to_string(kVersion) + ")");
  Layout l;
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
  if (size < l.bytes)
    fail("truncated (" + std::to_string(size) + " bytes; its header (" + dims + ", precision " +
         std::to_string(l.precision) + ") needs " + std::to_string(l.bytes) + ")");
  if (size > l.bytes)
    fail(std::to_string(size - l.bytes) + " trailing bytes after the checkpoint (" + dims + " needs " +
         std::to_string(l.bytes) + " bytes)");
  return l;
}

// `b` holds exactly l.bytes bytes whose header passed check_header.
Checkpoint decode_body(const std::string& path, const unsigned char* b, const Layout& l) {
  const auto stored = static_cast<std::uint32_t>(get_le(b + l.bytes - kTrailerBytes, 4));
  if (crc32_of(b, l.bytes - kTrailerBytes) != stored) fail_read(path, "corrupt (CRC mismatch)");

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
  return ck;
}

}  // namespace

Checkpoint decode_checkpoint(const unsigned char* data, std::size_t size, const std::string& name) {
  const Layout l = check_header(name, data, size);
  return decode_body(name, data, l);
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

  Bytes b(static_cast<std::size_t>(l.bytes));
  std::memcpy(b.data(), h, kHeaderBytes);
  if (!read_all(fd, b.data() + kHeaderBytes, b.size() - kHeaderBytes))
    fail("cannot read checkpoint: " + errno_text(errno));
  return decode_body(path, b.data(), l);
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
