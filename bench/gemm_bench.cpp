// GEMM lab: validates every variant of nn::gemm against a CPU reference, then times it at the
// trainer's shapes (cuBLAS is variant 0). GPU: cudaEvents, L2 flushed, median of --repeats.
// Emulator build: CPU wall time of the SIMT emulator (not GPU numbers); its cuBLAS is OpenBLAS on
// the host, so there the ratio's baseline is naive instead. See bench/README.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/device_buffer.h"
#include "gemm/gemm.h"

namespace {

using nn::Epilogue;
using nn::Op;

struct Shape {
  std::string name;
  int M, N, K;
  Op opA, opB;
  Epilogue ep;
};

struct Options {
  bool quick = false, configs = false, big = true, dbl = false, tf32 = false;
  int repeats = 0;  // 0: 20 on a GPU, 1 in the emulator
  int hidden = 0, batch = 0;  // 0: 512 and 3000 (--quick: 128 and 384)
  std::vector<int> variants;
  std::vector<int> splits;     // --splits: with --configs, each configuration at each of these k-slice counts
  std::string only;            // --only: shapes whose name starts with one of these comma-separated prefixes
  std::string csv;
};

// A row to time: a variant through nn::gemm, or (--configs) one tile configuration of variant 4.
struct Kernel {
  int variant, cfg;  // cfg < 0: nn::gemm(variant, ...)
  std::string name;
  int splits = 0;    // with cfg >= 0: k-slices (0: the plan's heuristic)
  int products = 0;  // variant 5 through gemm_tf32_with (1 plain TF32, 3 compensated; cfg -1 = plan)
};

#ifdef SIM_EMULATOR
constexpr bool kEmulator = true;
#else
constexpr bool kEmulator = false;
#endif
// The ratio's baseline: cuBLAS on a GPU. The emulator's cuBLAS runs OpenBLAS natively on the
// host while the other variants run emulated, so a ratio to it would say nothing: naive there.
bool cublas_is_baseline() { return !kEmulator && nn::gemm_variant_available(0); }

[[noreturn]] void usage(const char* argv0, const std::string& err = "") {
  if (!err.empty()) std::fprintf(stderr, "error: %s\n", err.c_str());
  std::fprintf(stderr,
               "usage: %s [--quick] [--variants N,N,...] [--repeats N] [--csv FILE] [--configs]\n"
               "          [--splits N,N,...] [--only PREFIX,...] [--hidden H] [--batch B] [--no-big]\n"
               "          [--tf32] [--double] [--list]\n"
               "  --variants  the variants to run (default: every available one, 0..%d)\n"
               "  --quick     smaller B and H (for the emulator: the whole run takes < 2 minutes)\n"
               "  --configs   also time each tile configuration of variant 4 (warptile:BMxBN)\n"
               "  --splits    with --configs (variant 4) or --tf32 (variant 5): each configuration at\n"
               "              each of these split-K slice counts\n"
               "              (warptile:BMxBN/sS; the kernel may use fewer: no slice is left empty)\n"
               "  --only      only the shapes whose name starts with one of these prefixes (e.g. dW1,dW2)\n"
               "  --hidden, --batch  the network's H and the global batch B (default 512 and 3000)\n"
               "  --no-big    skip the 4096^3 shape (only run on a GPU anyway)\n"
               "  --tf32      also variant 5 (float) at each tile configuration (tf32x3:BMxBN) and as\n"
               "              plain one-product TF32 (tf32x1, for comparison; not FP32-accurate); on\n"
               "              compute capability 9.0 also its wgmma kernel (tf32x3:wgmma128x128,\n"
               "              unsplit and with the plan's k-slices: /plan)\n"
               "  --double    benchmark double instead of float\n"
               "  --list      print the variants it runs by default, one 'NUMBER NAME' a line, and exit\n",
               argv0, nn::kGemmVariants - 1);
  std::exit(err.empty() ? 0 : 2);
}

std::vector<Shape> shapes(const Options& o);

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0], a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--configs") o.configs = true;
    else if (a == "--tf32") o.tf32 = true;
    else if (a == "--no-big") o.big = false;
    else if (a == "--double") o.dbl = true;
    else if (a == "--csv") o.csv = value();
    else if (a == "--only") o.only = value();
    else if (a == "--hidden" || a == "--batch") {
      const int v = std::atoi(value().c_str());
      if (v < 4 || v > 65536) usage(argv[0], a + " must be 4..65536");
      (a == "--hidden" ? o.hidden : o.batch) = v;
    }
    else if (a == "--splits") {
      std::stringstream ss(value());
      std::string tok;
      while (std::getline(ss, tok, ',')) {
        const int v = std::atoi(tok.c_str());
        if (tok.empty() || v < 1 || v > 64) usage(argv[0], "bad --splits value '" + tok + "' (1..64)");
        o.splits.push_back(v);
      }
    }
    else if (a == "--repeats") {
      o.repeats = std::atoi(value().c_str());
      if (o.repeats < 1) usage(argv[0], "--repeats must be >= 1");
    } else if (a == "--variants") {
      std::stringstream ss(value());
      std::string tok;
      while (std::getline(ss, tok, ',')) {
        const int v = std::atoi(tok.c_str());
        if (tok.empty() || v < 0 || v >= nn::kGemmVariants) usage(argv[0], "bad variant '" + tok + "'");
        o.variants.push_back(v);
      }
    } else if (a == "--list") {
      for (int v = 0; v < nn::kGemmVariants; ++v)
        if (nn::gemm_variant_available(v)) std::printf("%d %s\n", v, nn::gemm_variant_name(v));
      std::exit(0);
    } else if (a == "--help" || a == "-h") usage(argv[0]);
    else usage(argv[0], "unknown option " + a);
  }
  if (o.variants.empty())
    for (int v = 0; v < nn::kGemmVariants; ++v) o.variants.push_back(v);
  if (o.repeats == 0) o.repeats = kEmulator ? 1 : 20;
  if (!o.splits.empty() && !o.configs && !o.tf32) usage(argv[0], "--splits needs --configs or --tf32");
  if (!o.only.empty() && shapes(o).empty()) usage(argv[0], "--only " + o.only + " matches no shape");
  return o;
}

