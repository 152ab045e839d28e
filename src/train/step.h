// The training step (step.cpp): the default data-parallel step and each other strategy beside
// it, one of them chosen when the run is made. Internal to src/train.
#pragma once
#include <cstddef>

#include "train/run.h"

namespace nn::train {

// The step this run takes every batch: data parallel (the default; the gradient staged through
// pinned host memory, or in place with --mpi device and --device cpu), the lone rank's fused
// step, model parallelism, the host's node-shared or overlapped step.
template <class T, class Model>
StepFn<T, Model> choose_step(const Run<T, Model>& R);

// --persistent: batches k .. k + n - 1 (consecutive full batches of one epoch) in one
// cooperative launch, the lone rank's fused step n times over.
template <class T, class Model>
void persistent_steps(Run<T, Model>& R, std::size_t k, std::size_t n);

}  // namespace nn::train
