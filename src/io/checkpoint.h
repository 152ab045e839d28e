// Checkpoints: a documented binary format (docs/checkpoint.md) with magic,
// version, precision, D/H/C, the four tensors, the training state (version 2) and a CRC32, written through a temporary
// file and rename so a crash never leaves a truncated file under the final name.
// Tests: tests/io/test_checkpoint.cpp; decode_checkpoint is fuzzed by tests/fuzz/ (`make fuzz`).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nn::io {

// What must not change between a run and its resumption (--resume), besides D/H/C and the
// precision (in the header): every value that changes the bits of the remaining steps.
struct RunFingerprint {
  std::uint64_t seed = 0;          // --seed: the shuffles (and the initial weights)
  std::uint64_t batch = 0;         // --batch B
  std::uint64_t n_fit = 0;         // training images (after --train-size and the validation hold-out)
  std::uint64_t n_val = 0;         // validation images
  double lr = 0, reg = 0;          // --lr, --reg
  std::uint32_t ranks = 0;         // MPI ranks (the shards and shuffles depend on them)
  std::uint32_t strategy = 0;      // Strategy: 0 allreduce, 1 ps, 2 model, or kAllreduceNodeShared
  // --device cpu, allreduce with the weights in the node's shared memory (--node-shared): the
  // same maths in another summation order, so a run never resumes across the two.
  static constexpr std::uint32_t kAllreduceNodeShared = 3;
  // --exact on (allreduce or ps: the same bits): the weights do not depend on the ranks, so such
  // a state resumes at any rank count (ranks then only sizes loss_sum and hits).
  static constexpr std::uint32_t kExact = 4;
  std::uint32_t gemm = 0;          // --gemm variant (summation orders differ), or kCpuBlas/kCpuOneDnn
  static constexpr std::uint32_t kCpuBlas = 255;    // --device cpu on OpenBLAS, whatever --gemm says
  static constexpr std::uint32_t kCpuOneDnn = 254;  // --device cpu on oneDNN (--cpu-gemm; files before
                                                    // it was there hold 255: they ran OpenBLAS)
  std::uint32_t shuffle = 0;       // 1 shuffled, 0 --no-shuffle
  std::uint32_t data_crc = 0;      // CRC32 of the n_fit training images, then their labels
  bool operator==(const RunFingerprint&) const = default;
};

// One finished epoch's printed metrics (timings are not kept: they differ between runs).
struct EpochRecord {
  double loss = 0, train_acc = 0, val_acc = 0;
  bool operator==(const EpochRecord&) const = default;
};

// Where a run stands (checkpoint version 2): with the weights, everything that decides the
// rest of the run. The shuffles need no generator state: epoch e's order is a function of
// (seed, e, rank) (shards.h).
struct TrainState {
  RunFingerprint fingerprint;
  std::uint32_t epoch = 0;            // epochs finished = the next epoch, 0-based
  std::uint64_t batch = 0;            // batches of that epoch finished (< batches per epoch)
  std::vector<double> loss_sum;       // per rank (fingerprint.ranks): the epoch's cross-entropy so far
  std::vector<std::uint64_t> hits;    // per rank: the epoch's correct predictions so far
  std::vector<EpochRecord> epochs;    // the finished epochs, `epoch` of them
  bool operator==(const TrainState&) const = default;
};

struct Checkpoint {
  int D = 0, H = 0, C = 0;
  bool is_double = false;            // precision of the tensors in the file
  std::vector<double> W1, b1, W2, b2;  // column-major, as in the network (values exact in either precision)
  std::optional<TrainState> state;   // version 2 files (the trainer's --save); none in version 1
};

// Writes `path` atomically (temp file "<path>.tmp.XXXXXX" in the same directory + fsync +
// rename). Throws nn::UserError with one clear line on failure (e.g. missing directory); the
// temp file is then removed. A process killed mid-save leaves the previous `path` intact and
// its temp file behind (a later save does not touch it: the name may belong to another saver).
void save_checkpoint(const std::string& path, const Checkpoint& ck);

// Reads and validates `path` (magic, version, sizes, file length, CRC32). Throws
// nn::UserError naming the file and the problem.
Checkpoint load_checkpoint(const std::string& path);

// The file's bytes (version 2 with a state, version 1 without), and the same validation as load_checkpoint on bytes in memory (`name`
// stands in for the path in messages). load_checkpoint is decode_checkpoint plus file I/O
// (its header check runs before the file is read whole), so fuzzing this fuzzes the loader.
std::vector<unsigned char> encode_checkpoint(const Checkpoint& ck);
Checkpoint decode_checkpoint(const unsigned char* data, std::size_t size, const std::string& name);

// Tests only: called after each write() of a save with the temp file's name and the bytes
// written so far (saves write at most 1 MiB per call), e.g. to kill the process mid-write.
// Returns the previous hook; nullptr (the default) disables it.
using CheckpointWriteHook = void (*)(const std::string& tmp_path, std::size_t written, std::size_t total);
CheckpointWriteHook set_checkpoint_write_hook(CheckpointWriteHook hook);

// Throws nn::UserError unless `path` can be written later: its directory exists and is
// writable. Called before training so a bad --save path fails early, not at the end.
// `option` names the flag in the message ("--save", "--metrics").
void check_writable(const std::string& path, const std::string& option = "--save");

}  // namespace nn::io
