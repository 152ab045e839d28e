// GEMM variant 5 on Hopper's warpgroup MMA (wgmma, sm_90a: H100, H200): the same three-product
// TF32 compensation as 5_tf32x3.cu, whose mma.sync tops out near 80 TFLOP/s on an H200 (the
// CUDA cores' FP32 rate that its splitting needs, bench/tc_peak.cu). wgmma reads both operands
// straight from shared memory, so each element is split once per block, when it is stored,
// instead of once per warp that reads it.
//  - Block tile 128 x 128, BK = 32, 256 threads: two warpgroups of 64 rows each, every k-step
//    one wgmma.m64n128k8 per product (gemm/wgmma_tf32.h).
//  - Shared memory per stage: four operand tiles, A big, A small, B big, B small, each 128 rows
//    (m of A, n of B) of BK k in wgmma's K-major no-swizzle layout (core matrices of 8 rows x 4
//    floats, 16 bytes a row): element (row, k) at core_off(row, k). The strides between core
//    matrices are chosen for the stores: 36 floats along k and 292 between 8-row groups (both
//    4 mod 32) make the 16-byte stores of k-contiguous operands and the scalar stores of
//    m/n-contiguous ones free of bank conflicts with the lane mappings of Slab::where.
//  - Pipeline: tile t's wgmmas run while the block splits and stores tile t+1 (already in
//    registers) into the other buffer and issues tile t+2's global loads; then the warpgroup
//    waits, adds the tile's sum (from zero on the tensor cores) to the FP32 running sum, and
//    one barrier ends the tile. Partial sums every 32 k (every 16 in 5_tf32x3.cu, so the bits
//    differ from the mma.sync kernel's).
//  - Split-K and the epilogues: as 5_tf32x3.cu (5_tf32x3_device.h).
// gemm(5, ...) runs it only with NN_TF32_WGMMA=1 in the environment (5_tf32x3_plan.cu's
// plan_tile); gemm_tuning::gemm_tf32_with(kTf32Wgmma, ...) and gemm_bench --tf32 run it where
// tf32_wgmma_available(). Its speed: kernels/gemm/README.md. Tested by
// tests/kernels/test_gemm_wgmma.cu.
#include "gemm/gemm.h"

#include <cstdint>

#include "common/check.h"
#include "common/nvtx.h"
#include "common/vector_access.h"
#include "gemm/5_tf32x3.h"
#include "gemm/5_tf32x3_device.h"
#include "gemm/mma_tf32.h"
#include "gemm/wgmma_tf32.h"

namespace nn::gemm_detail {

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 32, kThreads = 256;
constexpr int kLbo = 36;                      // floats from one core matrix to the next along k
constexpr int kSbo = (kBK / 4) * kLbo + 4;    // floats from one 8-row group to the next
constexpr int kTile = 128 / 8 * kSbo;         // floats of one 128-row operand tile
constexpr int kStage = 4 * kTile;             // A big, A small, B big, B small
constexpr int kSmemBytes = 2 * kStage * int(sizeof(float));
static_assert(kLbo % 4 == 0 && kSbo % 4 == 0, "descriptor strides are multiples of 16 bytes");
static_assert(kLbo % 32 == 4 && kSbo % 32 == 4, "the bank-conflict-free store mappings");
static_assert(kBM == 128 && kBN == 128, "two warpgroups of m64n128");

__device__ __forceinline__ int core_off(int row, int k) {
  return (row / 8) * kSbo + (k / 4) * kLbo + (row % 8) * 4 + (k % 4);
}

// One operand's 128 x BK slab (rows: m of A or n of B), staged in registers between its global
// loads and its split stores. kKAlongC: k is the dimension contiguous in global memory.
template <bool kKAlongC>
struct Slab {
  static constexpr int kChunks = 128 * kBK / (4 * kThreads);
  static_assert(kChunks * 4 * kThreads == 128 * kBK, "slab must split evenly");
  float reg[kChunks * 4];

  // Chunk q of thread tid: four elements from (row, k), along k if kKAlongC, else along rows.
  // Along k: 8 lanes per row (32 bytes of it), 4 rows a warp. Along rows: lanes 4i..4i+3 take
  // rows 4i..4i+3 at 4 consecutive k, so every k reads 128 contiguous bytes.
  __device__ __forceinline__ static void where(int q, int tid, int& row, int& k) {
    const int idx = tid + q * kThreads;
    if constexpr (kKAlongC) {
      k = (idx % (kBK / 4)) * 4;
      row = idx / (kBK / 4);
    } else {
      const int rest = idx / 32;
      row = (rest % 4) * 32 + (idx / 4) % 8 * 4;
      k = (rest / 4) * 4 + idx % 4;
    }
  }

