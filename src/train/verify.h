// --verify: the Armadillo reference (src/reference) replays the run's global batches from the
// same initial parameters, and the final parameters are compared (relative Frobenius errors
// against a tolerance per precision). Tested by tests/train/test_train.cpp and
// tests/train/test_strategies.cpp at 1-4 ranks.
#pragma once
#include <cstddef>
#include <vector>

#include "model/param_layout.h"
#include "schedule/exact_plan.h"
#include "schedule/shards.h"
#include "train/config.h"
#include "train/host_data.h"
#include "train/result.h"

namespace nn::train {

using schedule::ShardPlan;

// The --verify tolerance on the relative errors for precision T (verify.cpp has the
// measurements behind it).
double verify_tolerance(bool is_double);

// The --verify replay: the Armadillo reference trains from the same initial parameters on
// the same global batches (global_epoch_order: the composition the ranks' shards produced),
// with the same 1/c_k scaling and reg, then the final parameters are compared.
// A resumed run replays from where it started (epoch e0, batch k0) with the weights it
// started from.
// exact: --exact's plan, whose batches the run took (the whole batch replayed at once: the
// reference knows no chunks), else the shards' batches of plan.
template <class T>
VerifyResult replay_and_compare(const Config& cfg, const ShardPlan& plan, const HostSplit& train,
                                const std::vector<T>& init, const std::vector<T>& final_p,
                                const model::ParamLayout& L, int e0, std::size_t k0,
                                const schedule::ExactPlan* exact = nullptr);

}  // namespace nn::train
