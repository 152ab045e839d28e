// The CPU GEMM lab: one BLAS library, loaded at run time, timed on the
// GEMMs of the trainer's --device cpu step (src/model/cpu_model.cpp) at the shapes of
// the given H:B pairs and rank counts, every result checked against a float64 recomputation.
// bench/cpu_gemm/lab.sh runs it once per library and thread count, alternating, and
// compares them.
//
//   cpu_gemm_lab --lib KIND=PATH [--threads T] [--shapes 256:100,512:800,1024:3000]
//                [--procs 1,2] [--seconds 0.3] [--csv FILE]
//
// KIND says which interface the library has and how its threads are set:
//   openblas  cblas_sgemm, openblas_set_num_threads
//   blis      cblas_sgemm, bli_thread_set_num_threads
//   mkl       cblas_sgemm, MKL_Set_Num_Threads          (libmkl_rt)
//   dnnl      dnnl_sgemm (row-major), omp_set_num_threads (oneDNN's OpenMP runtime)
// The program links no BLAS itself, and the library is opened with RTLD_DEEPBIND, so its
// calls to its own exported symbols (BLIS's cblas_sgemm calls its sgemm_) stay inside it.
//
// The five GEMMs, column-major as the trainer calls them, for a rank's batch part b (the
// largest part, ceil(B / p)), K = 784 inputs, C = 10 classes, beta as in the trainer:
//   fwd1  A1 = W1 X          NN  M=H  N=b    K=784  beta 0
//   fwd2  Z2 = W2 A1         NN  M=C  N=b    K=H    beta 0
//   dW2   G2 = dZ2 A1^T      NT  M=C  N=H    K=b    beta reg (rank 0 adds the L2 term)
//   dA1   dA1 = W2^T dZ2     TN  M=H  N=b    K=C    beta 0
//   dW1   G1 = dA1 X^T       NT  M=H  N=784  K=b    beta 1 at p = 1 (the step is fused), reg else
// and a sixth, dW2's transpose, which the trainer computes instead of dW2 with oneDNN (faster
// there; the L2 term is added as it is transposed back):
//   dW2t  G2^T = A1 dZ2^T    NT  M=H  N=C    K=b    beta 0
// The printed step sums the five the trainer calls with the library (dnnl: dW2t, not dW2).
// Time per call: the fastest of repeated blocks of calls over about --seconds (as the
// trainer's `blas bound:` line times its GEMMs).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "cpu_gemm_lab: error: %s\n", msg.c_str());
  std::exit(2);
}

// CBLAS's enum values (cblas.h), so that no CBLAS header is needed.
constexpr int kColMajor = 102, kNoTrans = 111, kTrans = 112;
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
using DnnlSgemm = int (*)(char, char, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                          const float*, std::int64_t, float, float*, std::int64_t);
using SetThreads = void (*)(int);

// One library: a column-major sgemm, however the library spells it.
struct Library {
  std::string kind, path, version;
  std::function<void(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int)> gemm;
};

void* need(void* lib, const char* name, const std::string& path) {
  void* f = dlsym(lib, name);
  if (!f) die(path + " has no " + name);
  return f;
}