  __device__ __forceinline__ void load(const float* X, int ld, int row0, int row_end, int k0, int k_end, bool vec,
                                       int tid) {
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      int row, k;
      where(q, tid, row, k);
      if constexpr (kKAlongC)
        tf32x3::load4(reg + 4 * q, X, ld, k0 + k, k_end, row0 + row, row_end, vec);
      else
        tf32x3::load4(reg + 4 * q, X, ld, row0 + row, row_end, k0 + k, k_end, vec);
    }
  }

  // Splits each element (big = tf32(x), small = tf32(x - big)) into the two tiles.
  __device__ __forceinline__ void store(float* big, float* small, int tid) const {
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      int row, k;
      where(q, tid, row, k);
      float b[4], s[4];
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        b[v] = tf32_rn(reg[4 * q + v]);
        s[v] = tf32_rn(reg[4 * q + v] - b[v]);
      }
      if constexpr (kKAlongC) {
        store_vector(reinterpret_cast<float4*>(big + core_off(row, k)), make_float4(b[0], b[1], b[2], b[3]));
        store_vector(reinterpret_cast<float4*>(small + core_off(row, k)), make_float4(s[0], s[1], s[2], s[3]));
      } else {
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          big[core_off(row + v, k)] = b[v];
          small[core_off(row + v, k)] = s[v];
        }
      }
    }
  }
};

// D = epilogue(alpha * op(A) op(B) + beta * C), one 128 x 128 tile per block; the arguments
// are 5_tf32x3.cu's.
// The kernel is longer than 60 lines because the wgmma fences, the asynchronous products, their
// wait and the next tile's split and store must stay in one place: their order is the hazard
// the emulator checks.
template <Op OA, Op OB, int kProducts>
__global__ void __launch_bounds__(kThreads, 1)
gemm_tf32x3_wgmma_kernel(int M, int N, int K, int k_split, float alpha, const float* A, int lda, const float* B,
                         int ldb, float beta, const float* C, int ldc, float* D, int ldd, Epilogue ep,
                         const float* bias, int vec, float* ws, unsigned* counters, float step_lr) {
  static_assert(kProducts == 1 || kProducts == 3, "plain TF32 or the three-product compensation");
  extern __shared__ float4 smem4[];  // 2 stages of kStage floats (kSmemBytes)
  float* smem = reinterpret_cast<float*>(smem4);
  __shared__ int is_last;

  const int tid = threadIdx.x, wg = tid / 128;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int k_begin = blockIdx.z * k_split;
  const int k_end = min(K, k_begin + k_split);
  const bool vecA = vec & 1, vecB = vec & 2;

  Slab<OA == Op::T> la;
  Slab<OB == Op::N> lb;
  const auto load = [&](int k0) {
    la.load(A, lda, m0, M, k0, k_end, vecA, tid);
    lb.load(B, ldb, n0, N, k0, k_end, vecB, tid);
  };
  // The stores reach the tensor cores through the async proxy: each thread fences its own.
  const auto store = [&](int buf) {
    float* st = smem + buf * kStage;
    la.store(st, st + kTile, tid);
    lb.store(st + 2 * kTile, st + 3 * kTile, tid);
    fence_proxy_async();
  };

  const int ntiles = (k_end - k_begin + kBK - 1) / kBK;
  load(k_begin);
  store(0);
  if (ntiles > 1) load(k_begin + kBK);
  __syncthreads();

  float acc[64], part[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  constexpr unsigned kLboBytes = kLbo * 4, kSboBytes = kSbo * 4;
  for (int t = 0; t < ntiles; ++t) {
    const float* st = smem + (t & 1) * kStage;
    // The tile's products from zero into part (per k-step the two small corrections first):
    // this warpgroup's 64 rows of A, all 128 rows (n) of B.
    wgmma_pin(part);  // the previous tile's reads of part stay before this tile's mmas
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kBK / 8; ++s) {
      const int a_off = wg * 8 * kSbo + 2 * s * kLbo, b_off = 2 * s * kLbo;
      const std::uint64_t a_big = smem_desc(st + a_off, kLboBytes, kSboBytes);
      const std::uint64_t b_big = smem_desc(st + 2 * kTile + b_off, kLboBytes, kSboBytes);
      if constexpr (kProducts == 3) {
        const std::uint64_t a_small = smem_desc(st + kTile + a_off, kLboBytes, kSboBytes);
        const std::uint64_t b_small = smem_desc(st + 3 * kTile + b_off, kLboBytes, kSboBytes);
        wgmma_m64n128k8_tf32(part, a_small, b_big, s != 0);
        wgmma_m64n128k8_tf32(part, a_big, b_small, true);
        wgmma_m64n128k8_tf32(part, a_big, b_big, true);
      } else {
        wgmma_m64n128k8_tf32(part, a_big, b_big, s != 0);
      }
    }
    wgmma_commit();
    // Meanwhile: tile t+1 (in registers) into the other buffer, whose last readers (tile t-1's
    // wgmmas, both warpgroups) finished before the barrier that ended tile t-1; tile t+2's loads.
    if (t + 1 < ntiles) {
      store((t + 1) & 1);
      if (t + 2 < ntiles) load(k_begin + (t + 2) * kBK);
    }
    wgmma_wait<0>();
    wgmma_pin(part);  // and this tile's reads after the wait
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] += part[i];
    __syncthreads();
  }

  if (gridDim.z > 1 && !tf32x3::splitk_last<64, kThreads>(acc, ws, counters, tid, is_last)) return;

  // Epilogue from the accumulator fragment (gemm/wgmma_tf32.h): warp w of the warpgroup holds
  // rows 16w + g and 16w + g + 8, columns 8j + 2t and 8j + 2t + 1.
  const int w = (tid / 32) % 4, g = (tid % 32) / 4, t4 = tid % 4;
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      tf32x3::epilogue_store(acc[4 * j + e], m0 + wg * 64 + 16 * w + g + (e >> 1) * 8, n0 + 8 * j + 2 * t4 + (e & 1),
                             M, N, alpha, beta, C, ldc, D, ldd, ep, bias, step_lr);
}

