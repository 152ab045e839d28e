// Internal to src/io/idx.cpp (and so to the fuzz target that compiles it): where an IDX
// file's bytes come from (a file read with pread, or a caller's buffer) and the decoded byte
// stream over them (raw, or gzip inflated in one pass, concatenated members included). The
// IDX format itself is parsed in idx.cpp.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "io/idx.h"

namespace nn::io::idx_detail {

// Deflate cannot expand data by more than ~1032:1; a header claiming more than that is a lie
// we can catch before allocating. The slack covers tiny files.
constexpr std::uint64_t kMaxInflateRatio = 1032;
constexpr std::uint64_t kInflateSlack = 1 << 20;
constexpr std::size_t kChunk = std::size_t{1} << 30;  // zlib counts are 32-bit; pread caps at ~2 GiB

[[noreturn]] inline void fail(const std::string& path, const std::string& problem) {
  throw IdxError(path + ": " + problem);
}

inline std::string hex(std::uint32_t v, int digits) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%0*X", digits, static_cast<unsigned>(v));
  return b;
}

inline std::string num(std::uint64_t v) { return std::to_string(v); }

inline std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}


struct Fd {  // a member, so the descriptor closes even when File's constructor throws
  int v = -1;
  ~Fd() { if (v >= 0) ::close(v); }
};

// Where the undecoded bytes come from: a file (the loaders) or a caller's buffer (the
// parse_* entry points, used by the fuzz targets); everything above this is shared.
class Source {
 public:
  virtual ~Source() = default;
  virtual std::uint64_t size() const = 0;
  // Short only at end of data.
  virtual std::size_t pread_upto(void* dst, std::size_t n, std::uint64_t offset) const = 0;
  const std::string& path() const { return path_; }

 protected:
  explicit Source(const std::string& path) : path_(path) {}
  std::string path_;
};

class File final : public Source {
 public:
  explicit File(const std::string& path) : Source(path) {
    fd_.v = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_.v < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_.v, &st) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) fail(path, "cannot open: is a directory");
    if (!S_ISREG(st.st_mode)) fail(path, "cannot open: not a regular file");
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  std::uint64_t size() const override { return size_; }
  std::size_t pread_upto(void* dst, std::size_t n, std::uint64_t offset) const override {
    std::size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_.v, static_cast<char*>(dst) + done, std::min(n - done, kChunk),
                          static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail(path_, std::string("read error: ") + std::strerror(errno));
      if (r == 0) break;
      done += static_cast<std::size_t>(r);
    }
    return done;
  }

 private:
  Fd fd_;
  std::uint64_t size_ = 0;
};

class Memory final : public Source {
 public:
  Memory(const std::uint8_t* data, std::size_t n, const std::string& name)
      : Source(name), data_(data), n_(n) {}
  std::uint64_t size() const override { return n_; }
  std::size_t pread_upto(void* dst, std::size_t n, std::uint64_t offset) const override {
    if (offset >= n_) return 0;
    const std::size_t k = std::min<std::uint64_t>(n, n_ - offset);
    if (k > 0) std::memcpy(dst, data_ + offset, k);
    return k;
  }

 private:
  const std::uint8_t* data_;
  std::size_t n_;
};

// The decoded IDX byte stream, whether it comes from a raw or a gzip file.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual std::size_t read(std::uint8_t* dst, std::size_t n) = 0;  // short only at end of data
  virtual std::uint64_t max_remaining() const = 0;  // upper bound, known before reading
  virtual std::uint64_t count_rest(std::size_t probe) = 0;  // bytes left; may stop at probe
  virtual const char* noun() const = 0;
  virtual bool size_known() const = 0;  // whether max_remaining() is exact
};

class RawStream final : public Stream {
 public:
  explicit RawStream(const Source& f) : f_(f) {}
  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    std::size_t got = f_.pread_upto(dst, n, pos_);
    pos_ += got;
    return got;
  }
  std::uint64_t max_remaining() const override { return f_.size() - pos_; }
  std::uint64_t count_rest(std::size_t) override { return f_.size() - pos_; }
  const char* noun() const override { return "file has"; }
  bool size_known() const override { return true; }

 private:
  const Source& f_;
  std::uint64_t pos_ = 0;
};

