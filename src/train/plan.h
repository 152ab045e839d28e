// What rank 0 decides before training, and how every rank learns it: the options checked,
// the sizes, the initial parameters (fresh, --load, or the --resume state, resume.h), the
// training state every rank starts from. Called by setup (setup.h); tested through
// tests/train and tests/cli/bad_input.sh.
#pragma once
#include <cstdint>
#include <vector>

#include "train/config.h"
#include "train/host_data.h"
#include "train/root_plan.h"

namespace nn::train {

// Identical on every rank (every rank parsed the same command line), so no collective.
// Throws nn::UserError.
void validate(const Config& cfg);

// Rank 0 only (called through on_root): checks the data against the options, draws or loads
// the initial parameters, checks the output paths.
RootPlan plan_on_root(const Config& cfg, const HostData& data, bool is_double);

// Rank 0's state (fresh or resumed) on every rank: where the run stands, every rank's sums
// of the epoch so far, the finished epochs. (The fingerprint stays on rank 0, which saves.)
void share_state(RootPlan& rp);

}  // namespace nn::train
