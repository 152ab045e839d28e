// WMMA (tensor cores), TF32 m16n16k8: wmma::__float_to_tf32 bit for bit, mma_sync with every
// layout of A, B and C against a double product of the TF32 inputs, truncation of unconverted
// inputs, a 32x32x16 product by four warps through shared memory. Valid CUDA (simcc and nvcc,
// sm_80 or newer); the emulator's documented summation order is under #ifdef SIM_EMULATOR, its
// faults are in test_sim_wmma_faults.cu. Runs in nn_tests or alone (link -lgtest_main, with
// test_sim_wmma_faults.cu).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "gemm/mma_tf32.h"
#include "sim_wmma_util.h"

namespace {

using simtest::DeviceBuffer;

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// cvt.rna.tf32.f32 written out: to nearest, ties away from zero, the low 13 bits cleared; Inf and
// NaN truncated (an H200 turns the NaN 0x7f800001 into +Inf: docs/performance.md, GEMMs).
std::uint32_t ref_tf32_bits(std::uint32_t u) {
  if ((u & 0x7f800000u) == 0x7f800000u) return u & 0xffffe000u;
  return (u + 0x1000u) & 0xffffe000u;
}
float ref_tf32(float x) { return from_bits(ref_tf32_bits(simtest::bits_of(x))); }

// ---- wmma::__float_to_tf32 ------------------------------------------------------------------------

__global__ void to_tf32_kernel(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = wmma::__float_to_tf32(in[i]);
}

struct Tf32Case {
  std::uint32_t in, out;
};
const Tf32Case kTf32Cases[] = {
    {0x3f800000u, 0x3f800000u},  // 1.0 exact
    {0x3f800fffu, 0x3f800000u},  // just under half an ulp: down
    {0x3f801000u, 0x3f802000u},  // a tie: away from zero (to even would go down)
    {0x3f801001u, 0x3f802000u},  // just over half: up
    {0x3f803000u, 0x3f804000u},  // a tie from an odd TF32 value: up
    {0x3f801fffu, 0x3f802000u},
    {0xbf800fffu, 0xbf800000u},  // negative: the magnitude rounds, the sign stays
    {0xbf801000u, 0xbf802000u},  // negative tie: away from zero
    {0xbf801001u, 0xbf802000u},
    {0x3fffffffu, 0x40000000u},  // carry into the next binade
    {0x7f7fffffu, 0x7f800000u},  // FLT_MAX rounds to +inf
    {0xff7fffffu, 0xff800000u},  // -FLT_MAX to -inf
    {0x7f7fefffu, 0x7f7fe000u},  // just below: stays finite
    {0x00000000u, 0x00000000u},  // +0
    {0x80000000u, 0x80000000u},  // -0
    {0x00000fffu, 0x00000000u},  // denormals round like the rest
    {0x00001000u, 0x00002000u},
    {0x80001000u, 0x80002000u},
    {0x007ff000u, 0x00800000u},  // the largest denormal's tie: to the smallest normal
    {0x7f800000u, 0x7f800000u},  // +inf
    {0xff800000u, 0xff800000u},  // -inf
};

TEST_F(SimWmma, FloatToTf32BitPatterns) {
  std::vector<float> in;
  for (const auto& c : kTf32Cases) in.push_back(from_bits(c.in));
  const std::size_t ncases = in.size();
  in.push_back(from_bits(0x7fc00000u));  // quiet NaN
  in.push_back(from_bits(0xffc00001u));  // negative NaN with a payload in the low bits
  in.push_back(from_bits(0x7f800001u));  // signalling NaN whose payload is all in the low 13 bits
  const std::size_t nnan = in.size();
  // Random bit patterns (every exponent, NaNs and infinities included) and random low bits.
  const auto r = simtest::random_ints(4096, 39, 0, 0x7fffffff);
  for (std::size_t i = 0; i < r.size(); ++i)
    in.push_back(from_bits(static_cast<std::uint32_t>(r[i]) ^ (i & 1 ? 0x80000000u : 0u)));
  for (int k = 0; k < 0x2000; k += 7) in.push_back(from_bits(0x3f800000u | static_cast<std::uint32_t>(k)));
  const int n = static_cast<int>(in.size());

  DeviceBuffer<float> din(in), dout(in.size());
  ASSERT_CUDA_OK(din.status());
  to_tf32_kernel<<<(n + 127) / 128, 128>>>(din.get(), dout.get(), n);
  ASSERT_LAUNCH_OK();
  const auto out = dout.download();
  for (std::size_t i = 0; i < ncases; ++i)
    EXPECT_EQ(simtest::bits_of(out[i]), kTf32Cases[i].out)
        << std::hex << "input 0x" << kTf32Cases[i].in << ": got 0x" << simtest::bits_of(out[i]);
  for (std::size_t i = ncases; i < nnan; ++i)
    EXPECT_EQ(simtest::bits_of(out[i]), ref_tf32_bits(simtest::bits_of(in[i])))
        << std::hex << "NaN input 0x" << simtest::bits_of(in[i]) << ": got 0x" << simtest::bits_of(out[i]);
  std::size_t bad = 0;
  for (std::size_t i = nnan; i < in.size(); ++i) {
    const std::uint32_t u = simtest::bits_of(in[i]), got = simtest::bits_of(out[i]);
    if (got != ref_tf32_bits(u) && ++bad <= 5)
      ADD_FAILURE() << std::hex << "input 0x" << u << ": got 0x" << got << ", expected 0x" << ref_tf32_bits(u);
  }
  EXPECT_EQ(bad, 0u) << "of " << in.size() - nnan << " random inputs";
}

// ---- one 16x16x8 tile, every layout ------------------------------------------------------------------

// Leading dimensions wider than the tiles (multiples of 4 floats), so that an element taken from
// the wrong row or column shows: 12 for 8-element rows or columns, 20 for 16-element ones.
constexpr unsigned kLd8 = 12, kLd16 = 20, kLdC = 20;

template <class LA, class LB>
__global__ void tile_kernel(const float* a, unsigned lda, const float* b, unsigned ldb, const float* c,
                            float* d, wmma::layout_t c_layout, wmma::layout_t d_layout) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LA> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LB> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::load_matrix_sync(fa, a, lda);
  wmma::load_matrix_sync(fb, b, ldb);
  wmma::load_matrix_sync(acc, c, kLdC, c_layout);
  wmma::mma_sync(acc, fa, fb, acc);  // d aliases c
  wmma::store_matrix_sync(d, acc, kLdC, d_layout);
}

