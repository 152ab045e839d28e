// GoogleTest suite for src/io/checkpoint.cpp: bit-exact round trips in both precisions,
// the documented byte layout, one test per corruption class, atomic replacement, failed and
// killed saves, replay of the fuzzer's saved inputs (tests/fuzz/). Each test writes only into
// its own mkdtemp directory (unique per MPI rank).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../fuzz/regression_files.h"
#include "../temp_dir.h"
#include "common/errors.h"
#include "io/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using nn::train::Checkpoint;
using Bytes = std::vector<unsigned char>;

// Values that catch a lossy or misordered encoding: signs, -0, subnormals, extremes,
// infinities, and a pattern that differs between tensors and positions.
Checkpoint sample(int D, int H, int C, bool is_double) {
  Checkpoint ck;
  ck.D = D, ck.H = H, ck.C = C, ck.is_double = is_double;
  const double specials[] = {-0.0,
                             std::numeric_limits<float>::denorm_min(),
                             std::numeric_limits<float>::max(),
                             -std::numeric_limits<float>::infinity(),
                             is_double ? std::numeric_limits<double>::denorm_min() : 1.0,
                             is_double ? 0.1 : static_cast<double>(0.1f)};
  int k = 0;
  for (auto [t, n] : {std::pair{&ck.W1, H * D}, {&ck.b1, H}, {&ck.W2, C * H}, {&ck.b2, C}}) {
    for (int i = 0; i < n; ++i, ++k) {
      double v = (k % 7 == 3) ? specials[(k / 7) % std::size(specials)]
                              : (k * 0.731 - 17.5) / (1 + k % 13);
      t->push_back(is_double ? v : static_cast<double>(static_cast<float>(v)));
    }
  }
  return ck;
}

// Bit-level equality, so -0 vs 0 and NaN payloads would show.
void expect_same_bits(const std::vector<double>& a, const std::vector<double>& b,
                      const char* name) {
  ASSERT_EQ(a.size(), b.size()) << name;
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0)
        << name << "[" << i << "]: " << a[i] << " vs " << b[i];
}

void expect_same(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.D, b.D);
  EXPECT_EQ(a.H, b.H);
  EXPECT_EQ(a.C, b.C);
  EXPECT_EQ(a.is_double, b.is_double);
  expect_same_bits(a.W1, b.W1, "W1");
  expect_same_bits(a.b1, b.b1, "b1");
  expect_same_bits(a.W2, b.W2, "W2");
  expect_same_bits(a.b2, b.b2, "b2");
}

std::uint32_t le32(const Bytes& b, std::size_t at) {
  return b[at] | b[at + 1] << 8 | b[at + 2] << 16 | static_cast<std::uint32_t>(b[at + 3]) << 24;
}
void put_le32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}

