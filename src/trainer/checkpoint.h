// Checkpoints: a documented binary format (docs/checkpoint.md) with magic,
// version, precision, D/H/C, the four tensors and a CRC32, written through a temporary
// file and rename so a crash never leaves a truncated file under the final name.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nn::train {

struct Checkpoint {
  int D = 0, H = 0, C = 0;
  bool is_double = false;            // precision of the tensors in the file
  std::vector<double> W1, b1, W2, b2;  // column-major, as in the network (values exact in either precision)
};

// Writes `path` atomically (temp file in the same directory + fsync + rename).
// Throws nn::UserError with one clear line on failure (e.g. missing directory).
void save_checkpoint(const std::string& path, const Checkpoint& ck);

// Reads and validates `path` (magic, version, sizes, file length, CRC32). Throws
// nn::UserError naming the file and the problem.
Checkpoint load_checkpoint(const std::string& path);

// Throws nn::UserError unless `path` can be written later: its directory exists and is
// writable. Called before training so a bad --save path fails early, not at the end.
// `option` names the flag in the message ("--save", "--metrics").
void check_writable(const std::string& path, const std::string& option = "--save");

}  // namespace nn::train