// Element (r, c) of a matrix stored with leading dimension ld.
std::size_t at(bool col_major, int r, int c, unsigned ld) {
  return col_major ? static_cast<std::size_t>(c) * ld + r : static_cast<std::size_t>(r) * ld + c;
}

struct TileData {
  float A[16][8], B[8][16], C[16][16];
};

TileData tile_data(unsigned seed, bool round_inputs) {
  TileData t;
  const auto a = simtest::random_floats(16 * 8, seed), b = simtest::random_floats(8 * 16, seed + 1),
             c = simtest::random_floats(16 * 16, seed + 2);
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 8; ++k) t.A[i][k] = round_inputs ? ref_tf32(a[i * 8 + k]) : a[i * 8 + k];
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 16; ++j) t.B[k][j] = round_inputs ? ref_tf32(b[k * 16 + j]) : b[k * 16 + j];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) t.C[i][j] = c[i * 16 + j];
  return t;
}

template <class LA, class LB>
void check_tile(bool c_col, bool d_col, const std::string& sched) {
  constexpr bool a_col = std::is_same_v<LA, wmma::col_major>, b_col = std::is_same_v<LB, wmma::col_major>;
  const std::string what = std::string("A ") + (a_col ? "col" : "row") + ", B " + (b_col ? "col" : "row") +
                           ", C " + (c_col ? "col" : "row") + ", D " + (d_col ? "col" : "row") + ", " + sched;
  const TileData t = tile_data(100 + 8 * a_col + 4 * b_col + 2 * c_col + d_col, true);
  // A is 16x8: rows of 8 (row major) or columns of 16; B is 8x16.
  const unsigned lda = a_col ? kLd16 : kLd8, ldb = b_col ? kLd8 : kLd16;
  DeviceBuffer<float> da((a_col ? 8 : 16) * lda), db((b_col ? 16 : 8) * ldb), dc(16 * kLdC), dd(16 * kLdC);
  std::vector<float> ha(da.size(), 0.0f), hb(db.size(), 0.0f), hc(dc.size(), 0.0f);
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 8; ++k) ha[at(a_col, i, k, lda)] = t.A[i][k];
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 16; ++j) hb[at(b_col, k, j, ldb)] = t.B[k][j];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) hc[at(c_col, i, j, kLdC)] = t.C[i][j];
  ASSERT_CUDA_OK(da.upload(ha));
  ASSERT_CUDA_OK(db.upload(hb));
  ASSERT_CUDA_OK(dc.upload(hc));
  ASSERT_CUDA_OK(dd.fill_bytes(0xFF));
  tile_kernel<LA, LB><<<1, 32>>>(da.get(), lda, db.get(), ldb, dc.get(), dd.get(),
                                 c_col ? wmma::mem_col_major : wmma::mem_row_major,
                                 d_col ? wmma::mem_col_major : wmma::mem_row_major);
  ASSERT_CUDA_OK(cudaGetLastError()) << what;
  ASSERT_CUDA_OK(cudaDeviceSynchronize()) << what;
  const auto hd = dd.download();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double exact = t.C[i][j], mag = std::fabs(t.C[i][j]);
      for (int k = 0; k < 8; ++k) {
        exact += static_cast<double>(t.A[i][k]) * t.B[k][j];
        mag += std::fabs(static_cast<double>(t.A[i][k]) * t.B[k][j]);
      }
      const float got = hd[at(d_col, i, j, kLdC)];
      // Nine FP32 terms summed in some order: 8 roundings of at most mag * 2^-24 each (RN), with
      // room for a tensor core that truncates or keeps fewer bits inside (2^-19: 32 such).
      ASSERT_LE(std::fabs(got - exact), 0x1p-19 * mag) << "D(" << i << "," << j << ") " << what;
