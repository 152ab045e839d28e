// GEMM variant 4 (warptile), host side: which tile configuration and how many k-slices a shape
// gets (gemm_tuning::warptile_plan), the SM count it is based on, and the split-K scratch
// cached per (device, stream) with its release (gemm_release_workspaces). The kernel and its
// launch: 4_warptile.cu. Tested by tests/kernels/test_gemm.cpp (GemmWarptile.*).
#include "gemm/gemm.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "common/check.h"
#include "gemm/4_warptile.h"

namespace nn::gemm_detail::warptile {

int sm_count() {
  static std::atomic<int> cache[16] = {};
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const int slot = dev >= 0 && dev < 16 ? dev : 0;
  int n = cache[slot].load(std::memory_order_relaxed);
  if (n == 0 || dev >= 16) {
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    n = std::max(n, 1);
    cache[slot].store(n, std::memory_order_relaxed);
  }
  return n;
}

namespace {
int tiles(int cfg, int M, int N) {
  return ((M + kTileM[cfg] - 1) / kTileM[cfg]) * ((N + kTileN[cfg] - 1) / kTileN[cfg]);
}
}  // namespace

// Blocks per SM that split-K aims for, and the shortest k-slice it makes, by configuration
// {128x64, 64x64, 64x32, 16x64}. Measured on an H200 (132 SMs) over the trainer's 60 GEMMs at
// H:B = 256:100, 512:3000, 1024:1000, 1024:3000 and p = 1, 2, 4, every tile at 1-16 slices
// (gemm_bench --splits; the runs: bench/README.md, "Why these tiles"):
//   64x32: 4 per SM, slices >= 64 (dW1 at H = 512: 94 us with 3 slices, 112 with 2);
//   64x64: 8 per SM, but slices >= 512: it is chosen for the big shapes, whose long-K weight
//     gradient wants many slices (dW1 at H = 1024, K = 3000: 149 us with the 5 this gives, 185
//     for 64x32 with 2), while splitting a K of 784 or less only costs (forward1 at 1024:1000: 56.5 us
//     unsplit, 62 with 2 slices);
//   16x64 (the 10-row layer): 4 per SM, slices >= 16 (dW2 at K = 250: 9.5 us with 16 slices,
//     11.6 with the 3 that slices >= 64 allowed).
constexpr int kBlocksPerSm[] = {2, 8, 4, 4};
constexpr int kMinSlice[] = {512, 512, 64, 16};
static_assert(sizeof kBlocksPerSm / sizeof kBlocksPerSm[0] == gemm_tuning::kWarptileConfigs);
static_assert(sizeof kMinSlice / sizeof kMinSlice[0] == gemm_tuning::kWarptileConfigs);

// If the tiles give fewer than kBlocksPerSm blocks per SM and K is long enough (the weight
// gradients, K = batch), split K into enough slices to reach that (the kernel then rounds each
// slice up to whole BK tiles), at most 16 and each at least kMinSlice long.
int plan_splits(int cfg, int M, int N, int K, int sms) {
  const int t = tiles(cfg, M, N);
  const int target = kBlocksPerSm[cfg] * sms;
  if (t >= target) return 1;
  return std::clamp((target + t - 1) / t, 1, std::clamp(K / kMinSlice[cfg], 1, 16));
}

// Split-K scratch, one per (device, stream) so GEMMs on different streams never share it.
// Grown on demand (the trainer's shapes are fixed, so after the first batches this is a lookup).
// A buffer outgrown is retired, not freed: a CUDA Graph captured earlier (--graph) holds its
// address and replays write to it. Freeing it makes the next replay fault on a GPU
// once a later GEMM on the stream grows the scratch (nn_train --graph on an H200:
// docs/testing.md, "On a GPU"; tests/kernels/test_gemm_warptile.cpp's
// GraphKeepsItsScratchWhenALaterGemmGrowsIt, which the emulator fails without this).
// Everything is freed by gemm_release_workspaces() only, before a reset; never at exit: at
// static destruction the CUDA runtime may already be gone.
namespace {
std::mutex mu;
auto* all = new std::map<std::pair<int, cudaStream_t>, Workspace>;
auto* retired = new std::vector<void*>;  // outgrown buffers, kept for captured graphs
}  // namespace

Workspace& workspace(cudaStream_t s, std::size_t partial_bytes, std::size_t n_counters) {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  Workspace& w = (*all)[{dev, s}];
  // (One workspace per (device, stream): the stream must not be destroyed while in use.)
  if (w.partial_bytes < partial_bytes) {
    if (w.partial) retired->push_back(w.partial);
    w.partial = nullptr;
    CUDA_CHECK(cudaMalloc(&w.partial, partial_bytes));
    w.partial_bytes = partial_bytes;
  }
  if (w.n_counters < n_counters) {
    if (w.counters) retired->push_back(w.counters);
    w.counters = nullptr;
    CUDA_CHECK(cudaMalloc(&w.counters, n_counters * sizeof(unsigned)));
    CUDA_CHECK(cudaMemsetAsync(w.counters, 0, n_counters * sizeof(unsigned), s));
    w.n_counters = n_counters;
  }
  return w;
}

namespace {
void release_workspaces() {
  std::lock_guard<std::mutex> lock(mu);
  if (all->empty()) return;
  (void)cudaDeviceSynchronize();  // errors ignored: a reset, often after a fault, follows
  for (auto& [key, w] : *all) {
    (void)cudaFree(w.partial);
    (void)cudaFree(w.counters);
  }
  for (void* p : *retired) (void)cudaFree(p);
  all->clear();
  retired->clear();
  (void)cudaGetLastError();
}
}  // namespace

}  // namespace nn::gemm_detail::warptile

namespace nn::gemm_tuning {

const char* warptile_config_name(int cfg) {
  static constexpr const char* names[kWarptileConfigs] = {"128x64", "64x64", "64x32", "16x64"};
  return cfg >= 0 && cfg < kWarptileConfigs ? names[cfg] : "unknown";
}

// Tuned on an H200 (132 SMs): gemm_bench --configs, then every configuration at 1-16
// k-slices (gemm_bench --splits at H:B = 512:3000, 1024:1000, 1024:3000 and 256:100;
// bench/README.md). Over those 60 GEMMs the plan's choice runs 2.0% slower than the fastest
// pair of the same run on (geometric) average, 17% at worst (a 1 us dW2).
// bench/splits_report.py prints these from gemm_bench's CSVs (bench/README.md says which).
//   M <= 16 (the 10-class layer): 16x64.
//   64x64 when its tiles give every SM 1.5 blocks (forward1 at p = 1, dW1 at H = 1024, 4096^3).
//   Otherwise 64x32 (dW1 at H <= 512, forward1 at p = 2, 4).
//   Split-K as plan_splits says. 128x64 won once (forward1 1024x3000x784, 10%) and lost at
//   4096^3 (3%): it stays available to gemm_warptile_with_config.
WarptilePlan warptile_plan(int M, int N, int K) {
  namespace wt = gemm_detail::warptile;
  const int sms = wt::sm_count();
  const int cfg = M <= 16 ? 3 : 2 * wt::tiles(1, M, N) >= 3 * sms ? 1 : 2;
  return {cfg, wt::plan_splits(cfg, M, N, K, sms)};
}

}  // namespace nn::gemm_tuning

namespace nn {
void gemm_release_workspaces() {
  gemm_detail::warptile::release_workspaces();
  gemm_detail::release_cublas_handle();
}
}  // namespace nn