// The trainer's GEMMs at batch B split over p ranks, hidden size H (784-H-10 network).
std::vector<Shape> shapes(const Options& o) {
  const int B = o.batch ? o.batch : o.quick ? 384 : 3000, H = o.hidden ? o.hidden : o.quick ? 128 : 512;
  std::vector<Shape> s;
  for (int p : {1, 2, 4}) {
    const int b = B / p;
    const std::string tag = "p" + std::to_string(p);
    s.push_back({"forward1/" + tag, H, b, 784, Op::N, Op::N, Epilogue::BiasSigmoid});
    s.push_back({"forward2/" + tag, 10, b, H, Op::N, Op::N, Epilogue::Bias});
    s.push_back({"dA1/" + tag, H, b, 10, Op::T, Op::N, Epilogue::None});
    s.push_back({"dW1/" + tag, H, 784, b, Op::N, Op::T, Epilogue::None});
    s.push_back({"dW2/" + tag, 10, H, b, Op::N, Op::T, Epilogue::None});
  }
  if (!kEmulator && o.big) s.push_back({"square4096", 4096, 4096, 4096, Op::N, Op::N, Epilogue::None});
  if (o.only.empty()) return s;
  std::vector<Shape> kept;
  for (const Shape& x : s) {
    std::stringstream ss(o.only);
    std::string prefix;
    bool keep = false;
    while (std::getline(ss, prefix, ',')) keep = keep || (!prefix.empty() && x.name.rfind(prefix, 0) == 0);
    if (keep) kept.push_back(x);
  }
  return kept;
}

std::string today() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::localtime(&t));
  return buf;
}

// One shape's operands, random in [-1, 1) from rng, on the host (for the reference) and on
// the device, and the GemmArgs over them (D is what the rows write).
template <class T>
struct Operands {
  int a_rows, a_cols, b_rows, b_cols;
  std::vector<T> hA, hB, hbias;
  nn::DeviceBuffer<T> A, B, D, bias;
  nn::GemmArgs<T> args;

