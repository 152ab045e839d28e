// Checkpoints: a documented binary format (docs/checkpoint.md) with magic,
// version, precision, D/H/C, the four tensors and a CRC32, written through a temporary
// file and rename so a crash never leaves a truncated file under the final name.
// Tests: tests/trainer/test_checkpoint.cpp; decode_checkpoint is fuzzed by tests/fuzz/ (`make fuzz`).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nn::train {

struct Checkpoint {
  int D = 0, H = 0, C = 0;
  bool is_double = false;            // precision of the tensors in the file
  std::vector<double> W1, b1, W2, b2;  // column-major, as in the network (values exact in either precision)
};

// Writes `path` atomically (temp file "<path>.tmp.XXXXXX" in the same directory + fsync +
// rename). Throws nn::UserError with one clear line on failure (e.g. missing directory); the
// temp file is then removed. A process killed mid-save leaves the previous `path` intact and
// its temp file behind (a later save does not touch it: the name may belong to another saver).
void save_checkpoint(const std::string& path, const Checkpoint& ck);

// Reads and validates `path` (magic, version, sizes, file length, CRC32). Throws
// nn::UserError naming the file and the problem.
Checkpoint load_checkpoint(const std::string& path);

// The file's bytes, and the same validation as load_checkpoint on bytes in memory (`name`
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

}  // namespace nn::train
