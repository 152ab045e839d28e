// The trainer's configuration: every option of nn_train, with its default.
// Filled from the command line and/or a `key = value` file by parse_config (src/app/options.h);
// validated before any MPI work so every rank rejects bad input identically.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/cpu_gemm.h"

namespace nn::train {

// --cpu-gemm's values and their names belong to the host model (model/cpu_gemm.h).
using model::CpuGemm;
using model::cpu_gemm_available;
using model::cpu_gemm_name;
using model::cpu_gemm_version;
using model::resolved_cpu_gemm;

// How the ranks cooperate (docs/parallelism.md): data parallelism with the gradient summed by
// MPI_Allreduce or by a Send/Recv parameter server on rank 0, or model parallelism (each rank
// owns a slice of the hidden units; the partial output scores are all-reduced instead).
enum class Strategy { Allreduce, ParamServer, Model };
const char* strategy_name(Strategy s);  // "allreduce", "ps", "model"

// --comm: what sums a data-parallel rank's device gradient. Host: staged through pinned host
// memory to the host MPI_Allreduce (the default); Device: device pointers handed to a CUDA-aware
// MPI; Nccl: ncclAllReduce on the device, on a stream of its own (src/exchange/nccl.h). --device
// cpu sums in host memory whatever this says (Host only).
enum class Comm { Host, Device, Nccl };
const char* comm_name(Comm c);  // "host", "device", "nccl"

// Where a rank computes: its CUDA device (emulated in the emulator build), or the host CPU
// with BLAS (cpu_model.h), in either build.
enum class Device { Gpu, Cpu };
const char* device_name(Device d);  // "gpu", "cpu"

// --node-shared: one copy of the weights in the node's shared memory (--device cpu, data
// parallel, every rank on one node; setup.cpp's use_node_shared). Auto: wherever that holds;
// On: the same, but an error where it cannot (ps, model, the GPU, ranks on several nodes);
// Off: never (the whole gradient all-reduced).
enum class NodeShared { Auto, On, Off };
const char* node_shared_name(NodeShared m);

// --fused: the GPU step as five kernels, the batch gathered from the resident images once a step
// (device_model.h). Auto: wherever it runs (--device gpu, --gemm 4 or 5, data parallel); On: the
// same, but an error elsewhere; Off: the twelve-kernel step of the separate kernels (the
// reference path the fused one is measured against).
enum class Fused { Auto, On, Off };
const char* fused_name(Fused f);

// --persistent: a lone rank's fused steps as runs of steps in one cooperative launch each
// (kernels/ops/persistent_step.h). Auto: as measured where kernels/gemm/auto_table.h has this
// GPU's class and shape (gemm_auto.h), elsewhere where the plan's model predicts it faster than
// the fused step on this device (setup.cpp's resolve_persistent), else the fused step; On:
// wherever the device and shape allow it, an error elsewhere.
enum class Persistent { Auto, On, Off };
const char* persistent_name(Persistent p);
// --exchange-chunk: layer 1's gradient in pieces of this many bytes through the host-staged
// exchange (src/exchange/host_staged.h); 0: one piece. Auto: 512 KiB, where the scaling model
// puts the best piece within one of the best at every shape (docs/scaling.md).
constexpr std::size_t kExchangeChunkAuto = ~std::size_t(0);
constexpr std::size_t kExchangeChunkAutoBytes = std::size_t(512) << 10;
// Layer 1's values a piece for --exchange-chunk chunk_bytes (at most exchange::kMaxPieces pieces).
std::size_t exchange_piece_values(std::size_t chunk_bytes, std::size_t n_layer1, std::size_t value_size);
// Steps in one persistent launch at most: the host sees progress, stop requests and the step
// watchdog at these boundaries (and at every --print-every / --save-every boundary).
constexpr int kPersistentRun = 32;
// CUDA Graphs (--graph / --no-graph): Auto is on with the fused step (device_model.h), where
// the host then only queues a memcpy and one replay per step, and off elsewhere and on
// GPGPU-Sim (no stream capture); On: wherever --device gpu runs (an error on GPGPU-Sim); Off: never.
enum class Graphs { Auto, On, Off };
const char* graphs_name(Graphs g);
struct Config;
bool fused_in_use(const Config& cfg);  // what --fused resolves to for this configuration
bool graphs_in_use(const Config& cfg, bool on_simulator);  // what --graph resolves to

struct Config {
  std::string data = "data/current";  // IDX directory: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
  int hidden = 256;                   // H
  std::size_t batch = 100;            // global batch size B (split over the ranks)
  int epochs = 10;                    // 0: no training, evaluate the --load / --resume weights
  double lr = 0.5;
  double reg = 1e-4;                  // L2 on weights only
  std::size_t train_size = 0;         // use the first N training images (0 = all)
  std::size_t test_size = 0;          // use the first N test images (0 = all)
  double val_fraction = 0.1;          // tail of the used training images held out
  std::uint64_t seed = 1;             // initial weights and per-epoch shuffles
  bool shuffle = true;                // false: batches in file order
  int gemm = 4;                       // GEMM variant (variants.h; 0 = cuBLAS, on OpenBLAS in the CPU build)
  bool gemm_auto = false;             // --gemm auto: gemm is resolved by train_with (gemm_auto.h)
  std::string gemm_why;               // --gemm auto, once resolved: where gemm came from ("auto: ...")
  std::string save;                   // checkpoint (weights + training state) after every epoch and at the end ("" = none)
  bool resume = false;                // with save: continue from the state in `save` if that file exists
  std::size_t save_every = 0;         // with save: also save every K steps (0 = at epoch ends only)
  std::string load;                   // checkpoint to start from ("" = fresh init)
  bool verify = false;                // replay on the Armadillo reference and compare
  std::string metrics;                // per-epoch CSV ("" = none)
  int print_every = 0;                // loss printouts every K batches within an epoch (0 = off)
  std::string config_file;            // where options came from, for the header line
  std::string report;                 // JSON performance report written by rank 0 ("" = none)
  bool profile = false;               // barriers + device syncs at phase boundaries (perturbs timings)
  Strategy strategy = Strategy::Allreduce;
  bool overlap = true;                // data parallel: reduce layer 2 while the dW1 GEMM runs
  std::size_t exchange_chunk = kExchangeChunkAuto;  // bytes a piece of layer 1's staged exchange (0: one)
  NodeShared node_shared = NodeShared::Auto;  // --device cpu, ranks on one node: shared weights (setup.cpp)
  bool exact = false;                 // --exact on: weights independent of the rank count (src/train/exact.h)
  Comm comm = Comm::Host;             // --comm (--mpi): what sums the device gradient
  Graphs graph = Graphs::Auto;        // replay each step's kernels as CUDA Graphs (graphs_in_use)
  Fused fused = Fused::Auto;          // --device gpu: the fused step (fused_in_use)
  Persistent persistent = Persistent::Auto;  // a lone rank's steps in runs of one launch each
  Device device = Device::Gpu;        // --device gpu | cpu
  CpuGemm cpu_gemm = CpuGemm::Auto;  // --device cpu: the GEMM library (cpu_gemm.h; resolved by train_with)
  double timeout = 300;               // seconds a step may take before the job ends (0 = off; watchdog.h)
};

}  // namespace nn::train
