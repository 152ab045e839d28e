// The --report performance report: every training batch timed phase by phase on rank 0
// (CUDA events; the emulator's events read the wall clock), the FLOP and byte counts of a
// batch, the rates they give and the course's roofline prediction, written as JSON
// (schema "nn-report-1"). The trainer (src/train/step.cpp and its Phase scopes, run.h) places the marks and,
// with --profile, the barriers and device syncs. Tested by tests/train/test_report.cpp and
// tests/train/test_report_training.cpp.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "train/devices.h"

namespace nn::train {

// A phase the batch did not go through: D2H, allreduce and H2D at p = 1 (the trainer skips
// them), forward and backward apart when only their sum could be timed.
inline constexpr double kNotRun = std::numeric_limits<double>::quiet_NaN();

// One training batch as timed on rank 0, in seconds.
struct BatchTiming {
  double forward = kNotRun, backward = kNotRun;
  double compute = kNotRun;  // forward + backward (timed as one when they cannot be split)
  double d2h = kNotRun, allreduce = kNotRun, h2d = kNotRun, step = kNotRun;
  double batch = kNotRun;  // the whole iteration, first mark to last (--profile waits included)
};

// What a mark starts. Untimed: a gap that belongs to no phase (a --profile barrier wait);
// it still counts in the batch's time.
enum class Mark { Forward, Backward, ForwardBackward, D2H, Allreduce, H2D, Step, Untimed };

// Marks on the default stream: each mark records a CUDA event that ends the running phase
// and starts the next; a phase's time is the elapsed time between its event and the next.
// Two sets of events alternate, so a batch's times are read once the NEXT batch has been
// queued (end()) and the device never waits for the host; flush() reads the last one.
// An inactive timer (every rank but 0, or no --report/--profile) does nothing at all.
// host_clock: the steady clock on the host instead (--device cpu: the work is done when the
// host reaches the mark, and there may be no CUDA device at all).
class PhaseTimer {
 public:
  explicit PhaseTimer(bool active, bool host_clock = false);
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  bool active() const { return active_; }
  void begin(Mark first);  // a batch starts, and with it `first`
  void mark(Mark next);    // the running phase ends, `next` starts
  void end();              // the batch ends; the previous batch is read
  void flush();            // the pending batch is read (waits for the device)
  const std::vector<BatchTiming>& batches() const { return done_; }

 private:
  static constexpr int kMaxMarks = 10;
  struct Slot {
    std::array<cudaEvent_t, kMaxMarks> ev{};
    std::array<std::chrono::steady_clock::time_point, kMaxMarks> at{};  // host_clock
    std::array<Mark, kMaxMarks> what{};
    int n = 0;             // marks recorded, the final one included
    bool pending = false;  // ended, not read yet
  };
  void record(Mark m);
  void read(Slot& s);

  bool active_, host_;
  std::array<Slot, 2> slots_{};
  int cur_ = 0;
  std::vector<BatchTiming> done_;
};

// Everything the report is made of (rank 0's view).
struct ReportInputs {
  std::string device;      // cudaGetDeviceProperties(...).name of rank 0's device (or the CPU's)
  bool emulator = false;   // build: "emulator" or "cuda"
  bool cpu = false;        // --device cpu: "build" is "cpu" (either build; no emulator involved)
  // --device cpu: the FLOP rate the BLAS reaches on the step's own GEMM shapes, measured in the
  // run; it replaces the measured p_flops as the roofline's compute ceiling. 0: not measured.
  int ranks = 1;
  std::vector<RankDevice> rank_devices;  // every rank's node and device (devices.h), rank order
  bool is_double = false;  // precision of the training
  int hidden = 0;
  std::size_t batch = 0;  // global batch size B
  int epochs = 0;
  std::size_t n_train = 0;  // images trained on (validation tail excluded)
  int gemm = 0;
  std::string gemm_why;  // --gemm auto: where gemm came from ("" otherwise)
  bool profile = false;
  bool node_shared = false;  // --device cpu, shared weights: MPI carries [b1 | W2 | b2] only
  std::size_t exact_bytes = 0;  // --exact on: 2 x the fixed-point words a step sums (0: off)
  double gemm_flops_per_s = 0;
  int D = 784, C = 10;
  std::vector<BatchTiming> batches;  // every batch of the run, in order
  std::vector<double> epoch_seconds;  // the epoch times the trainer printed
  double total_s = 0;                 // the training loop: every epoch, validation included
};

// FLOPs of one full global batch B, as in the course's analysis: the forward GEMMs
// 2BH(D+C) (W1 X: 2BHD, W2 A1: 2BCH) and the same again for the big backward GEMMs
// (dW1 = dZ1 X^T: 2BHD, dW2 = dZ2 A1^T: 2BCH). Not counted: dA1 = W2^T dZ2 (another 2BCH,
// 0.6% of F at C = 10, D = 784), biases, activations, softmax, the SGD step.
double batch_flops(std::size_t B, int H, int D, int C);
// Bytes one batch moves over PCIe, and over MPI, at p >= 2: the packed gradient
// [W1|b1|W2|b2] twice, 2(HD + H + CH + C) * sizeof(real) (down and up; sent and received).
double gradient_bytes(int H, int D, int C, std::size_t real_size);

// The report; every quotient whose divisor is zero, missing or not finite is null.
//   ranks: the number of ranks; rank_devices: one entry per rank, in rank order (rank_json in
//     devices.h: rank, host, local_rank, device, device_count, device_name), so a multi-node
//     run shows that each rank's device is its node-local rank modulo the node's devices.
//   phases.<name>: total_s, median_s (null when count is 0), count, for forward, backward,
//     d2h, allreduce, h2d, step, batch and forward_backward (the per-batch sum, which
//     p_flops uses; do not stack it with forward and backward).
//   measured: p_flops = F / median(forward + backward), p_pci = pci_bytes / median(d2h + h2d),
//     p_mpi = mpi_bytes / median(allreduce), flops_per_s = F / median(batch); medians are of
//     per-batch sums.
//   roofline_prediction_flops_per_s = AI / (AI / p_flops + (1/p_pci + 1/p_mpi) / 2) with
//     AI = F / pci_bytes; when no batch communicated (p = 1) the compute term alone, p_flops.
nlohmann::ordered_json make_report(const ReportInputs& in);

// Writes `report` to `path` through a temporary file in the same directory and a rename,
// so a reader never sees half a report. Throws nn::UserError naming --report and the path.
void write_report(const std::string& path, const nlohmann::ordered_json& report);

// A few lines for the console (rank 0): each phase's median and total, the rates, the
// prediction, taken from the report so both show the same numbers.
void print_report_summary(std::FILE* out, const nlohmann::ordered_json& report);

}  // namespace nn::train
