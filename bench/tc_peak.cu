// tc_peak: the physical limits GEMM variant 5 (kernels/gemm/5_tf32x3.cu, WMMA m16n16k8 TF32)
// runs against, measured on the GPU that runs it:
//  - wmma_tf32_fF: WMMA m16n16k8 TF32 mma_sync throughput. Every warp loads one A (16x8) and
//    one B (8x16) fragment from shared memory once, keeps F independent accumulators (F = 1,
//    2, 4, 8) and does `iters` rounds of one mma_sync per accumulator, then stores them. F = 1
//    is one dependent chain per warp (latency-bound when few warps share an SM), F = 8 the
//    issue/throughput bound. 2*16*16*8 = 4096 FLOP per mma_sync per warp.
//  - fma_fp32_x8: FP32 FMA on the CUDA cores, 8 independent fmaf chains per thread, 2 FLOP
//    per FMA: the CUDA-core FP32 limit.
// Each kernel runs at a small fixed set of launch shapes (threads per block, blocks per SM):
// GPU: one warm-up launch, then the median of 5 launches timed with cudaEvents. Emulator
// build (SIM_EMULATOR): one launch, CPU wall time of the SIMT emulator, NOT GPU performance.
// Every kernel's stored results are then checked on the host against exact expected values
// (small integer inputs, so every partial sum is exact in FP32 whatever the tensor core's
// rounding); a mismatch makes the exit status 1. Bad arguments: one line, exit status 2.
// See bench/README.md ("Tensor-core and FP32 peak").
#include <mma.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include "common/check.h"

namespace {

namespace wmma = nvcuda::wmma;

#ifdef SIM_EMULATOR
constexpr bool kEmulator = true;
#else
constexpr bool kEmulator = false;
#endif

constexpr int kMaxThreads = 256;
constexpr int kFmaChains = 8;   // independent accumulators per thread
constexpr int kFmaRounds = 8;   // rounds of the 8 chains per loop iteration: 64 FMAs
constexpr int kMaxIters = 1 << 20;  // keeps every expected value an integer below 2^24 (exact)

// A (16x8, row major) and B (8x16, row major) with entries in {-1, 0, 1}: exactly TF32, every
// product of A*B an integer of magnitude <= 8, so acc = f + iters * (A*B) stays exact in FP32
// up to kMaxIters whatever order or rounding the tensor core accumulates with.
float a_value(int i, int k) { return float((i + 2 * k) % 3 - 1); }
float b_value(int k, int j) { return float((2 * j + k + 1) % 3 - 1); }

// F accumulators per warp; out gets, per global warp w, F row-major 16x16 tiles at
// out + (w * F + f) * 256.
template <int F>
__global__ void __launch_bounds__(kMaxThreads) wmma_tf32_kernel(const float* __restrict__ a_src,
                                                                const float* __restrict__ b_src,
                                                                float* __restrict__ out, int iters) {
  __shared__ __align__(32) float As[16 * 8];
  __shared__ __align__(32) float Bs[8 * 16];
  for (int i = threadIdx.x; i < 16 * 8; i += blockDim.x) {
    As[i] = a_src[i];
    Bs[i] = b_src[i];
  }
  __syncthreads();

  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
  wmma::load_matrix_sync(fa, As, 8);
  wmma::load_matrix_sync(fb, Bs, 16);
  for (int e = 0; e < fa.num_elements; ++e) fa.x[e] = wmma::__float_to_tf32(fa.x[e]);
  for (int e = 0; e < fb.num_elements; ++e) fb.x[e] = wmma::__float_to_tf32(fb.x[e]);

  // Different starting values, so no two accumulators are the same computation.
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[F];
#pragma unroll
  for (int f = 0; f < F; ++f) wmma::fill_fragment(acc[f], float(f));

#pragma unroll 4
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int f = 0; f < F; ++f) wmma::mma_sync(acc[f], fa, fb, acc[f]);
  }

  const std::size_t warp = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