class CheckpointFile : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    dir_ = tmp_.str();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static Bytes read(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), {});
  }
  static void write(const std::string& p, const Bytes& b) {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  // A valid float checkpoint's bytes, to corrupt.
  Bytes valid_bytes() {
    nn::train::save_checkpoint(path("valid.bin"), sample(5, 4, 3, false));
    return read(path("valid.bin"));
  }
  // Loading `bytes` must fail with "<file>: ...<phrase>..." on one line.
  void expect_refused(const Bytes& bytes, const std::string& phrase) {
    const std::string p = path("bad.bin");
    write(p, bytes);
    try {
      nn::train::load_checkpoint(p);
      ADD_FAILURE() << "accepted; expected: " << phrase;
    } catch (const nn::UserError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  nn::test::TempDir tmp_{"nn_ckpt"};
  fs::path dir_;
};

TEST_F(CheckpointFile, RoundTripFloatIsBitExact) {
  const Checkpoint ck = sample(784, 16, 10, false);
  nn::train::save_checkpoint(path("f.bin"), ck);
  expect_same(nn::train::load_checkpoint(path("f.bin")), ck);
  EXPECT_EQ(fs::file_size(path("f.bin")), 32u + 4u * (16 * 784 + 16 + 10 * 16 + 10) + 4u);
}

TEST_F(CheckpointFile, RoundTripDoubleIsBitExact) {
  const Checkpoint ck = sample(784, 16, 10, true);
  nn::train::save_checkpoint(path("d.bin"), ck);
  expect_same(nn::train::load_checkpoint(path("d.bin")), ck);
  EXPECT_EQ(fs::file_size(path("d.bin")), 32u + 8u * (16 * 784 + 16 + 10 * 16 + 10) + 4u);
}

// The layout of docs/checkpoint.md, byte by byte.
TEST_F(CheckpointFile, LayoutMatchesTheDocumentation) {
  Checkpoint ck = sample(3, 2, 2, false);
  ck.W1 = {1, 2, 3, 4, 5, 6};  // H x D = 2 x 3, column-major
  ck.b1 = {7, 8};
  ck.W2 = {9, 10, 11, 12};
  ck.b2 = {13, 14};
  nn::train::save_checkpoint(path("l.bin"), ck);
  const Bytes b = read(path("l.bin"));
  ASSERT_EQ(b.size(), 32u + 4u * 14 + 4u);
  EXPECT_EQ(std::memcmp(b.data(), "NNMNIST\0", 8), 0);
  EXPECT_EQ(le32(b, 8), 1u);   // version
  EXPECT_EQ(le32(b, 12), 4u);  // bytes per value
  EXPECT_EQ(le32(b, 16), 3u);  // D
  EXPECT_EQ(le32(b, 20), 2u);  // H
  EXPECT_EQ(le32(b, 24), 2u);  // C
  EXPECT_EQ(le32(b, 28), 0u);  // reserved
  for (int i = 0; i < 14; ++i) {
    float f;
    const std::uint32_t bits = le32(b, 32 + 4 * i);
    std::memcpy(&f, &bits, 4);
    EXPECT_EQ(f, static_cast<float>(i + 1)) << "value " << i;
  }
  const auto crc = static_cast<std::uint32_t>(crc32(0L, b.data(), static_cast<uInt>(b.size() - 4)));
  EXPECT_EQ(le32(b, b.size() - 4), crc);
}

// ---- version 2: the training state (TrainState) after the tensors ----

nn::train::TrainState sample_state(std::uint32_t ranks, std::uint32_t epochs) {
  nn::train::TrainState st;
  auto& f = st.fingerprint;
  f.seed = 0x0123456789abcdefULL, f.batch = 7, f.n_fit = 54, f.n_val = 6, f.lr = 0.5, f.reg = 1e-3;
  f.ranks = ranks, f.strategy = 2, f.gemm = 4, f.shuffle = 1, f.data_crc = 0xdeadbeef;
  st.epoch = epochs;
  st.batch = 3;
  for (std::uint32_t r = 0; r < ranks; ++r) {
    st.loss_sum.push_back(1.25 + r / 3.0);
    st.hits.push_back(1000 + r);
  }
  for (std::uint32_t e = 0; e < epochs; ++e) st.epochs.push_back({2.0 / (e + 1), 0.5 + e / 100.0, 0.25 + e / 50.0});
  return st;
}

double f64_at(const Bytes& b, std::size_t at) {
  std::uint64_t bits = le32(b, at) | std::uint64_t{le32(b, at + 4)} << 32;
  double v;
  std::memcpy(&v, &bits, 8);
  return v;
}

TEST_F(CheckpointFile, StateRoundTripIsBitExactInBothPrecisions) {
  for (bool is_double : {false, true}) {
    Checkpoint ck = sample(784, 16, 10, is_double);
    ck.state = sample_state(3, 2);
    nn::train::save_checkpoint(path("s.bin"), ck);
    const Checkpoint back = nn::train::load_checkpoint(path("s.bin"));
    expect_same(back, ck);
    ASSERT_TRUE(back.state.has_value());
    EXPECT_TRUE(*back.state == *ck.state);
    const std::size_t P = is_double ? 8 : 4;
    EXPECT_EQ(fs::file_size(path("s.bin")), 32u + P * (16 * 784 + 16 + 10 * 16 + 10) + 80u + 16u * 3 + 24u * 2 + 4u);
    // Equal states give equal files: nothing run-dependent is written.
    EXPECT_EQ(nn::train::encode_checkpoint(back), read(path("s.bin")));
  }
}

// The state section of docs/checkpoint.md, byte by byte.
TEST_F(CheckpointFile, StateLayoutMatchesTheDocumentation) {
  Checkpoint ck = sample(3, 2, 2, false);
  ck.state = sample_state(2, 1);
  const Bytes b = nn::train::encode_checkpoint(ck);
  const std::size_t s = 32 + 4 * 14;  // the state starts after the tensors
  ASSERT_EQ(b.size(), s + 80 + 16 * 2 + 24 + 4);
  EXPECT_EQ(le32(b, 8), 2u);  // version
  EXPECT_EQ(le32(b, s + 0), 0x89abcdefu);  // seed, low word first
  EXPECT_EQ(le32(b, s + 4), 0x01234567u);
  EXPECT_EQ(le32(b, s + 8), 7u);    // batch size
  EXPECT_EQ(le32(b, s + 16), 54u);  // n_fit
  EXPECT_EQ(le32(b, s + 24), 6u);   // n_val
  EXPECT_EQ(f64_at(b, s + 32), 0.5);   // lr
  EXPECT_EQ(f64_at(b, s + 40), 1e-3);  // reg
  EXPECT_EQ(le32(b, s + 48), 2u);   // ranks
  EXPECT_EQ(le32(b, s + 52), 2u);   // strategy (model)
  EXPECT_EQ(le32(b, s + 56), 4u);   // gemm
  EXPECT_EQ(le32(b, s + 60), 1u);   // shuffle
  EXPECT_EQ(le32(b, s + 64), 0xdeadbeefu);  // data CRC
  EXPECT_EQ(le32(b, s + 68), 1u);   // epochs finished
  EXPECT_EQ(le32(b, s + 72), 3u);   // batches of the next epoch finished
  EXPECT_EQ(f64_at(b, s + 80), 1.25);      // rank 0: loss sum, hits
  EXPECT_EQ(le32(b, s + 88), 1000u);
  EXPECT_EQ(f64_at(b, s + 96), 1.25 + 1 / 3.0);  // rank 1
  EXPECT_EQ(le32(b, s + 104), 1001u);
  EXPECT_EQ(f64_at(b, s + 112), 2.0);   // epoch 1: loss, train acc, val acc
  EXPECT_EQ(f64_at(b, s + 120), 0.5);
  EXPECT_EQ(f64_at(b, s + 128), 0.25);
  const auto crc = static_cast<std::uint32_t>(crc32(0L, b.data(), static_cast<uInt>(b.size() - 4)));
  EXPECT_EQ(le32(b, b.size() - 4), crc);
}

TEST_F(CheckpointFile, RefusesCorruptStates) {
  Checkpoint ck = sample(3, 2, 2, false);
  ck.state = sample_state(2, 1);
  const Bytes good = nn::train::encode_checkpoint(ck);
  const std::size_t s = 32 + 4 * 14;
  const auto fix_crc = [](Bytes& b) {
    put_le32(b, b.size() - 4, static_cast<std::uint32_t>(crc32(0L, b.data(), static_cast<uInt>(b.size() - 4))));
  };
  Bytes b = good;
  b.resize(b.size() - 10);
  expect_refused(b, "truncated");
  b = good;
  b.insert(b.end() - 4, 3, 0);
  expect_refused(b, "3 trailing bytes");
  b = good;
  put_le32(b, s + 48, 0);  // no ranks
  expect_refused(b, "corrupt training state: 0 ranks");
  b = good;
  put_le32(b, s + 52, 4);  // strategy 4 (3 is allreduce with node-shared weights)
  fix_crc(b);
  expect_refused(b, "corrupt training state: strategy or shuffle flag");
  b = good;
  put_le32(b, s + 72, 8);  // batch 8 of ceil(54 / 7) = 8 batches: past the end
  fix_crc(b);
  expect_refused(b, "corrupt training state: batch 8 past the epoch's end");
  b = good;
  b[s + 20] ^= 1;  // flipped inside the state: the CRC covers it
  expect_refused(b, "corrupt (CRC mismatch)");
}

TEST_F(CheckpointFile, RefusesWhatIsNotACheckpoint) {
  expect_refused({}, "not a checkpoint file (bad magic)");
  const std::string text = "hidden = 512\n";
  expect_refused(Bytes(text.begin(), text.end()), "not a checkpoint file (bad magic)");
  Bytes b = valid_bytes();
  b[0] = 'X';
  expect_refused(b, "not a checkpoint file (bad magic)");
}

TEST_F(CheckpointFile, RefusesOtherVersionsAndPrecisions) {
  Bytes b = valid_bytes();
  put_le32(b, 8, 3);
  expect_refused(b, "unsupported checkpoint version 3 (this build reads versions 1 and 2)");
  b = valid_bytes();
  put_le32(b, 8, 2);  // version 2 needs a training state after the tensors
  expect_refused(b, "truncated");
  b = valid_bytes();
  put_le32(b, 12, 3);
  expect_refused(b, "corrupt header: precision 3 (expected 4 or 8 bytes per value)");
  b = valid_bytes();
  put_le32(b, 28, 1);
  expect_refused(b, "corrupt header: reserved field is not zero");
}

TEST_F(CheckpointFile, RefusesZeroAndHugeSizesBeforeAllocating) {
  Bytes b = valid_bytes();
  put_le32(b, 20, 0);
  expect_refused(b, "corrupt header: zero size (D=5 H=0 C=3)");
  b = valid_bytes();
  put_le32(b, 16, 0xFFFFFFFFu);
  expect_refused(b, "corrupt header: implausible sizes (D=4294967295 H=4 C=3)");
  // Within int range but far beyond the file: caught by the length check, so no
  // multi-gigabyte buffer is ever requested.
  b = valid_bytes();
  put_le32(b, 16, 1u << 30);
  expect_refused(b, "truncated (");
  b = valid_bytes();
  put_le32(b, 16, 0x7FFFFFFFu);
  put_le32(b, 20, 0x7FFFFFFFu);
  put_le32(b, 12, 8);
  expect_refused(b, "corrupt header: implausible sizes");  // H*D*8 overflows 64 bits
}

TEST_F(CheckpointFile, RefusesTruncatedFilesAndTrailingBytes) {
  const Bytes good = valid_bytes();
  Bytes b(good.begin(), good.end() - 1);
  expect_refused(b, "truncated (" + std::to_string(b.size()) + " bytes; its header (D=5 H=4 C=3");
  b.assign(good.begin(), good.begin() + 20);
  expect_refused(b, "truncated (20 bytes, shorter than the 32-byte header)");
  b.assign(good.begin(), good.begin() + 32);
  expect_refused(b, "truncated (32 bytes;");
  b = good;
  b.push_back(0);
  expect_refused(b, "1 trailing bytes after the checkpoint");
}

TEST_F(CheckpointFile, RefusesFlippedBytesByCrc) {
  const Bytes good = valid_bytes();
  for (std::size_t at : {std::size_t{32}, good.size() / 2, good.size() - 5, good.size() - 1}) {
    Bytes b = good;
    b[at] ^= 0x10;
    expect_refused(b, "corrupt (CRC mismatch)");
  }
}

TEST_F(CheckpointFile, RefusesMissingFilesAndDirectories) {
  try {
    nn::train::load_checkpoint(path("nope.bin"));
    ADD_FAILURE();
  } catch (const nn::UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              path("nope.bin") + ": cannot read checkpoint: No such file or directory");
  }
  EXPECT_THROW(nn::train::load_checkpoint(dir_.string()), nn::UserError);
}

TEST_F(CheckpointFile, SaveIntoMissingDirectoryCreatesNothing) {
  const std::string p = path("missing/ck.bin");
  try {
    nn::train::save_checkpoint(p, sample(3, 2, 2, false));
    ADD_FAILURE();
  } catch (const nn::UserError& e) {
    EXPECT_EQ(std::string(e.what()), p + ": cannot write checkpoint: No such file or directory");
  }
  EXPECT_TRUE(listing().empty());
}

TEST_F(CheckpointFile, CheckWritable) {
  EXPECT_NO_THROW(nn::train::check_writable(path("ck.bin")));
  const auto message = [](const std::string& p) -> std::string {
    try {
      nn::train::check_writable(p);
    } catch (const nn::UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(message(path("missing/ck.bin")), "--save " + path("missing/ck.bin") + ": directory " +
                                                 path("missing") + " does not exist");
  EXPECT_EQ(message(dir_.string()), "--save " + dir_.string() + ": is a directory");
  write(path("file"), {1});
  EXPECT_EQ(message(path("file/ck.bin")),
            "--save " + path("file/ck.bin") + ": " + path("file") + " is not a directory");
  EXPECT_EQ(message(""), "--save: empty path");
  EXPECT_EQ(listing(), std::vector<std::string>{"file"});  // checking created nothing
}

// A directory nobody may write to (r-x for all). Root passes access(W_OK) whatever the mode
// bits say, so as root (CI) the two calls run in a child process that has become the user
// nobody; its exit status says what it saw.
TEST_F(CheckpointFile, CheckWritableRefusesReadOnlyDirectory) {
  using fs::perms;
  fs::create_directory(path("ro"));
  fs::permissions(path("ro"), perms::owner_read | perms::owner_exec | perms::group_read | perms::group_exec |
                                  perms::others_read | perms::others_exec);
  const auto refusals = [&] {  // bit 0: check_writable refused, bit 1: save_checkpoint refused
    int got = 0;
    try {
      nn::train::check_writable(path("ro/ck.bin"));
    } catch (const nn::UserError&) {
      got |= 1;
    }
    try {
      nn::train::save_checkpoint(path("ro/ck.bin"), sample(3, 2, 2, false));
    } catch (const nn::UserError&) {
      got |= 2;
    }
    return got;
  };
  if (::geteuid() != 0) {
    EXPECT_EQ(refusals(), 3);
  } else {
    // The test's directory is mkdtemp's 0700: nobody may pass through it to "ro".
    fs::permissions(fs::path(path("ro")).parent_path(), perms::group_exec | perms::others_exec, fs::perm_options::add);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(20);     // could not become nobody
      if (::access(path("ro").c_str(), R_OK | X_OK) != 0) ::_exit(21);   // cannot even see the directory
      ::_exit(refusals() == 3 ? 0 : 10 + refusals());
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "as nobody: 10 + the refusals seen (bit 0 check_writable, bit 1 save_checkpoint); "
                                         "20: setuid failed; 21: the directory was not reachable";
  }
  EXPECT_FALSE(fs::exists(path("ro/ck.bin")));
  fs::permissions(path("ro"), perms::owner_all);
}

TEST_F(CheckpointFile, ExistingFileIsReplacedWithoutLeftovers) {
  const Checkpoint a = sample(6, 3, 2, false), b = sample(8, 5, 4, true);
  nn::train::save_checkpoint(path("ck.bin"), a);
  nn::train::save_checkpoint(path("ck.bin"), b);
  expect_same(nn::train::load_checkpoint(path("ck.bin")), b);
  EXPECT_EQ(listing(), std::vector<std::string>{"ck.bin"});
}

// Two ways a save can fail once a checkpoint exists; each leaves it intact and leaves
// no temp file behind (and a stale temp file that must not make it fail). (A read-only directory would be the natural case, but the tests
// may run as root; these work for any user.)
TEST_F(CheckpointFile, FailedSaveLeavesTheOldFileIntact) {
  const Checkpoint old_ck = sample(6, 3, 2, false), new_ck = sample(6, 3, 2, true);
  const std::string p = path("ck.bin");
  nn::train::save_checkpoint(p, old_ck);

  // 1. Not a failure: a stale temp file left by a killed run (here under the pid-based
  //    name an earlier scheme used; pids are reused) does not block the save, and is not
  //    ours to delete.
  const std::string stale = p + ".tmp." + std::to_string(::getpid());
  fs::create_directory(stale);
  nn::train::save_checkpoint(p, new_ck);
  expect_same(nn::train::load_checkpoint(p), new_ck);
  EXPECT_TRUE(fs::is_directory(stale));
  fs::remove(stale);
  nn::train::save_checkpoint(p, old_ck);

  // 2. A write fails half-way: a 64-byte file size limit (EFBIG; SIGXFSZ ignored).
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg;
  try {
    nn::train::save_checkpoint(p, new_ck);
  } catch (const nn::UserError& e) {
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(msg, p + ": cannot write checkpoint: File too large");
  expect_same(nn::train::load_checkpoint(p), old_ck);
  EXPECT_EQ(listing(), std::vector<std::string>{"ck.bin"});

  // 3. The rename fails (the target is a non-empty directory): the temp file is removed.
  const std::string dir_target = path("target");
  fs::create_directories(dir_target + "/inside");
  EXPECT_THROW(nn::train::save_checkpoint(dir_target, new_ck), nn::UserError);
  EXPECT_EQ(listing(), (std::vector<std::string>{"ck.bin", "target"}));
}

// The test hook of a save that is about to be killed: SIGKILL (what the OOM killer or a
// batch system's time limit sends; nothing runs after it) once part of the file is written.
void die_mid_write(const std::string&, std::size_t written, std::size_t total) {
  if (written < total) ::raise(SIGKILL);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

// A process killed in the middle of writing a checkpoint over an existing one: the final
// name still holds the previous, complete checkpoint; the only other file is the killed
// save's temp file "<final>.tmp.XXXXXX". Saves do not remove such files: the same pattern
// names the temp file of a save still in progress (another rank, another job), so only the
// user can know it is stale. A later save succeeds regardless and leaves it alone.
// The save runs in a fork()ed child that does plain file I/O only (no MPI) and then dies;
// every rank does this in its own directory.
TEST_F(CheckpointFile, SaveKilledMidWriteLeavesThePreviousFile) {
  const std::string p = path("ck.bin");
  const Checkpoint old_ck = sample(6, 3, 2, false);
  nn::train::save_checkpoint(p, old_ck);
  const Checkpoint big = sample(784, 300, 10, true);  // 1.9 MB: two write() calls of at most 1 MiB
  ASSERT_GT(nn::train::encode_checkpoint(big).size(), std::size_t{1} << 20);

  std::fflush(nullptr);  // or the child's copy of buffered output could be printed twice
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    nn::train::set_checkpoint_write_hook(die_mid_write);
    try {
      nn::train::save_checkpoint(p, big);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(2);  // the save finished: the hook never fired
  }
  int status = 0;
  pid_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    ::usleep(10 * 1000);
  if (done == 0) {  // never hang the suite on a stuck child
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the child did not finish within 60 s";
  }
  ASSERT_EQ(done, pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << describe_status(status);

  expect_same(nn::train::load_checkpoint(p), old_ck);
  const std::vector<std::string> names = listing();
  ASSERT_EQ(names.size(), 2u) << testing::PrintToString(names);
  EXPECT_EQ(names[0], "ck.bin");
  const std::string prefix = "ck.bin.tmp.";
  EXPECT_EQ(names[1].rfind(prefix, 0), 0u) << names[1];
  EXPECT_EQ(names[1].size(), prefix.size() + 6) << names[1];  // mkstemp's XXXXXX
  EXPECT_EQ(fs::file_size(path(names[1])), std::uintmax_t{1} << 20);  // killed after the first write

  nn::train::save_checkpoint(p, big);
  expect_same(nn::train::load_checkpoint(p), big);
  EXPECT_EQ(listing(), names);
}

// The hook sees every write of a save, in order, with the temp file's name, and is off again
// once reset; the saved file is the one the hook watched being written.
TEST_F(CheckpointFile, WriteHookSeesEveryChunkOfTheTempFile) {
  static std::vector<std::size_t> seen;
  static std::string tmp_seen;
  seen.clear();
  const auto previous = nn::train::set_checkpoint_write_hook(
      [](const std::string& tmp, std::size_t written, std::size_t) {
        seen.push_back(written);
        tmp_seen = tmp;
      });
  const Checkpoint big = sample(784, 300, 10, false);  // 0.96 MB: one write
  const Checkpoint bigger = sample(784, 300, 10, true);  // 1.9 MB: two writes
  nn::train::save_checkpoint(path("a.bin"), big);
  nn::train::save_checkpoint(path("b.bin"), bigger);
  const auto mine = nn::train::set_checkpoint_write_hook(previous);
  EXPECT_NE(mine, nullptr);
  const std::size_t na = nn::train::encode_checkpoint(big).size(),
                    nb = nn::train::encode_checkpoint(bigger).size();
  EXPECT_EQ(seen, (std::vector<std::size_t>{na, std::size_t{1} << 20, nb}));
  EXPECT_EQ(tmp_seen.rfind(path("b.bin") + ".tmp.", 0), 0u) << tmp_seen;
  nn::train::save_checkpoint(path("c.bin"), big);  // hook off again
  EXPECT_EQ(seen.size(), 3u);
}

// decode_checkpoint is load_checkpoint without the file: the same result, the same messages.
TEST_F(CheckpointFile, DecodeFromMemoryMatchesLoad) {
  const Checkpoint ck = sample(7, 5, 3, true);
  const Bytes bytes = nn::train::encode_checkpoint(ck);
  nn::train::save_checkpoint(path("ck.bin"), ck);
  EXPECT_EQ(read(path("ck.bin")), bytes);
  expect_same(nn::train::decode_checkpoint(bytes.data(), bytes.size(), "mem"), ck);
  Bytes bad = bytes;
  bad[40] ^= 1;
  write(path("bad.bin"), bad);
  for (std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{31}, bytes.size() - 1, bytes.size()}) {
    const Bytes cut(bad.begin(), bad.begin() + static_cast<std::ptrdiff_t>(n));
    write(path("cut.bin"), cut);
    std::string from_file, from_memory;
    try {
      nn::train::load_checkpoint(path("cut.bin"));
    } catch (const nn::UserError& e) {
      from_file = e.what();
    }
    try {
      nn::train::decode_checkpoint(cut.data(), cut.size(), path("cut.bin"));
    } catch (const nn::UserError& e) {
      from_memory = e.what();
    }
    EXPECT_FALSE(from_file.empty()) << n;
    EXPECT_EQ(from_memory, from_file) << n;
  }
}

// Inputs kept from fuzzing (tests/fuzz/targets/fuzz_checkpoint.cpp): crashers that were fixed, and
// headers that probe the limits (sizes that overflow, or that ask for far more memory than
// the file holds). Each must be refused with one clean line, from a file and from memory.
TEST(CheckpointFuzzRegressions, EveryInputIsRefusedCleanly) {
  const std::string dir = nn::test::regression_dir("checkpoint");
  ASSERT_FALSE(dir.empty()) << "tests/fuzz/regressions/checkpoint not found from the working "
                               "directory or above the test binary";
  const auto files = nn::test::regression_files(dir);
  EXPECT_FALSE(files.empty()) << dir;
  for (const std::string& f : files) {
    std::string msg;
    try {
      nn::train::load_checkpoint(f);
      ADD_FAILURE() << f << ": accepted";
    } catch (const nn::UserError& e) {
      msg = e.what();
    }
    EXPECT_EQ(msg.rfind(f + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    std::ifstream in(f, std::ios::binary);
    const Bytes b{std::istreambuf_iterator<char>(in), {}};
    EXPECT_THROW(nn::train::decode_checkpoint(b.data(), b.size(), f), nn::UserError) << f;
  }
}

// The fuzzer's seeds (tests/fuzz/corpus/checkpoint/, written by tests/fuzz/make_seeds.py) must
// stay valid checkpoints, or fuzzing would start from refusals only.
TEST(CheckpointFuzzRegressions, SeedsAreValidAndRoundTrip) {
  const std::string reg = nn::test::regression_dir("checkpoint");
  ASSERT_FALSE(reg.empty());
  const auto seeds = nn::test::regression_files((fs::path(reg) / "../../corpus/checkpoint").string());
  EXPECT_FALSE(seeds.empty());
  for (const std::string& f : seeds) {
    std::ifstream in(f, std::ios::binary);
    const Bytes b{std::istreambuf_iterator<char>(in), {}};
    Checkpoint ck;
    ASSERT_NO_THROW(ck = nn::train::load_checkpoint(f)) << f;
    EXPECT_EQ(nn::train::encode_checkpoint(ck), b) << f;
  }
}

TEST(Checkpoint, SaveRejectsInconsistentTensorsAsAProgrammingError) {
  Checkpoint ck = sample(3, 2, 2, false);
  ck.b2.pop_back();
  EXPECT_THROW(nn::train::save_checkpoint("/nonexistent/x.bin", ck), std::invalid_argument);
  ck = sample(3, 2, 2, false);
  ck.H = 0;
  EXPECT_THROW(nn::train::save_checkpoint("/nonexistent/x.bin", ck), std::invalid_argument);
}

}  // namespace
