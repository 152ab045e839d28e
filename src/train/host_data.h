// The training data as the trainer receives it: the loaded (or in-memory) IDX splits, on rank 0.
// Internal to src/train and its callers (trainer.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nn::train {

// A split as loaded: D x n uint8 column-major images (one image per column) and n labels.
struct HostSplit {
  std::vector<std::uint8_t> images, labels;
  std::size_t size() const { return labels.size(); }
};
// Significant on rank 0 only (other ranks pass empty splits: rank 0 scatters).
struct HostData {
  HostSplit train;     // all training images; --train-size and the validation tail applied here
  HostSplit test;      // --test-size applied here
  std::string source;  // where they came from, for the header
};

}  // namespace nn::train