#pragma unroll
  for (int f = 0; f < F; ++f)
    wmma::store_matrix_sync(out + (warp * F + f) * 256, acc[f], 16, wmma::mem_row_major);
}

// kFmaChains independent chains acc = fmaf(acc, a, b) per thread, kFmaRounds rounds per
// iteration; a and b are arguments (1 and 0.5 here), so nothing is known at compile time.
__global__ void __launch_bounds__(kMaxThreads) fma_fp32_kernel(float* __restrict__ out, float a,
                                                               float b, int iters) {
  float acc[kFmaChains];
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) acc[j] = float(j);
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int r = 0; r < kFmaRounds; ++r) {
#pragma unroll
      for (int j = 0; j < kFmaChains; ++j) acc[j] = fmaf(acc[j], a, b);
    }
  }
  const std::size_t t = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) out[t * kFmaChains + j] = acc[j];
}

struct Options {
  bool quick = false;
  int iters = 0;  // 0: 1 << 16 on a GPU, 256 in the emulator (--quick: 16)
  std::string csv;
  std::FILE* csv_file = nullptr;  // opened by parse: an unwritable FILE is a bad argument
};

void usage(const char* argv0) {
  std::printf(
      "usage: %s [--iters N] [--quick] [--csv FILE]\n"
      "  WMMA m16n16k8 TF32 mma_sync throughput with F = 1, 2, 4, 8 independent accumulators\n"
      "  per warp, and FP32 FMA throughput on the CUDA cores (8 chains per thread), in TFLOP/s.\n"
      "  --iters N   loop iterations per kernel, 1..%d (default 65536, 256 in the emulator;\n"
      "              --quick: 16)\n"
      "  --quick     a tiny run (16 iterations unless --iters; in the emulator: a smoke test)\n"
      "  --csv FILE  also write device,date,name,threads,blocks,tflops rows to FILE\n",
      argv0, kMaxIters);
}

[[noreturn]] void bad_args(const std::string& msg) {
  std::fprintf(stderr, "tc_peak: error: %s (see --help)\n", msg.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) bad_args(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--csv") {
      o.csv = value();
      if (o.csv.empty()) bad_args("--csv needs a file name");
    } else if (a == "--iters") {
      const std::string v = value();
      char* end = nullptr;
      errno = 0;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0 || n < 1 || n > kMaxIters)
        bad_args("--iters must be an integer 1.." + std::to_string(kMaxIters) + ", not '" + v + "'");
      o.iters = int(n);
    } else if (a == "--help" || a == "-h") {
      usage(argv[0]);
      std::exit(0);
    } else {
      bad_args("unknown argument '" + a + "'");
    }
  }
  if (o.iters == 0) o.iters = o.quick ? 16 : kEmulator ? 256 : 1 << 16;
  if (!o.csv.empty()) {
    o.csv_file = std::fopen(o.csv.c_str(), "w");
    if (!o.csv_file) bad_args("cannot write --csv file '" + o.csv + "': " + std::strerror(errno));
  }
  return o;
}

std::string today() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::localtime(&t));
  return buf;
}

// A launch shape: threads per block, blocks per SM.
struct Shape {
  int threads, blocks_per_sm;
};
// One block of 4 warps per SM (one warp per SM sub-partition: the latency case for F = 1), a
// full SM with 4-warp blocks, and 8-warp blocks.
constexpr Shape kShapes[] = {{128, 1}, {128, 8}, {256, 4}};