template <int kProducts>
void launch_wgmma(const GemmArgs<float>& a, cudaStream_t s, int splits) {
  int vec = 0;
  if (aligned16(a.A) && a.lda % 4 == 0) vec |= 1;
  if (aligned16(a.B) && a.ldb % 4 == 0) vec |= 2;
  with_ops(a.opA, a.opB, [&]<Op OA, Op OB>() {
    const auto kernel = gemm_tf32x3_wgmma_kernel<OA, OB, kProducts>;
    static const bool opted_in = [&] {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
      return true;
    }();
    (void)opted_in;
    dim3 grid((a.M + kBM - 1) / kBM, (a.N + kBN - 1) / kBN, 1);
    if (splits <= 0) splits = tf32x3::plan_splits_waves(long(grid.x) * grid.y, a.K, kBK);
    // Slices of a whole number of k-tiles.
    const tf32x3::Slices sl =
        tf32x3::slice_k(a.K, splits, kBK, std::size_t(grid.x) * grid.y, std::size_t(kBM) * kBN, s);
    grid.z = sl.z;
    kernel<<<grid, kThreads, kSmemBytes, s>>>(a.M, a.N, a.K, sl.k_split, a.alpha, a.A, a.lda, a.B, a.ldb, a.beta,
                                              a.C, a.ldc, a.D, a.ldd, a.epilogue, a.bias, vec, sl.ws, sl.counters,
                                              a.step_lr);
    CHECK_LAUNCH("gemm_tf32x3_wgmma_kernel");
  });
}

}  // namespace

void tf32_wgmma_run(const GemmArgs<float>& a, cudaStream_t s, int products, int splits) {
  NN_RANGE("gemm_tf32x3_wgmma");
  if (products == 1) launch_wgmma<1>(a, s, splits);
  else launch_wgmma<3>(a, s, splits);
}

}  // namespace nn::gemm_detail

namespace nn::gemm_tuning {
// Compute capability 9.0 exactly: sm_90a code runs on nothing else (the emulator reports 9.0).
bool tf32_wgmma_available() {
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major == 9 && minor == 0;
}
}  // namespace nn::gemm_tuning