Library open_library(const std::string& spec, int threads) {
  const std::size_t eq = spec.find('=');
  if (eq == std::string::npos) die("--lib wants KIND=PATH, got '" + spec + "'");
  Library L;
  L.kind = spec.substr(0, eq);
  L.path = spec.substr(eq + 1);
  void* lib = dlopen(L.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!lib) die(std::string("cannot open ") + L.path + ": " + dlerror());
  if (L.kind == "dnnl") {
    auto f = reinterpret_cast<DnnlSgemm>(need(lib, "dnnl_sgemm", L.path));
    reinterpret_cast<SetThreads>(need(lib, "omp_set_num_threads", L.path))(threads);
    struct Version { int major, minor, patch; const char* hash; unsigned cpu, gpu; };
    const Version* v = reinterpret_cast<const Version* (*)()>(need(lib, "dnnl_version", L.path))();
    L.version = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    // Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T: swap the operands.
    L.gemm = [f](bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
                 float beta, float* C, int ldc) {
      if (f(tb ? 'T' : 'N', ta ? 'T' : 'N', N, M, K, alpha, B, ldb, A, lda, beta, C, ldc) != 0) die("dnnl_sgemm failed");
    };
    return L;
  }
  auto f = reinterpret_cast<CblasSgemm>(need(lib, "cblas_sgemm", L.path));
  if (L.kind == "openblas") {
    reinterpret_cast<SetThreads>(need(lib, "openblas_set_num_threads", L.path))(threads);
    L.version = reinterpret_cast<const char* (*)()>(need(lib, "openblas_get_config", L.path))();
  } else if (L.kind == "blis") {
    reinterpret_cast<SetThreads>(need(lib, "bli_thread_set_num_threads", L.path))(threads);
    L.version = std::string("BLIS ") + reinterpret_cast<const char* (*)()>(need(lib, "bli_info_get_version_str", L.path))();
  } else if (L.kind == "mkl") {
    reinterpret_cast<SetThreads>(need(lib, "MKL_Set_Num_Threads", L.path))(threads);
    char buf[256] = {};
    reinterpret_cast<void (*)(char*, int)>(need(lib, "MKL_Get_Version_String", L.path))(buf, int(sizeof buf) - 1);
    L.version = buf;
  } else {
    die("unknown library kind '" + L.kind + "' (openblas, blis, mkl, dnnl)");
  }
  L.gemm = [f](bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
    f(kColMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  };
  return L;
}

struct Gemm {
  const char* name;
  bool ta, tb;
  int M, N, K;
  float beta;
};

std::vector<Gemm> step_gemms(int H, int b, int p) {
  const int D = 784, C = 10;
  const float reg = 1e-4f;
  return {{"fwd1", false, false, H, b, D, 0.0f},
          {"fwd2", false, false, C, b, H, 0.0f},
          {"dW2", false, true, C, H, b, reg},
          {"dA1", true, false, H, b, C, 0.0f},
          {"dW1", false, true, H, D, b, p == 1 ? 1.0f : reg},
          {"dW2t", false, true, H, C, b, 0.0f}};
}

// Checks 64 entries of C against float64 sums; the bound is a few float32 roundings of the
// sum of |a b| terms, as a K-term float sum in any order stays within it.
std::string check(const Gemm& g, const std::vector<float>& A, int lda, const std::vector<float>& B, int ldb,
                  const std::vector<float>& C0, const std::vector<float>& C, int ldc) {
  std::mt19937 rng(7);
  for (int s = 0; s < 64; ++s) {
    const int i = int(rng() % unsigned(g.M)), j = int(rng() % unsigned(g.N));
    double sum = 0, mag = 0;
    for (int k = 0; k < g.K; ++k) {
      const double a = g.ta ? A[std::size_t(k) + std::size_t(i) * lda] : A[std::size_t(i) + std::size_t(k) * lda];
      const double b = g.tb ? B[std::size_t(j) + std::size_t(k) * ldb] : B[std::size_t(k) + std::size_t(j) * ldb];
      sum += a * b;
      mag += std::fabs(a * b);
    }
    const double c0 = C0[std::size_t(i) + std::size_t(j) * ldc];
    const double want = sum + double(g.beta) * c0;
    const double got = C[std::size_t(i) + std::size_t(j) * ldc];
    const double tol = 4.0 * std::sqrt(double(g.K)) * 6e-8 * (mag + std::fabs(double(g.beta) * c0)) + 1e-30;
    if (!(std::fabs(got - want) <= std::max(tol, 1e-6 * (mag + 1))))
      return std::string(g.name) + ": C(" + std::to_string(i) + "," + std::to_string(j) + ") = " +
             std::to_string(got) + ", expected " + std::to_string(want);
  }
  return "";
}

double time_gemm(const Library& L, const Gemm& g, double seconds, std::string& problem) {
  const bool ta = g.ta, tb = g.tb;
  const int lda = ta ? g.K : g.M, ldb = tb ? g.N : g.K, ldc = g.M;
  const std::size_t a_cols = std::size_t(ta ? g.M : g.K), b_cols = std::size_t(tb ? g.K : g.N);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A(std::size_t(lda) * a_cols), B(std::size_t(ldb) * b_cols), C(std::size_t(ldc) * g.N);
  for (float& x : A) x = u(rng);
  for (float& x : B) x = u(rng);
  for (float& x : C) x = u(rng);
  const std::vector<float> C0 = C;
  L.gemm(ta, tb, g.M, g.N, g.K, 1.0f, A.data(), lda, B.data(), ldb, g.beta, C.data(), ldc);
  problem = check(g, A, lda, B, ldb, C0, C, ldc);
  using clock = std::chrono::steady_clock;
  // Blocks of about 20 ms; the fastest block's time per call.
  const double flop = 2.0 * g.M * g.N * g.K;
  int per_block = std::max(1, int(20e-3 / (flop / 50e9)));
  double best = 1e30;
  const auto start = clock::now();
  do {
    const auto t0 = clock::now();
    for (int r = 0; r < per_block; ++r)
      L.gemm(ta, tb, g.M, g.N, g.K, 1.0f, A.data(), lda, B.data(), ldb, g.beta, C.data(), ldc);
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::min(best, dt / per_block);
    if (dt < 5e-3) per_block *= 2;
  } while (std::chrono::duration<double>(clock::now() - start).count() < seconds);
  return best;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

int positive(const std::string& s, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < 1 || v > 100000) die(std::string(what) + ": '" + s + "' is not a positive count");
  return int(v);
}

}  // namespace

