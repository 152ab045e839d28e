// What rank 0 decides before training (plan.h makes it, resume.h fills it from --save): the
// sizes, the initial parameters, the --metrics file and the training state. Internal to src/train.
#pragma once
#include <cstdint>
#include <vector>

#include "train/result.h"
#include "train/util.h"

namespace nn::train {

// What rank 0 decides from the data, the options and the files: sizes, the initial
// parameters (fresh or from --load), the open --metrics file.
struct Sizes {
  std::uint64_t n_fit = 0, n_val = 0, n_test = 0;
};
struct RootPlan {
  Sizes sizes;
  std::vector<double> init;  // packed, as drawn / as stored
  FilePtr metrics;
  TrainState state;           // rank 0: fresh (epoch 0, batch 0) or as saved; its fingerprint
  bool resumed = false;       // the state and init came from --save (--resume)
};

}  // namespace nn::train