#ifdef SIM_EMULATOR
      // The emulator's documented order: C, then fmaf over k = 0..7.
      float seq = t.C[i][j];
      for (int k = 0; k < 8; ++k) seq = std::fmaf(t.A[i][k], t.B[k][j], seq);
      ASSERT_EQ(simtest::bits_of(got), simtest::bits_of(seq)) << "D(" << i << "," << j << ") " << what;
#endif
    }
  // The padding of D stayed as it was.
  for (std::size_t e = 0; e < hd.size(); ++e)
    if (e % kLdC >= 16) {
      ASSERT_EQ(simtest::bits_of(hd[e]), 0xFFFFFFFFu) << "padding " << e << " " << what;
    }
}

template <class LA, class LB>
void check_tile_layouts(const std::string& sched) {
  for (int c_col = 0; c_col < 2; ++c_col)
    for (int d_col = 0; d_col < 2; ++d_col) {
      check_tile<LA, LB>(c_col, d_col, sched);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST_F(SimWmma, TileEveryLayoutMatchesDoubleProduct) {
  simtest::for_each_schedule([&](const std::string& sched) {
    check_tile_layouts<wmma::row_major, wmma::row_major>(sched);
    if (HasFatalFailure()) return;
    check_tile_layouts<wmma::row_major, wmma::col_major>(sched);
    if (HasFatalFailure()) return;
    check_tile_layouts<wmma::col_major, wmma::row_major>(sched);
    if (HasFatalFailure()) return;
    check_tile_layouts<wmma::col_major, wmma::col_major>(sched);
  });
}

// ---- unconverted inputs: the tensor core reads only their TF32 bits ------------------------------------

// A = a_val everywhere, B = b_val everywhere, C = 0; with convert, every fragment element goes
// through __float_to_tf32 first (an elementwise fragment operation).
__global__ void const_tile_kernel(const float* a, const float* b, float* d, int convert) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::load_matrix_sync(fa, a, 8);
  wmma::load_matrix_sync(fb, b, 16);
  if (convert) {
    for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
  }
  wmma::fill_fragment(acc, 0.0f);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

float const_tile(float a_val, float b_val, bool convert) {
  DeviceBuffer<float> da(std::vector<float>(16 * 8, a_val)), db(std::vector<float>(8 * 16, b_val)),
      dd(16 * 16);
  const_tile_kernel<<<1, 32>>>(da.get(), db.get(), dd.get(), convert ? 1 : 0);
  if (cudaDeviceSynchronize() != cudaSuccess) return -1.0f;
  const auto h = dd.download();
  for (float v : h)
    if (simtest::bits_of(v) != simtest::bits_of(h[0])) return -2.0f;  // all 256 must agree
  return h[0];
}

TEST_F(SimWmma, UnconvertedInputsAreTruncated) {
  const float up = from_bits(0x3f801fffu);  // rounds to 1 + 2^-10, truncates to 1
  EXPECT_EQ(const_tile(up, 1.0f, false), 8.0f) << "A unconverted";
  EXPECT_EQ(const_tile(1.0f, up, false), 8.0f) << "B unconverted";
  EXPECT_EQ(const_tile(-up, up, false), -8.0f) << "both unconverted, one negative";
  EXPECT_EQ(const_tile(up, 1.0f, true), 8.0f + 8 * 0x1p-10f) << "A converted in the fragment";
  EXPECT_EQ(const_tile(up, up, true), 8.0f * (1 + 0x1p-10f) * (1 + 0x1p-10f)) << "both converted";
  ASSERT_CUDA_OK(cudaGetLastError());
}

// num_elements per lane, read in device code: CUDA's 4, 4, 4, 4 and 8.
__global__ void sizes_kernel(int* out) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a_row;
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> a_col;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b_row;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> b_col;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  if (threadIdx.x == 0) {
    out[0] = a_row.num_elements;
    out[1] = a_col.num_elements;
    out[2] = b_row.num_elements;
    out[3] = b_col.num_elements;
    out[4] = acc.num_elements;
  }
}

TEST_F(SimWmma, FragmentSizesAreCudas) {
  DeviceBuffer<int> out(5);
  sizes_kernel<<<1, 32>>>(out.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download(), (std::vector<int>{4, 4, 4, 4, 8}));
}

// ---- 32x32x16 by four warps through shared memory ---------------------------------------------------

constexpr int kBigM = 32, kBigN = 32, kBigK = 16;

// A (32x16) and B (16x32) row major in global memory; the block stages them in shared memory,
// warp w computes C's 16x16 tile (w / 2, w % 2) in two k steps, B read column major from a
// transposed copy.
__global__ void four_warps_kernel(const float* a, const float* b, float* c) {
  __shared__ __align__(32) float As[kBigM * kBigK];
  __shared__ __align__(32) float Bt[kBigN * kBigK];  // B transposed: Bt[n * K + k]
  const int t = threadIdx.x, warp = t / 32;
  for (int i = t; i < kBigM * kBigK; i += blockDim.x) As[i] = a[i];
  for (int i = t; i < kBigK * kBigN; i += blockDim.x) Bt[(i % kBigN) * kBigK + i / kBigN] = b[i];
  __syncthreads();
  const int tm = warp / 2, tn = warp % 2;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k0 = 0; k0 < kBigK; k0 += 8) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::load_matrix_sync(fa, As + tm * 16 * kBigK + k0, kBigK);
    wmma::load_matrix_sync(fb, Bt + tn * 16 * kBigK + k0, kBigK);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(c + tm * 16 * kBigN + tn * 16, acc, kBigN, wmma::mem_row_major);
}

