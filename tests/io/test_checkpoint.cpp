// GoogleTest suite for src/io/checkpoint.cpp, the format: bit-exact round trips in both
// precisions, the documented byte layout (training state included), one test per corruption
// class, decoding from memory, replay of the fuzzer's saved inputs (tests/fuzz/). Saving (atomic
// replacement, failed and killed saves): test_checkpoint_saves.cpp. Each test writes only into its
// own mkdtemp directory (unique per MPI rank).
#include "checkpoint_test_util.h"

namespace {

using namespace checkpoint_test;

TEST_F(CheckpointFile, RoundTripFloatIsBitExact) {
  const Checkpoint ck = sample(784, 16, 10, false);
  nn::io::save_checkpoint(path("f.bin"), ck);
  expect_same(nn::io::load_checkpoint(path("f.bin")), ck);
  EXPECT_EQ(fs::file_size(path("f.bin")), 32u + 4u * (16 * 784 + 16 + 10 * 16 + 10) + 4u);
}

TEST_F(CheckpointFile, RoundTripDoubleIsBitExact) {
  const Checkpoint ck = sample(784, 16, 10, true);
  nn::io::save_checkpoint(path("d.bin"), ck);
  expect_same(nn::io::load_checkpoint(path("d.bin")), ck);
  EXPECT_EQ(fs::file_size(path("d.bin")), 32u + 8u * (16 * 784 + 16 + 10 * 16 + 10) + 4u);
}

// The layout of docs/checkpoint.md, byte by byte.
TEST_F(CheckpointFile, LayoutMatchesTheDocumentation) {
  Checkpoint ck = sample(3, 2, 2, false);
  ck.W1 = {1, 2, 3, 4, 5, 6};  // H x D = 2 x 3, column-major
  ck.b1 = {7, 8};
  ck.W2 = {9, 10, 11, 12};
  ck.b2 = {13, 14};
  nn::io::save_checkpoint(path("l.bin"), ck);
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

nn::io::TrainState sample_state(std::uint32_t ranks, std::uint32_t epochs) {
  nn::io::TrainState st;
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
    nn::io::save_checkpoint(path("s.bin"), ck);
    const Checkpoint back = nn::io::load_checkpoint(path("s.bin"));
    expect_same(back, ck);
    ASSERT_TRUE(back.state.has_value());
    EXPECT_TRUE(*back.state == *ck.state);
    const std::size_t P = is_double ? 8 : 4;
    EXPECT_EQ(fs::file_size(path("s.bin")), 32u + P * (16 * 784 + 16 + 10 * 16 + 10) + 80u + 16u * 3 + 24u * 2 + 4u);
    // Equal states give equal files: nothing run-dependent is written.
    EXPECT_EQ(nn::io::encode_checkpoint(back), read(path("s.bin")));
  }
}

// The state section of docs/checkpoint.md, byte by byte.
TEST_F(CheckpointFile, StateLayoutMatchesTheDocumentation) {
  Checkpoint ck = sample(3, 2, 2, false);
  ck.state = sample_state(2, 1);
  const Bytes b = nn::io::encode_checkpoint(ck);
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
  const Bytes good = nn::io::encode_checkpoint(ck);
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
  put_le32(b, s + 52, 5);  // strategy 5 (3: allreduce with node-shared weights, 4: --exact on)
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
    nn::io::load_checkpoint(path("nope.bin"));
    ADD_FAILURE();
  } catch (const nn::UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              path("nope.bin") + ": cannot read checkpoint: No such file or directory");
  }
  EXPECT_THROW(nn::io::load_checkpoint(dir_.string()), nn::UserError);
}

// decode_checkpoint is load_checkpoint without the file: the same result, the same messages.
TEST_F(CheckpointFile, DecodeFromMemoryMatchesLoad) {
  const Checkpoint ck = sample(7, 5, 3, true);
  const Bytes bytes = nn::io::encode_checkpoint(ck);
  nn::io::save_checkpoint(path("ck.bin"), ck);
  EXPECT_EQ(read(path("ck.bin")), bytes);
  expect_same(nn::io::decode_checkpoint(bytes.data(), bytes.size(), "mem"), ck);
  Bytes bad = bytes;
  bad[40] ^= 1;
  write(path("bad.bin"), bad);
  for (std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{31}, bytes.size() - 1, bytes.size()}) {
    const Bytes cut(bad.begin(), bad.begin() + static_cast<std::ptrdiff_t>(n));
    write(path("cut.bin"), cut);
    std::string from_file, from_memory;
    try {
      nn::io::load_checkpoint(path("cut.bin"));
    } catch (const nn::UserError& e) {
      from_file = e.what();
    }
    try {
      nn::io::decode_checkpoint(cut.data(), cut.size(), path("cut.bin"));
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
      nn::io::load_checkpoint(f);
      ADD_FAILURE() << f << ": accepted";
    } catch (const nn::UserError& e) {
      msg = e.what();
    }
    EXPECT_EQ(msg.rfind(f + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    std::ifstream in(f, std::ios::binary);
    const Bytes b{std::istreambuf_iterator<char>(in), {}};
    EXPECT_THROW(nn::io::decode_checkpoint(b.data(), b.size(), f), nn::UserError) << f;
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
    ASSERT_NO_THROW(ck = nn::io::load_checkpoint(f)) << f;
    EXPECT_EQ(nn::io::encode_checkpoint(ck), b) << f;
  }
}

TEST(Checkpoint, SaveRejectsInconsistentTensorsAsAProgrammingError) {
  Checkpoint ck = sample(3, 2, 2, false);
  ck.b2.pop_back();
  EXPECT_THROW(nn::io::save_checkpoint("/nonexistent/x.bin", ck), std::invalid_argument);
  ck = sample(3, 2, 2, false);
  ck.H = 0;
  EXPECT_THROW(nn::io::save_checkpoint("/nonexistent/x.bin", ck), std::invalid_argument);
}

}  // namespace