template <class Launch>
double time_ms(Launch launch) {
  if (kEmulator) {
    const auto t0 = std::chrono::steady_clock::now();
    launch();
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  launch();  // warm-up: clocks, module load
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> ms;
  for (int r = 0; r < 5; ++r) {
    CUDA_CHECK(cudaEventRecord(e0));
    launch();
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Bench {
  Options opt;
  std::string device;
  int sms = 1, clock_khz = 0;
  std::FILE* csv = nullptr;
  int failures = 0;
  float* d_a = nullptr;
  float* d_b = nullptr;
  float* d_out = nullptr;
  std::vector<double> prod;  // A*B, 16x16 row major, exact (integers)

  explicit Bench(const Options& o) : opt(o) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    device = prop.name;
    sms = std::max(1, prop.multiProcessorCount);
    CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));  // 0 in the emulator
    std::printf("tc_peak: device %s, compute capability %d.%d, %d SMs, clock %s\n", device.c_str(),
                prop.major, prop.minor, sms,
                clock_khz > 0 ? (std::to_string(clock_khz / 1000) + " MHz (max)").c_str() : "n/a");

    std::vector<float> a(16 * 8), b(8 * 16);
    for (int i = 0; i < 16; ++i)
      for (int k = 0; k < 8; ++k) a[i * 8 + k] = a_value(i, k);
    for (int k = 0; k < 8; ++k)
      for (int j = 0; j < 16; ++j) b[k * 16 + j] = b_value(k, j);
    prod.assign(256, 0.0);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j)
        for (int k = 0; k < 8; ++k) prod[i * 16 + j] += double(a[i * 8 + k]) * b[k * 16 + j];
    CUDA_CHECK(cudaMalloc(&d_a, a.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_b, b.size() * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_a, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_b, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
    std::size_t out_floats = 0;  // the largest output of any run
    for (const Shape& s : kShapes) {
      const std::size_t threads = std::size_t(s.threads) * s.blocks_per_sm * sms;
      out_floats = std::max({out_floats, threads / 32 * 8 * 256, threads * kFmaChains});
    }
    CUDA_CHECK(cudaMalloc(&d_out, out_floats * sizeof(float)));
  }
  ~Bench() {
    CUDA_CHECK_NOTHROW(cudaFree(d_a));
    CUDA_CHECK_NOTHROW(cudaFree(d_b));
    CUDA_CHECK_NOTHROW(cudaFree(d_out));
  }

  // Copies n floats of the output back, after the output was pre-filled with NaN by the caller.
  std::vector<float> fetch(std::size_t n) {
    std::vector<float> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }

  // The grid of shape s for kernel k: s.blocks_per_sm per SM, but never more than can be
  // resident at once (registers), so every launch is one full wave.
  template <class Kernel>
  int grid(Kernel k, const Shape& s, std::string& note) {
    int resident = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, k, s.threads, 0));
    if (resident < 1)
      throw std::runtime_error("a block of " + std::to_string(s.threads) + " threads cannot run");
    if (resident < s.blocks_per_sm)
      note = "; " + std::to_string(resident) + " blocks/SM resident (not " +
             std::to_string(s.blocks_per_sm) + ")";
    return std::min(resident, s.blocks_per_sm) * sms;
  }

  void report(const std::string& name, const Shape& s, int blocks, double flop, double ms,
              const std::string& check) {
    const double tflops = flop / (ms * 1e-3) * 1e-12;
    char per_clk[48] = "";
    if (clock_khz > 0 && !kEmulator)
      std::snprintf(per_clk, sizeof per_clk, "%10.0f", flop / (ms * 1e-3) / (sms * clock_khz * 1e3));
    std::printf("%-16s %9d %7d %10.4g %9.3f %s  %s\n", name.c_str(), s.threads / 32, blocks,
                tflops, ms, clock_khz > 0 && !kEmulator ? per_clk : "         -", check.c_str());
    if (csv)
      std::fprintf(csv, "%s,%s,%s,%d,%d,%.6f\n", device.c_str(), today().c_str(), name.c_str(),
                   s.threads, blocks, tflops);
  }

  template <int F>
  void run_wmma(const Shape& s) {
    std::string note;
    const int blocks = grid(wmma_tf32_kernel<F>, s, note);
    const std::size_t warps = std::size_t(blocks) * s.threads / 32;
    const std::size_t n = warps * F * 256;
    CUDA_CHECK(cudaMemset(d_out, 0xff, n * sizeof(float)));  // NaN: an unwritten tile fails
    const int iters = opt.iters;
    const double ms = time_ms([&] {
      wmma_tf32_kernel<F><<<blocks, s.threads>>>(d_a, d_b, d_out, iters);
    });
    // Every stored accumulator f of every warp must be exactly f + iters * (A*B).
    const std::vector<float> h = fetch(n);
    std::size_t bad = 0, first = 0;
    for (std::size_t w = 0; w < warps; ++w)
      for (int f = 0; f < F; ++f)
        for (int e = 0; e < 256; ++e) {
          const std::size_t at = (w * F + f) * 256 + e;
          if (double(h[at]) != f + double(iters) * prod[e] && bad++ == 0) first = at;
        }
    std::string check = "ok: all " + std::to_string(warps * F) + " accumulators exact";
    if (bad) {
      ++failures;
      const std::size_t f = first / 256 % F, e = first % 256;
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "MISMATCH at %zu of %zu values; first: warp %zu acc %zu (%zu,%zu) = %g, expected %g",
                    bad, n, first / 256 / F, f, e / 16, e % 16, double(h[first]),
                    f + double(iters) * prod[e]);
      check = buf;
    }
    report("wmma_tf32_f" + std::to_string(F), s, blocks, 2.0 * 16 * 16 * 8 * double(warps) * F * iters, ms,
           check + note);
  }

  void run_fma(const Shape& s) {
    std::string note;
    const int blocks = grid(fma_fp32_kernel, s, note);
    const std::size_t threads = std::size_t(blocks) * s.threads;
    const std::size_t n = threads * kFmaChains;
    CUDA_CHECK(cudaMemset(d_out, 0xff, n * sizeof(float)));
    const int iters = opt.iters;
    const float a = 1.0f, b = 0.5f;  // acc_j = j + 0.5 * kFmaRounds * iters, exact (< 2^22)
    const double ms = time_ms([&] { fma_fp32_kernel<<<blocks, s.threads>>>(d_out, a, b, iters); });
    const std::vector<float> h = fetch(n);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (double(h[i]) != double(i % kFmaChains) + 0.5 * kFmaRounds * iters) ++bad;
    std::string check = "ok: all " + std::to_string(n) + " chains exact";
    if (bad) {
      ++failures;
      check = "MISMATCH at " + std::to_string(bad) + " of " + std::to_string(n) + " chains";
    }
    report("fma_fp32_x8", s, blocks, 2.0 * double(threads) * kFmaChains * kFmaRounds * iters, ms,
           check + note);
  }

  int run() {
    csv = opt.csv_file;
    if (csv) std::fprintf(csv, "device,date,name,threads,blocks,tflops\n");
    if (kEmulator)
      std::printf("SIMT CPU emulator: the figures below are the emulator's CPU wall time, "
                  "NOT GPU performance\n");
    std::printf("iterations: %d%s; timing: %s\n", opt.iters, opt.quick ? " (--quick)" : "",
                kEmulator ? "wall clock of one launch" : "cudaEvents, median of 5 launches after 1 warm-up");
    std::printf("FLOP: 2*16*16*8 per mma_sync per warp; 2 per FMA (%d chains x %d rounds per iteration)\n",
                kFmaChains, kFmaRounds);
    std::printf("%-16s %9s %7s %10s %9s %10s  %s\n", "name", "warps/blk", "blocks",
                kEmulator ? "TFLOP/s(e)" : "TFLOP/s", kEmulator ? "ms(emu)" : "ms", "FLOP/clk/SM", "check");
    for (const Shape& s : kShapes) {
      run_wmma<1>(s);
      run_wmma<2>(s);
      run_wmma<4>(s);
      run_wmma<8>(s);
      run_fma(s);
    }
    if (csv && std::fclose(csv) != 0) throw std::runtime_error("cannot write " + opt.csv);
    if (kEmulator) std::printf("(emulator: CPU wall time of the SIMT emulator, not GPU performance)\n");
    if (failures) std::printf("tc_peak: %d kernel(s) stored wrong results\n", failures);
    return failures ? 1 : 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    return Bench(o).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tc_peak: %s\n", e.what());
    return 1;
  }
}
