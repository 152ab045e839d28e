// The persistent step's plan (persistent_step.h): the variant, the W1 tiles and the grid from the
// device's SM count, shared memory and the kernels' occupancy, and a model of the step's time for
// the second kernel and for the fused step, from the latencies and rates measured on an H200 (the
// constants below); a prediction, never a measurement. Host code (nvcc or simcc, for the kernels'
// occupancy). Tested by tests/kernels/test_persistent_step2.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ops/persistent_step.h"
#include "ops/persistent_step2.h"

namespace nn {

namespace persist1 {  // persistent_step.cu
template <class T>
int blocks_per_sm();
int pick_tile_d(int D, int H, int blocks);
}  // namespace persist1

namespace {

// The model's inputs. Measured on an H200 (132 SMs): a cooperative grid.sync over 132 blocks
// 1.06 us; the fused step 38.7 us at 256:100 and 100 us at 512:800 (its model below is the line
// through those two: 34.6 us + its FLOPs at 19.6 TFLOP/s).
// Provenance: the H200 runs that docs/performance.md's GPU tables cite (latency_probe, lat_ours_*).
// From the kernel's sm_90 SASS
// (nvcc 13.0): phase A's loop 85 instructions a warp per 4 inputs of its 4 x 4 tile, phase C's
// 83 per 4 batch columns. Assumed: 1.98 GHz; a warp scheduler (4 an SM) issues one instruction a
// clock, so a phase takes its busiest scheduler's warps times a warp's instructions; a dependent
// round trip to L2 of 0.7 us with everything it issues in flight; 4 TB/s for the split-K partials.
constexpr double kSyncUs = 1.06, kTripUs = 0.7, kClockPerUs = 1980.0, kBytesPerUs = 4.0e6;
constexpr double kLoopA = 85, kLoopC = 83, kLoopExtra = 40;  // instructions
constexpr double kFusedFixedUs = 34.6, kFusedFlopPerUs = 19.6e6;
constexpr double kColumnUs = 0.35;  // phase B's reductions, softmax and barriers for one column
// Fitted to the second kernel's measured steps at 256:100 on that H200 with four tiles (16x100,
// 32x52, 64x24, 64x28: 21.9, 19.3, 19.6 and 20.4 us a step against 7.9, 8.4, 10.6 and 9.8
// modelled; the per-phase probe put the gap in phase A and the barrier after it): a step's cost
// the terms above miss, and its gather's, per KiB of image bytes a block gathers a step
// (B x tile_d). With them the model ranks the measured tiles as measured (32x52 first) within
// 0.6 us.
// Provenance: NVIDIA H200 at 8f70bad, the sweep_tile and check_tile steps of
// tests/cuda/gpu_session.sh (the run docs/performance.md's persistent-step table cites).
constexpr double kStepFixedUs = 8.2, kGatherUsPerKiB = 0.58;
// The persistent step is predicted faster only by this margin: the model is a model.
constexpr double kMargin = 0.8;

struct Candidate {
  PersistentPlan p;
  double us = 0;
};

// A phase of `items` thread tiles of `instr` instructions a warp each, over the block's 256 threads.
double phase_us(long long items, double instr) {
  const long long per_thread = (items + kPersistentThreads - 1) / kPersistentThreads;
  const long long warps = std::min<long long>(8, (items + 31) / 32);
  return double(per_thread) * double((warps + 3) / 4) * instr / kClockPerUs;
}

template <class T>
double model_us(const PersistentPlan& p, int H, int B) {
  const double dbl = sizeof(T) == 8 ? 2.0 : 1.0;  // FP64 at half the FP32 rate, at best
  const int td4 = (p.tile_d + 3) / 4 * 4;
  const long long pairs_a = p.tile_h / 4 * ((B + 3) / 4), pairs_c = p.tile_h / 4 * (td4 / 4);
  const double fwd = p.tiles_per_block * phase_us(pairs_a, td4 / 4 * kLoopA + kLoopExtra) * dbl;
  const double upd = p.tiles_per_block * phase_us(pairs_c * p.jsplit, (B / p.jsplit + 3) / 4 * kLoopC + kLoopExtra) * dbl;
  const double zp_bytes = double(p.slices) * H * B * sizeof(T);
  const double a = kTripUs + fwd + zp_bytes / kBytesPerUs;
  const int cols = (B + p.blocks - 1) / p.blocks;
  const int rounds = (p.slices + 15) / 16 * ((H + kPersistentThreads - 1) / kPersistentThreads);
  const double b = cols * (rounds * kTripUs + kColumnUs) + zp_bytes / kBytesPerUs;
  const int passes = (B + p.dz_cols - 1) / p.dz_cols;
  const double c = passes * kTripUs + upd + kTripUs;  // the last trip: the tail's loads
  const double gather = kGatherUsPerKiB * double(B) * double(p.tile_d) / 1024.0;
  return a + b + c + 2 * kSyncUs + kStepFixedUs + gather;
}

double fused_model_us(int D, int H, int B) { return kFusedFixedUs + 4.0 * H * B * D / kFusedFlopPerUs; }

int copy_bytes_for(int D, int td) {
  for (int c : {16, 8, 4})
    if (D % c == 0 && td % c == 0) return c;
  return 0;
}

// Variant 3 gathers 16-byte windows where the image rows are 16-byte aligned (D a multiple of 16)
// and the windows' bigger byte buffers fit; elsewhere variant 2's copies.
template <class T>
void fill_v2(PersistentPlan& p, int D, int H, int B, int blocks, int td, int th, std::size_t smem_max,
             int variant = 2) {
  if (variant == 3 && D % 16 == 0) {
    fill_v2<T>(p, D, H, B, blocks, td, th, smem_max, 2);
    p.variant = 3, p.copy_bytes = 16;
    if (persist2::layout_of<T>(p, B).total <= smem_max) {
      p.smem = persist2::layout_of<T>(p, B).total;
      return;
    }
  }
  p.variant = variant;
  p.tile_d = td, p.tile_h = th;
  p.slices = (D + td - 1) / td;
  p.tiles = (H + th - 1) / th * p.slices;
  p.blocks = blocks;
  p.tiles_per_block = (p.tiles + blocks - 1) / blocks;
  const int pairs = th / 4 * (persist2::round4(td) / 4);
  p.jsplit = std::max(1, std::min(4, kPersistentThreads / std::max(1, pairs)));
  p.copy_bytes = copy_bytes_for(D, td);
  p.scratch = static_cast<std::size_t>(p.slices) * H * B;
  // dZ1 columns per pass: all of them where the shared memory allows.
  p.dz_cols = B;
  while (p.dz_cols > 4 &&
         persist2::layout<T>(td, th, B, p.tiles_per_block, p.dz_cols, p.jsplit).total > smem_max)
    p.dz_cols = (p.dz_cols + 1) / 2;
  p.smem = persist2::layout<T>(td, th, B, p.tiles_per_block, p.dz_cols, p.jsplit).total;
  p.predicted_us = model_us<T>(p, H, B);
  p.predicted_fused_us = fused_model_us(D, H, B);
}

bool v2_fits(const PersistentPlan& p, int H, std::size_t smem_max) {
  return H <= persist2::kMaxHPerThread * kPersistentThreads && p.tile_h % 4 == 0 &&
         p.tile_h / 4 * (persist2::round4(p.tile_d) / 4) <= kPersistentThreads && p.smem <= smem_max;
}

struct Device {
  int sms = 0, coop = 0;
  std::size_t smem_max = 0;
  bool ok = false;
};
Device query(int device) {
  Device d;
  int optin = 0;
  if (cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&d.coop, cudaDevAttrCooperativeLaunch, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return d;
  }
  d.smem_max = static_cast<std::size_t>(optin);
  d.ok = d.coop && d.sms > 0;
  return d;
}

template <class T>
PersistentPlan plan_v1(int D, int H, int B, const Device& dev, int blocks, int tile_d) {
  PersistentPlan p;
  if (!dev.ok || persist1::blocks_per_sm<T>() < 1) return p;
  p.variant = 1;
  p.tile_h = kPersistentTileH;
  p.blocks = blocks > 0 ? blocks : dev.sms;  // one block an SM: the grid barrier's cost grows with the blocks
  p.tile_d = tile_d > 0 ? tile_d : persist1::pick_tile_d(D, H, p.blocks);
  p.slices = (D + p.tile_d - 1) / p.tile_d;
  p.tiles = (H + kPersistentTileH - 1) / kPersistentTileH * p.slices;
  p.scratch = static_cast<std::size_t>(p.slices) * H * B;
  p.predicted_fused_us = fused_model_us(D, H, B);
  return p;
}

// The cheapest variant-2 cut by the model (ties: fewer slices), tile_h from {16, 32, 64, 128};
// variant 3 (the same cut: the model does not tell them apart) on request.
template <class T>
PersistentPlan plan_v2(int D, int H, int B, const Device& dev, int blocks, int tile_d, int tile_h, int variant = 2) {
  PersistentPlan best;
  if (!dev.ok) return best;
  const int nb = blocks > 0 ? blocks : dev.sms;
  double best_us = 0;
  for (int th : {16, 32, 64, 128}) {
    if (tile_h > 0 && th != tile_h) continue;
    if (tile_h <= 0 && th > std::max(16, persist2::round4(H))) continue;
    for (int td = 8; td <= 128; td += 4) {
      if (tile_d > 0 && td != tile_d) continue;
      PersistentPlan p;
      fill_v2<T>(p, D, H, B, nb, td, th, dev.smem_max, variant);
      if (!v2_fits(p, H, dev.smem_max) || p.scratch * sizeof(T) > kPersistentMaxScratch) continue;
      const bool better = best.blocks == 0 || p.predicted_us < best_us - 1e-9 ||
                          (p.predicted_us < best_us + 1e-9 && p.slices < best.slices);
      if (better) best = p, best_us = p.predicted_us;
    }
  }
  if (best.blocks > 0 && persist2::blocks_per_sm<T>(best.smem, best.variant) < 1) best.blocks = 0;
  return best;
}

// NN_PERSISTENT_TILE=32x52: variant 2's tile (rows x inputs), for timing one cut against another.
void forced_tile(int* th, int* td) {
  *th = *td = 0;
  const char* v = std::getenv("NN_PERSISTENT_TILE");
  if (v && *v && std::sscanf(v, "%dx%d", th, td) != 2) *th = *td = 0;
}

int forced_variant() {
  const char* v = std::getenv("NN_PERSISTENT_VARIANT");
  if (!v || !*v) return 0;
  if (std::strcmp(v, "4") == 0) return 4;
  return std::strcmp(v, "1") == 0 ? 1 : std::strcmp(v, "2") == 0 ? 2 : std::strcmp(v, "3") == 0 ? 3 : 0;
}

}  // namespace

template <class T>
PersistentPlan persistent_plan(int D, int H, int B, int device) {
  if (D < 1 || H < 1 || B < 1) return {};
  const Device dev = query(device);
  const int forced = forced_variant();
  if (forced == 4) {  // clusters (persistent_plan4.cu): only on request, with why where it cannot run
    std::string why;
    PersistentPlan p4 = persistent_plan_v4<T>(D, H, B, 0, 0, device, &why);
    p4.why = why;
    return p4;
  }
  if (forced != 1) {
    int th = 0, td = 0;
    forced_tile(&th, &td);
    const PersistentPlan p2 = plan_v2<T>(D, H, B, dev, 0, td, th, forced == 3 ? 3 : 2);
    if (p2.blocks > 0 || forced >= 2) return p2;
  }
  return plan_v1<T>(D, H, B, dev, 0, 0);
}

template <class T>
PersistentPlan persistent_plan_with(int D, int H, int B, int variant, int blocks, int tile_d, int tile_h, int device) {
  if (D < 1 || H < 1 || B < 1 || blocks < 1 || tile_d < 0 || (tile_d == 0 && variant == 1)) return {};
  const Device dev = query(device);
  if (variant == 1) return plan_v1<T>(D, H, B, dev, blocks, tile_d);
  if (tile_d % 4 != 0) return {};
  return plan_v2<T>(D, H, B, dev, blocks, tile_d, tile_h, variant == 3 ? 3 : 2);
}

bool persistent_predicted_faster(const PersistentPlan& plan) {
  return (plan.variant == 2 || plan.variant == 3) && plan.blocks > 0 && plan.predicted_us > 0 &&
         plan.predicted_us < kMargin * plan.predicted_fused_us;
}

#define NN_PLAN_INSTANTIATE(T)                                                   \
  template PersistentPlan persistent_plan<T>(int, int, int, int);                \
  template PersistentPlan persistent_plan_with<T>(int, int, int, int, int, int, int, int);
NN_PLAN_INSTANTIATE(float)
NN_PLAN_INSTANTIATE(double)
#undef NN_PLAN_INSTANTIATE

}  // namespace nn