int main(int argc, char** argv) {
  std::string lib_spec, shapes = "256:100,512:800,1024:3000", procs = "1,2", csv;
  int threads = 1;
  double seconds = 0.3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--lib") lib_spec = value();
    else if (a == "--threads") threads = positive(value(), "--threads");
    else if (a == "--shapes") shapes = value();
    else if (a == "--procs") procs = value();
    else if (a == "--seconds") seconds = std::atof(value().c_str());
    else if (a == "--csv") csv = value();
    else if (a == "--help" || a == "-h") {
      std::printf("usage: %s --lib KIND=PATH [--threads T] [--shapes H:B,...] [--procs P,...] [--seconds S] "
                  "[--csv FILE]\n  KIND: openblas, blis, mkl, dnnl\n", argv[0]);
      return 0;
    } else die("unknown option '" + a + "' (--help lists them)");
  }
  if (lib_spec.empty()) die("--lib KIND=PATH is required");
  if (!(seconds > 0 && seconds < 100)) die("--seconds must be in (0, 100)");
  const Library L = open_library(lib_spec, threads);
  std::FILE* out = nullptr;
  if (!csv.empty()) {
    const bool fresh = !std::fopen(csv.c_str(), "r");
    out = std::fopen(csv.c_str(), "a");
    if (!out) die("cannot write " + csv);
    if (fresh) std::fprintf(out, "lib,version,threads,H,B,p,b,gemm,M,N,K,seconds,gflops\n");
  }
  std::printf("%s (%s), %d thread%s\n", L.kind.c_str(), L.version.c_str(), threads, threads == 1 ? "" : "s");
  int bad = 0;
  for (const std::string& shape : split(shapes, ',')) {
    const std::vector<std::string> hb = split(shape, ':');
    if (hb.size() != 2) die("--shapes wants H:B pairs, got '" + shape + "'");
    const int H = positive(hb[0], "H"), B = positive(hb[1], "B");
    for (const std::string& ps : split(procs, ',')) {
      const int p = positive(ps, "--procs"), b = (B + p - 1) / p;
      double step = 0, flop = 0;
      std::string line;
      for (const Gemm& g : step_gemms(H, b, p)) {
        std::string problem;
        const double s = time_gemm(L, g, seconds / 5, problem);
        if (!problem.empty()) {
          std::fprintf(stderr, "cpu_gemm_lab: %s: WRONG RESULT at H=%d B=%d p=%d: %s\n", L.kind.c_str(), H, B, p,
                       problem.c_str());
          ++bad;
        }
        const double f = 2.0 * g.M * g.N * g.K;
        // The step: the five GEMMs the trainer calls with this library (dnnl: dW2t for dW2).
        const std::string name = g.name;
        if (name != (L.kind == "dnnl" ? "dW2" : "dW2t")) {
          step += s;
          flop += f;
        }
        char cell[64];
        std::snprintf(cell, sizeof cell, " %s %.1f us", g.name, s * 1e6);
        line += cell;
        if (out)
          std::fprintf(out, "%s,\"%s\",%d,%d,%d,%d,%d,%s,%d,%d,%d,%.9f,%.3f\n", L.kind.c_str(), L.version.c_str(),
                       threads, H, B, p, b, g.name, g.M, g.N, g.K, s, f / s * 1e-9);
      }
      std::printf("  H=%-5d B=%-5d p=%d b=%-5d step %8.1f us (%6.1f GFLOP/s):%s\n", H, B, p, b, step * 1e6,
                  flop / step * 1e-9, line.c_str());
    }
  }
  if (out) std::fclose(out);
  return bad ? 1 : 0;
}