  Operands(const Shape& s, std::mt19937& rng)
      : a_rows(s.opA == Op::N ? s.M : s.K), a_cols(s.opA == Op::N ? s.K : s.M),
        b_rows(s.opB == Op::N ? s.K : s.N), b_cols(s.opB == Op::N ? s.N : s.K),
        hA(std::size_t(a_rows) * a_cols), hB(std::size_t(b_rows) * b_cols), hbias(s.M),
        A(hA.size()), B(hB.size()), D(std::size_t(s.M) * s.N), bias(hbias.size()) {
    std::uniform_real_distribution<double> u(-1, 1);
    for (auto* v : {&hA, &hB, &hbias})
      for (auto& x : *v) x = T(u(rng));
    A.upload(hA.data(), hA.size());
    B.upload(hB.data(), hB.size());
    bias.upload(hbias.data(), hbias.size());
    args.opA = s.opA;
    args.opB = s.opB;
    args.M = s.M;
    args.N = s.N;
    args.K = s.K;
    args.A = A.get();
    args.lda = a_rows;
    args.B = B.get();
    args.ldb = b_rows;
    args.D = D.get();
    args.ldd = s.M;
    args.epilogue = s.ep;
    args.bias = s.ep == Epilogue::None ? nullptr : bias.get();
  }
};

// The double-precision reference at sampled entries (pts) with its error bound.
struct Samples {
  std::vector<std::pair<int, int>> pts;
  std::vector<double> ref, bound, mag;  // mag: sum |a_ik b_kj| (+ |bias|), the error's scale
};

// Reference at sampled entries (all four corners included): K multiply-adds each, so the
// check stays cheap even at 4096^3. Same error bound as tests/kernels/test_gemm.cpp.
template <class T>
Samples sample_reference(const Shape& s, const Operands<T>& o, std::mt19937& rng) {
  Samples r;
  r.pts = {{0, 0}, {s.M - 1, 0}, {0, s.N - 1}, {s.M - 1, s.N - 1}};
  if (std::size_t(s.M) * s.N <= 4096) {
    r.pts.clear();
    for (int j = 0; j < s.N; ++j)
      for (int i = 0; i < s.M; ++i) r.pts.push_back({i, j});
  } else {
    for (int n = 0; n < 2048; ++n) r.pts.push_back({int(rng() % s.M), int(rng() % s.N)});
  }
  const double eps = std::numeric_limits<T>::epsilon();
  for (auto [i, j] : r.pts) {
    double sum = 0, mag = 0;
    for (int k = 0; k < s.K; ++k) {
      const double x = s.opA == Op::N ? o.hA[i + std::size_t(k) * o.a_rows] : o.hA[k + std::size_t(i) * o.a_rows];
      const double y = s.opB == Op::N ? o.hB[k + std::size_t(j) * o.b_rows] : o.hB[j + std::size_t(k) * o.b_rows];
      sum += x * y;
      mag += std::fabs(x * y);
    }
    if (s.ep != Epilogue::None) sum += o.hbias[i], mag += std::fabs(double(o.hbias[i]));
    double bd = 2.0 * (s.K + 3) * eps * mag;
    if (s.ep == Epilogue::BiasSigmoid) sum = 1 / (1 + std::exp(-sum)), bd += 8 * eps;
    r.ref.push_back(sum);
    r.bound.push_back(bd);
    r.mag.push_back(mag);
  }
  return r;
}

template <class T>
struct Bench {
  const Options& opt;
  std::string device;
  std::FILE* csv = nullptr;
  int mismatches = 0;
  nn::DeviceBuffer<char> flush;  // written between timed runs so every run starts with a cold L2
  cudaEvent_t ev0{}, ev1{};

  explicit Bench(const Options& o) : opt(o) {
#ifdef SIM_EMULATOR
    device = "emulator";
#else
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    device = prop.name;
    flush = nn::DeviceBuffer<char>(std::max<std::size_t>(2 * std::size_t(prop.l2CacheSize), 1 << 20));
    CUDA_CHECK(cudaEventCreate(&ev0));
    CUDA_CHECK(cudaEventCreate(&ev1));
#endif
  }
  ~Bench() {
#ifndef SIM_EMULATOR
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
#endif
  }

  void run_kernel(const Kernel& k, const nn::GemmArgs<T>& a) {
    if constexpr (std::is_same_v<T, float>)
      if (k.products) return nn::gemm_tuning::gemm_tf32_with(k.cfg, k.products, a, 0, k.cfg < 0 ? 0 : k.splits);
    if (k.cfg < 0) nn::gemm(k.variant, a);
    else nn::gemm_tuning::gemm_warptile_with_config(k.cfg, k.splits, a);
  }

