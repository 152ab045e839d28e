// --resume: a saved run continues only if it is the same run. Its fingerprint (seed, batch,
// sizes, lr, reg, ranks, strategy, device/GEMM, shuffling, the data's CRC32; io/checkpoint.h)
// must match this one's, field by field, and its network this run's. Tested by
// tests/train/test_resume.cpp and tests/cli/bad_input.sh.
#pragma once
#include <string>

#include "train/result.h"
#include "train/config.h"
#include "train/host_data.h"
#include "train/root_plan.h"

namespace nn::train {

RunFingerprint fingerprint_of(const Config& cfg, const HostData& data, const Sizes& sz);

// A checkpoint's network must be this run's: D, H, C and the precision (nn::UserError).
void check_network(const std::string& file, const Checkpoint& ck, int H, bool is_double);

// --resume with an existing --save file: its weights and state into rp, checked against
// rp.state.fingerprint (this run's).
void resume_from_save(const Config& cfg, bool is_double, RootPlan& rp);

}  // namespace nn::train
