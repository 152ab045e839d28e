// The training loop (epoch.cpp): epochs of steps, each step wrapped in what the run needs around
// it (the watchdog, --report's batch, the statistics, the ranks' agreement to go on), the
// epoch's end (validation, its report line and --metrics row, the save), and the checkpoint
// snapshot that --save and the end of the run write. Internal to src/train.
#pragma once
#include <optional>
#include <vector>

#include "train/result.h"
#include "train/run.h"

namespace nn::train {

// Rank 0 opens --metrics once setup has succeeded (so a failed start keeps the old CSV).
template <class T, class Model>
void open_metrics(Run<T, Model>& R);

// Every epoch from where the run stands to cfg.epochs, or until the ranks agree to stop.
template <class T, class Model>
void train_epochs(Run<T, Model>& R);

// The whole network's parameters, put together from the model-parallel slices. Collective;
// the result on rank 0 only.
template <class T, class Model>
std::vector<T> full_params(Run<T, Model>& R);

// The weights and the state as --save holds them, on rank 0 (std::nullopt elsewhere).
// Collective: model parallelism gathers the slices, every rank sends its epoch sums.
template <class T, class Model>
std::optional<Checkpoint> snapshot(Run<T, Model>& R, const std::vector<T>* params = nullptr);

// --save now (collective): written to a temporary file, fsync'ed and renamed (checkpoint.cpp).
template <class T, class Model>
void save_now(Run<T, Model>& R);

}  // namespace nn::train