  // Median milliseconds of opt.repeats runs.
  double time_ms(const Kernel& k, const nn::GemmArgs<T>& a) {
    std::vector<double> ms;
#ifdef SIM_EMULATOR
    for (int r = 0; r < opt.repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      run_kernel(k, a);
      CUDA_CHECK(cudaDeviceSynchronize());
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
#else
    for (int r = 0; r < 3; ++r) run_kernel(k, a);  // warm-up: handles, workspaces, clocks
    for (int r = 0; r < opt.repeats; ++r) {
      CUDA_CHECK(cudaMemsetAsync(flush.get(), r & 0xff, flush.bytes()));
      CUDA_CHECK(cudaEventRecord(ev0));
      run_kernel(k, a);
      CUDA_CHECK(cudaEventRecord(ev1));
      CUDA_CHECK(cudaEventSynchronize(ev1));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, ev0, ev1));
      ms.push_back(t);
    }
#endif
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  // One row of the table: kernel k validated at the sampled entries (D pre-filled with NaN so
  // that unwritten outputs fail), then timed; base_ms is the ratio's denominator so far.
  void row(const Shape& s, const Kernel& k, Operands<T>& o, const Samples& smp, double& base_ms) {
    std::printf("%-14s %5d %5d %5d  %s%s  %-22s", s.name.c_str(), s.M, s.N, s.K,
                s.opA == Op::N ? "N" : "T", s.opB == Op::N ? "N" : "T", k.name.c_str());
    std::fflush(stdout);
    try {
      CUDA_CHECK(cudaMemset(o.D.get(), 0xff, o.D.bytes()));  // NaN: unwritten outputs fail the check
      run_kernel(k, o.args);
      CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<T> hD(std::size_t(s.M) * s.N);
      o.D.download(hD.data(), hD.size());
      int bad = 0;
      double relerr = 0;  // max over the samples of |got - ref| / sum |a_ik b_kj|
      // Plain TF32 (tf32x1) keeps 11 significand bits, not 24: its bound is 2^13 times wider.
      const double widen = k.products == 1 ? 8192.0 : 1.0;
      for (std::size_t n = 0; n < smp.pts.size(); ++n) {
        const double got = hD[smp.pts[n].first + std::size_t(smp.pts[n].second) * s.M];
        if (!(std::fabs(got - smp.ref[n]) <= widen * smp.bound[n])) ++bad;
        if (smp.mag[n] > 0) relerr = std::max(relerr, std::fabs(got - smp.ref[n]) / smp.mag[n]);
      }
      if (bad) {
        ++mismatches;
        std::printf("  MISMATCH at %d of %zu sampled entries: not timed\n", bad, smp.pts.size());
        return;
      }
      const double ms = time_ms(k, o.args);
      const int base_variant = cublas_is_baseline() ? 0 : 1;  // cuBLAS on a GPU, else naive
      if (k.cfg < 0 && k.variant == base_variant) base_ms = ms;
      const double gf = 2.0 * s.M * s.N * double(s.K) * 1e-9 / (ms * 1e-3);
      char ratio[32] = "";
      if (base_ms > 0) std::snprintf(ratio, sizeof ratio, "%.3f", base_ms / ms);
      std::printf(" %10.4f %10.2f %8s %9.2e\n", ms, gf, base_ms > 0 ? ratio : "-", relerr);
      if (csv)
        std::fprintf(csv, "%s,%s,%s,%d,%d,%d,%s,%s,%d,%s,%.6f,%.4f,%s,%.3e\n", device.c_str(),
                     today().c_str(), s.name.c_str(), s.M, s.N, s.K, s.opA == Op::N ? "N" : "T",
                     s.opB == Op::N ? "N" : "T", k.variant, k.name.c_str(), ms, gf, ratio, relerr);
    } catch (const std::exception& e) {
      ++mismatches;
      std::printf("  ERROR: %s\n", e.what());
    }
  }

  void shape(const Shape& s, const std::vector<Kernel>& kernels) {
    std::mt19937 rng(42);
    Operands<T> o(s, rng);
    const Samples smp = sample_reference(s, o, rng);
    double base_ms = -1;  // cuBLAS on a GPU, else naive: the ratio's denominator
    for (const Kernel& k : kernels) row(s, k, o, smp, base_ms);
  }

