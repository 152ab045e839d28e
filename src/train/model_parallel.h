// Model parallelism's bookkeeping (docs/parallelism.md): which hidden units a rank owns, its
// slice of the packed parameters [W1 | b1 | W2 | b2], and the full parameters put back
// together from every rank's slice. Pure functions; tested by tests/train/test_strategies.cpp.
#pragma once
#include <vector>

namespace nn::train {

// Rank r of p owns hidden units [h0, h0 + H): H/p each, the first H%p ranks one more, so a
// rank may own none when p > H (rank 0 always owns at least one).
struct HiddenSlice {
  int h0 = 0, H = 0;
};
HiddenSlice hidden_slice(int H, int p, int r);

// The slice's packed parameters: rows [h0, h0+H) of W1 (H x D) and of b1, columns of W2
// (C x H), and all of b2, in the [W1 | b1 | W2 | b2] layout of a model with s.H hidden units.
std::vector<double> slice_params(const std::vector<double>& full, int D, int H, int C, HiddenSlice s);

// Inverse of slice_params over all ranks: `slices` is every rank's packed slice, concatenated
// in rank order (comm::gather_to_root); b2 is taken from rank 0's.
std::vector<double> assemble_params(const std::vector<double>& slices, int D, int H, int C, int p);

}  // namespace nn::train
