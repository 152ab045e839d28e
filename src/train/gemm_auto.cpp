// --gemm auto and the measured part of --persistent auto (gemm_auto.h).
#include "train/gemm_auto.h"

#include <cuda_runtime.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "gemm/gemm.h"
#include "train/devices.h"
#include "train/result.h"

namespace nn::train {

namespace {

bool same_class(const GpuClass& gpu, const AutoRow& r) {
  return gpu.measured_class && gpu.major == r.cc_major && gpu.minor == r.cc_minor;
}

std::string shape(const AutoRow& r) { return std::to_string(r.hidden) + ":" + std::to_string(r.batch); }

std::string class_of(const GpuClass& gpu) { return std::to_string(gpu.major) + "." + std::to_string(gpu.minor); }

}  // namespace

const AutoRow* nearest_row(const GpuClass& gpu, int hidden, std::size_t batch) {
  const AutoRow* best = nullptr;
  double best_d = 0;
  if (hidden < 1 || batch < 1) return nullptr;
  for (const AutoRow& r : gemm_auto::kAutoTable) {
    if (!same_class(gpu, r)) continue;
    const double h = std::log(double(hidden) / r.hidden), b = std::log(double(batch) / double(r.batch));
    const double two = std::log(2.0) + 1e-12;
    if (std::abs(h) > two || std::abs(b) > two) continue;
    const double d = h * h + b * b;
    if (!best || d < best_d) best = &r, best_d = d;  // ties: the first row
  }
  return best;
}

const AutoRow* exact_row(const GpuClass& gpu, int hidden, std::size_t batch) {
  for (const AutoRow& r : gemm_auto::kAutoTable)
    if (same_class(gpu, r) && r.hidden == hidden && std::size_t(r.batch) == batch) return &r;
  return nullptr;
}

GemmPick pick_gemm(const GpuClass& gpu, int hidden, std::size_t batch, bool is_double, bool exact) {
  GemmPick p;
  const std::string keep = " keeps variant " + std::to_string(p.gemm);
  if (exact) return p.why = "auto: --exact on" + keep, p;
  if (is_double) return p.why = "auto: double" + keep + " (5 is float only)", p;
  if (!gpu.measured_class) return p.why = "auto: " + gpu.name + " is not a measured GPU", p;
  bool any = false;
  for (const AutoRow& r : gemm_auto::kAutoTable) any = any || same_class(gpu, r);
  if (!any) return p.why = "auto: no measurement for compute capability " + class_of(gpu), p;
  const AutoRow* r = nearest_row(gpu, hidden, batch);
  const std::string here = std::to_string(hidden) + ":" + std::to_string(batch);
  if (!r) return p.why = "auto: no shape measured within 2x of " + here, p;
  if (r->gemm == 5 && gpu.major < 8) return p.why = "auto: variant 5 needs compute capability 8.0", p;
  p.gemm = r->gemm;
  p.why = "auto: measured fastest at " + shape(*r) + (shape(*r) == here ? "" : " (nearest to " + here + ")") +
          " on " + gemm_auto::kMeasuredOn;
  return p;
}

GpuClass this_rank_gpu() {
  GpuClass g;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
    (void)cudaGetLastError();  // select_device reports it
    g.name = "no GPU";
    return g;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_for(comm::local_rank(), count)) != cudaSuccess) {
    (void)cudaGetLastError();
    g.name = "an unknown GPU";
    return g;
  }
  g.major = prop.major;
  g.minor = prop.minor;
  g.name = prop.name;
#ifdef SIM_EMULATOR
  g.measured_class = false;
  g.name = "the emulator";
#else
  g.measured_class = g.name.rfind("GPGPU-Sim", 0) != 0;
#endif
  return g;
}

namespace {

// Rank 0: the GPU variant of the run in cfg.save if --resume will continue it, else -1. A file
// it cannot read gives -1 here and its error from the plan (plan.cpp), as without auto.
int resumed_variant(const Config& cfg) {
  std::error_code ec;
  if (!cfg.resume || cfg.save.empty() || !std::filesystem::exists(cfg.save, ec)) return -1;
  try {
    const Checkpoint ck = load_checkpoint(cfg.save);
    if (ck.state && ck.state->fingerprint.gemm < std::uint32_t(kGemmVariants))
      return int(ck.state->fingerprint.gemm);
  } catch (const std::exception&) {
  }
  return -1;
}

}  // namespace

void resolve_gemm_auto(Config& cfg, bool is_double) {
  if (!cfg.gemm_auto || cfg.device != Device::Gpu) return;
  const int saved = comm::broadcast_value(comm::rank() == 0 ? resumed_variant(cfg) : -1);
  if (saved >= 0) {
    cfg.gemm = saved;
    cfg.gemm_why = "auto: the variant of the run resumed from " + cfg.save;
    return;
  }
  const int p = comm::size();
  const bool mp = cfg.strategy == Strategy::Model;
  const int h = mp ? (cfg.hidden + p - 1) / p : cfg.hidden;
  const std::size_t b = mp ? cfg.batch : (cfg.batch + std::size_t(p) - 1) / std::size_t(p);
  const GemmPick mine = pick_gemm(this_rank_gpu(), h, b, is_double, cfg.exact);
  const std::vector<std::string> all = comm::gather_strings(std::to_string(mine.gemm) + " " + mine.why);
  std::string agreed;  // rank 0: "N why" of every rank, or the fallback where they differ
  for (const std::string& s : all) {
    if (agreed.empty()) agreed = s;
    else if (s.substr(0, s.find(' ')) != agreed.substr(0, agreed.find(' ')))
      agreed = std::to_string(kGemmAutoFallback) + " auto: the ranks' GPUs choose differently";
  }
  agreed = comm::broadcast(agreed);
  cfg.gemm = std::stoi(agreed.substr(0, agreed.find(' ')));
  cfg.gemm_why = agreed.substr(agreed.find(' ') + 1);
}

std::optional<bool> measured_persistent(int hidden, std::size_t batch) {
#ifdef SIM_EMULATOR
  (void)hidden, (void)batch;
  return std::nullopt;  // the emulator is not a measured GPU
#else
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  GpuClass g;
  g.major = prop.major, g.minor = prop.minor, g.name = prop.name;
  g.measured_class = g.name.rfind("GPGPU-Sim", 0) != 0;
  const AutoRow* r = exact_row(g, hidden, batch);
  return r ? std::optional<bool>(r->persistent) : std::nullopt;
#endif
}

}  // namespace nn::train