  int run() {
    std::vector<Kernel> kernels;
    for (int v : opt.variants)
      if (nn::gemm_variant_available(v)) kernels.push_back({v, -1, nn::gemm_variant_name(v)});
    if (opt.configs)
      for (int c = 0; c < nn::gemm_tuning::kWarptileConfigs; ++c) {
        const std::string name = std::string("warptile:") + nn::gemm_tuning::warptile_config_name(c);
        if (opt.splits.empty()) kernels.push_back({4, c, name});
        for (int sp : opt.splits) kernels.push_back({4, c, name + "/s" + std::to_string(sp), sp});
      }
    if (opt.tf32 && std::is_same_v<T, float> && nn::gemm_variant_available(5)) {
      for (int c = 0; c < nn::gemm_tuning::kTf32Configs; ++c) {
        const std::string name = std::string("tf32x3:") + nn::gemm_tuning::tf32_config_name(c);
        kernels.push_back({5, c, name, 1, 3});
        for (int sp : opt.splits)
          if (sp != 1) kernels.push_back({5, c, name + "/s" + std::to_string(sp), sp, 3});
      }
      // The wgmma kernel (sm_90 only, not yet in the plan): unsplit, with the plan's k-slices, and
      // at each --splits count.
      if (nn::gemm_tuning::tf32_wgmma_available()) {
        const int c = nn::gemm_tuning::kTf32Wgmma;
        const std::string name = std::string("tf32x3:") + nn::gemm_tuning::tf32_config_name(c);
        kernels.push_back({5, c, name, 1, 3});
        kernels.push_back({5, c, name + "/plan", 0, 3});
        for (int sp : opt.splits)
          if (sp != 1) kernels.push_back({5, c, name + "/s" + std::to_string(sp), sp, 3});
      }
      kernels.push_back({5, -1, "tf32x1 (plain TF32)", 0, 1});
    }
    if (!opt.csv.empty()) {
      csv = std::fopen(opt.csv.c_str(), "w");
      if (!csv) throw std::runtime_error("cannot write " + opt.csv);
      std::fprintf(csv, "device,date,shape,M,N,K,opA,opB,variant,name,ms,gflops,ratio,relerr\n");
    }
    std::printf("GEMM bench, %s, device: %s%s\n", sizeof(T) == 4 ? "float" : "double", device.c_str(),
                kEmulator ? " (SIMT CPU emulator: CPU wall time, NOT GPU performance)" : "");
    if (opt.quick && !opt.hidden && !opt.batch)
      std::printf("--quick: B=384, H=128 instead of B=3000, H=512 (shapes scaled down)\n");
    else if (opt.hidden || opt.batch)
      std::printf("shapes: H=%d, B=%d\n", opt.hidden ? opt.hidden : opt.quick ? 128 : 512,
                  opt.batch ? opt.batch : opt.quick ? 384 : 3000);
    std::printf("timing: %s, median of %d run(s); ratio = speed relative to %s\n",
                kEmulator ? "wall clock" : "cudaEvents, L2 flushed before each run", opt.repeats,
                cublas_is_baseline() ? "cuBLAS (variant 0)"
                : kEmulator ? "naive (variant 1); cublas is the emulated cuBLAS, OpenBLAS on the host"
                            : "naive (variant 1)");
    std::printf("%-14s %5s %5s %5s  %s  %-22s %10s %10s %8s %9s\n", "shape", "M", "N", "K", "op",
                "variant", "ms", "GFLOP/s", "ratio", "relerr");
    std::printf("relerr: max over the checked entries of |D - D64| / sum_k |a_ik b_kj| (D64: float64 on the host)\n");
    for (const Shape& s : shapes(opt)) {
      if (opt.configs || std::find(opt.variants.begin(), opt.variants.end(), 4) != opt.variants.end()) {
        const auto p = nn::gemm_tuning::warptile_plan(s.M, s.N, s.K);
        std::printf("%-14s warptile plan: %s tiles, %d k-slice(s)\n", s.name.c_str(),
                    nn::gemm_tuning::warptile_config_name(p.cfg), p.splits);
      }
      shape(s, kernels);
    }
    if (csv) std::fclose(csv);
    if (mismatches) std::printf("%d row(s) failed validation or errored\n", mismatches);
    return mismatches ? 1 : 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    if (o.dbl) return Bench<double>(o).run();
    return Bench<float>(o).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_bench: %s\n", e.what());
    return 1;
  }
}
