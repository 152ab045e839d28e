// GEMM variant 5 (tf32x3), host side: which tile configuration a shape gets and how many
// k-slices (tf32x3::plan_tile, plan_splits), fitted on an H200. The kernel and its launch:
// 5_tf32x3.cu. Tested through gemm(5, ...) in tests/kernels/test_gemm_tf32x3.cu and every
// AllVariants case; timed by gemm_bench --tf32 (every tile at --splits N,...).
#include "gemm/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "gemm/4_warptile.h"
#include "gemm/5_tf32x3.h"

namespace nn::gemm_detail {

namespace tf32x3 {

// k-slices for t tiles of which `resident` fit an SM at once, at depth K. Fitted to every
// configuration at 1-6 slices over the trainer's GEMMs at H:B = 1024:3000, 1024:1000 and
// 256:100 and at 4096^3 on an H200 (gemm_bench --tf32 --splits 1,2,3,4,6): this plan's GEMMs
// take 1.01x the per-shape best in total, at most 1.3x on one shape (dA1, K = 10).
//  - Fewer tiles than SMs (the 10-row layer, the weight gradients of small layers): idle SMs,
//    and each block is a long chain of k-tiles; split until the slices fill every SM's
//    blocks, down to slices of 32.
//  - Otherwise the count that minimises waves per slice plus the cost of the split, modelled
//    as ceil(t * s / slots) / s + 256 * s / K (slots = resident * SMs; slices of 128 or more):
//    splitting pays for a long K (dW1 at H = 1024, K = 3000: 3 slices, 0.140 ms against 0.176
//    unsplit) and costs at K = 784 (forward1 at 1024:1000: 0.052 ms unsplit, 0.061 with 3).
int plan_splits(long t, int resident, int K) {
  const int sms = warptile::sm_count();
  const long slots = long(resident) * sms;
  if (t < sms) {
    const int most = std::clamp(K / 32, 1, 16);
    return static_cast<int>(std::clamp<long>((slots + t - 1) / t, 1, most));
  }
  const int most = std::clamp(K / 128, 1, 16);
  int best = 1;
  double best_cost = 0;
  for (int sp = 1; sp <= most; ++sp) {
    const double cost = double((t * sp + slots - 1) / slots) / sp + 256.0 * sp / K;
    if (sp == 1 || cost < best_cost - 1e-12) best = sp, best_cost = cost;
  }
  return best;
}

// The wgmma kernel holds one block an SM, so plan_splits' rule for fewer tiles than SMs (round
// the slices up until they fill every SM) overshoots into a second, mostly idle wave: dW1 at
// H = 1024 (56 tiles) would get 3 slices, 168 blocks on 132 SMs, 2 x 1000 k-steps on the
// busiest SM where 2 slices take 1 x 1500. Here every count is costed that way instead.
// kBlockCost (the prologue and epilogue of a block, in k-steps) and kSliceCost (the partial
// sums through L2 and their reduction, per extra slice) are estimates until a GPU fits them.
int plan_splits_waves(long t, int K, int align) {
  constexpr double kBlockCost = 64, kSliceCost = 32;
  const long sms = warptile::sm_count();
  int best = 1;
  double best_cost = 0;
  for (int sp = 1; sp <= 16 && (sp == 1 || K / sp >= 2 * align); ++sp) {
    const long slice = ((K + sp - 1) / sp + align - 1) / align * align;
    const long waves = (t * sp + sms - 1) / sms;
    const double cost = double(waves) * double(slice + kBlockCost) + kSliceCost * (sp - 1);
    if (sp == 1 || cost < best_cost - 1e-9) best = sp, best_cost = cost;
  }
  return best;
}

// Blocks of each configuration an SM holds (sm_90, ptxas: about 220, 130-160, 64 and 236
// registers a thread): the tile choice's estimate; the split plan asks the runtime.
constexpr int kNominalBlocks[kConfigs] = {1, 3, 8, 2};

// 128x64 where it makes at least 4 full waves (the fastest at 4096^3 on an H200, ahead of
// 128x128 and 64x64); 64x64 where its tiles fill at least 45% of one wave (forward1 at H =
// 1024, B >= 750); else 32x32 (more, shorter blocks: the small layers, the 10-row layer), also
// for a short K (dA1, K = 10, where 32x32 beats 64x64). Measured with gemm_bench --tf32 on an
// H200, as plan_splits.
int plan_tile(int M, int N, int K) {
  const long sms = warptile::sm_count();
  const auto tiles = [&](int c) {
    return long((M + kTileM[c] - 1) / kTileM[c]) * ((N + kTileN[c] - 1) / kTileN[c]);
  };
  if (K < 64) return 2;
  // Opt-in: NN_TF32_WGMMA=1 in the environment (read at every call) gives the wgmma kernel
  // every GEMM with M, N and K of 64 or more on a GPU that has it (compute capability 9.0). Not
  // in the default plan; its k-slice rule's constants are estimates, not fitted
  // (kernels/gemm/README.md; its speed: the table there).
  if (M >= 64 && N >= 64) {
    const char* e = std::getenv("NN_TF32_WGMMA");
    static const bool available = gemm_tuning::tf32_wgmma_available();
    if (e && std::string(e) == "1" && available) return gemm_tuning::kTf32Wgmma;
  }
  if (tiles(3) >= 4 * kNominalBlocks[3] * sms) return 3;
  if (tiles(1) * 20 >= 9 * kNominalBlocks[1] * sms) return 1;
  return 2;
}

Slices slice_k(int K, int splits, int align, std::size_t tiles, std::size_t tile_floats, cudaStream_t s) {
  int k_split = (K + splits - 1) / splits;
  k_split = (k_split + align - 1) / align * align;
  Slices sl{k_split, k_split > 0 ? unsigned((K + k_split - 1) / k_split) : 1u, nullptr, nullptr};
  if (sl.z > 1) {
    warptile::Workspace& w = warptile::workspace(s, tiles * sl.z * tile_floats * sizeof(float), tiles);
    sl.ws = static_cast<float*>(w.partial);
    sl.counters = w.counters;
  }
  return sl;
}

}  // namespace tf32x3

int tf32_plan(int M, int N, int K) { return tf32x3::plan_tile(M, N, K); }

}  // namespace nn::gemm_detail