TEST_F(SimWmma, FourWarps32x32x16ThroughSharedMemory) {
  auto a = simtest::random_floats(kBigM * kBigK, 7), b = simtest::random_floats(kBigK * kBigN, 8);
  for (auto& x : a) x = ref_tf32(x);
  for (auto& x : b) x = ref_tf32(x);
  DeviceBuffer<float> da(a), db(b), dc(kBigM * kBigN);
  simtest::for_each_schedule([&](const std::string& sched) {
    ASSERT_CUDA_OK(dc.fill_bytes(0xFF));
    four_warps_kernel<<<1, 128>>>(da.get(), db.get(), dc.get());
    ASSERT_LAUNCH_OK();
    const auto c = dc.download();
    for (int i = 0; i < kBigM; ++i)
      for (int j = 0; j < kBigN; ++j) {
        double exact = 0, mag = 0;
        for (int k = 0; k < kBigK; ++k) {
          exact += static_cast<double>(a[i * kBigK + k]) * b[k * kBigN + j];
          mag += std::fabs(static_cast<double>(a[i * kBigK + k]) * b[k * kBigN + j]);
        }
        ASSERT_LE(std::fabs(c[i * kBigN + j] - exact), 0x1p-18 * mag)
            << "C(" << i << "," << j << ") " << sched;
      }
  });
}

}  // namespace