class GzipStream final : public Stream {
 public:
  explicit GzipStream(const Source& f) : path_(f.path()), size_(f.size()) {
    buf_.reset(new (std::nothrow) std::uint8_t[size_]);
    if (!buf_) fail(path_, "out of memory reading " + num(size_) + " bytes");
    if (f.pread_upto(buf_.get(), size_, 0) != size_) fail(path_, "file shrank while being read");
    zs_.next_in = buf_.get();
    zs_.avail_in = 0;
    if (::inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) fail(path_, "cannot initialise zlib");
  }
  ~GzipStream() override { ::inflateEnd(&zs_); }

  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    std::size_t done = 0;
    while (done < n && !ended_) {
      if (zs_.avail_in == 0) {
        std::size_t off = consumed();
        if (off == size_)
          fail(path_, "gzip stream is truncated (input ends before the end of the compressed stream)");
        zs_.avail_in = static_cast<uInt>(std::min<std::size_t>(size_ - off, kChunk));
      }
      zs_.next_out = dst + done;
      zs_.avail_out = static_cast<uInt>(std::min(n - done, kChunk));
      const uInt before = zs_.avail_out;
      const int rc = ::inflate(&zs_, Z_NO_FLUSH);
      done += before - zs_.avail_out;
      if (rc == Z_STREAM_END) {
        next_member();
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
        fail(path_, std::string("corrupt gzip data (") + (zs_.msg ? zs_.msg : "invalid stream") + ")");
      } else if (rc == Z_MEM_ERROR) {
        fail(path_, "out of memory while inflating");
      } else if (rc == Z_BUF_ERROR && zs_.avail_in != 0 && zs_.avail_out != 0) {
        fail(path_, "corrupt gzip data (inflate made no progress)");
      }  // Z_BUF_ERROR with no input left: the next turn refills or reports truncation
    }
    return done;
  }
  std::uint64_t max_remaining() const override {
    return (size_ - consumed()) * kMaxInflateRatio + kInflateSlack;
  }
  // Draining to the end also makes zlib verify the CRC and length trailers.
  std::uint64_t count_rest(std::size_t probe) override {
    std::vector<std::uint8_t> scratch(64 * 1024);
    std::uint64_t total = 0;
    while (total < probe) {
      std::size_t got = read(scratch.data(), scratch.size());
      total += got;
      if (got < scratch.size()) break;
    }
    return total;
  }
  const char* noun() const override { return "decompressed data has"; }
  bool size_known() const override { return false; }

 private:
  std::size_t consumed() const { return static_cast<std::size_t>(zs_.next_in - buf_.get()); }
  // RFC 1952 allows several concatenated members (what `cat a.gz b.gz` gives); zcat reads
  // them all, so we do too. Anything else after a member is rejected rather than ignored.
  void next_member() {
    const std::size_t off = consumed();
    if (off == size_) {
      ended_ = true;
    } else if (size_ - off >= 2 && buf_[off] == 0x1f && buf_[off + 1] == 0x8b) {
      ::inflateReset(&zs_);
    } else {
      fail(path_, num(size_ - off) + " bytes of trailing garbage after the gzip stream");
    }
  }

  std::string path_;
  std::uint64_t size_;
  std::unique_ptr<std::uint8_t[]> buf_;  // not a vector: no point zero-filling what we overwrite
  z_stream zs_{};
  bool ended_ = false;
};

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline std::unique_ptr<Stream> open_stream(const Source& f) {
  if (f.size() == 0) fail(f.path(), "file is empty");
  std::uint8_t m[2] = {0, 0};
  const std::size_t n = f.pread_upto(m, 2, 0);
  const bool gz = n == 2 && m[0] == 0x1f && m[1] == 0x8b;
  if (gz) return std::make_unique<GzipStream>(f);
  if (ends_with(f.path(), ".gz"))
    fail(f.path(), ".gz file is not gzip-compressed (starts with " + hex(m[0], 2) + " " + hex(m[1], 2) +
                       ", not 0x1F 0x8B)");
  return std::make_unique<RawStream>(f);
}

}  // namespace nn::io::idx_detail
