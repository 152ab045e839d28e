// Setting a run up, on every rank (setup.cpp): the plan (plan.h) shared from rank 0, the device
// chosen (devices.h), the training shards scattered ONCE (schedule/shards.h), the models built
// (model/model.h), and the header printed. Internal to src/train.
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "comm/nccl.h"
#include "common/device_buffer.h"
#include "schedule/shards.h"
#include "train/devices.h"
#include "train/exact.h"
#include "train/model_parallel.h"
#include "train/plan.h"
#include "train/host_data.h"
#include "train/result.h"

namespace nn::train {

// The schedule's names (src/schedule/shards.h), as the training code uses them.
using schedule::ShardPlan;
using schedule::make_plan;
using schedule::Part;
using schedule::part;
using schedule::shard_indices;
using schedule::shard_order;

// Everything a rank trains with, once set up.
template <class T, class Model>
struct Setup {
  RootPlan root_plan;  // sizes and init on every rank; metrics open on rank 0 only
  ShardPlan plan;
  std::vector<T> init;                 // static_cast of root_plan.init, as the reference converts
  std::vector<RankDevice> rank_devices;  // rank 0: every rank's node and device, in rank order
  std::string device_name;             // this rank's cudaDeviceProp::name (or CPU name), for --report
  bool graphs = false;                 // --graph resolved (graphs_in_use): the model replays CUDA Graphs
  bool persistent = false;             // --persistent resolved: runs of steps in one launch each
  int threads = 0;                     // --device cpu: this rank's BLAS threads
  int max_part = 0;                    // this rank's largest batch part (--exact: the chunk size)
  // --exact on: the batches' chunks, this rank's shard in their order, the exact sum (exact.h).
  std::unique_ptr<ExactChunks<T>> exact;
  // --exact on --device cpu with t threads a rank: t - 1 models that compute chunks beside the
  // model on threads of their own (CpuModel::follow), each chunk's GEMMs on one thread.
  std::vector<std::unique_ptr<Model>> followers;
  // --device cpu, data parallel, every rank on one node: the memory the model's parameters and
  // every rank's X and dZ1 live in (CpuModel::use_node_shared); null otherwise.
  std::unique_ptr<comm::NodeShared> node_memory;
  // --comm nccl on a device model: the job's NCCL communicator (declared before the model, whose
  // streams, destroyed first, may still hold its queued sums).
  std::unique_ptr<comm::Nccl> nccl;
  std::unique_ptr<Model> model;
  typename Model::Images val, test;  // rank 0 only
  // --strategy model: this rank's hidden units; rank 0 evaluates with the whole network,
  // put together from every rank's slice (full_params, epoch.cpp).
  HiddenSlice slice;
  std::unique_ptr<Model> eval_model;
  PinnedBuffer<T> h_scores;  // --strategy model with --comm host on a GPU: the scores' host copy
};

// Collective: every rank calls it with the same cfg.
template <class T, class Model>
Setup<T, Model> setup(const Config& cfg, const HostData& data);

// Rank 0's header: the build, the data, the configuration, the ranks and their devices.
template <class T, class Model>
void print_header(std::FILE* out, const Config& cfg, const HostData& data, const Setup<T, Model>& s);

// The four runs the trainer is built for: F(T, Model) for float and double, device and host.
#define NN_FOR_EACH_RUN(F)      \
  F(float, model::DeviceModel<float>)   \
  F(double, model::DeviceModel<double>) \
  F(float, model::CpuModel<float>)      \
  F(double, model::CpuModel<double>)

}  // namespace nn::train
