// fma_peak: measures this machine's peak fp32 FMA throughput, the ceiling a CPU GEMM can reach,
// at 1 and at N threads, so that a GEMM's GFLOP/s can be quoted as a share of a measured peak.
//
// Build (no -march: each kernel carries its own target attribute, chosen at run time):
//   g++ -std=c++20 -O2 -pthread bench/cpu_gemm/fma_peak.cpp -o /tmp/fma_peak
// Usage: fma_peak [--threads 1,2,...] [--seconds S] [--repeats R] [--csv FILE]
//
// The kernel keeps kChains independent accumulators in vector registers and updates each one
// with one FMA per step (acc = acc * mul + add). One chain alone would wait for the previous FMA's
// result (latency 4-5 cycles), so to keep every FMA pipe busy each cycle we need at least
// pipes x latency independent chains: 2 x 5 = 10 on Zen 2, 2 x 4 = 8 on Zen 3/4 and recent Intel.
// 12 covers them all with margin and still fits in 16 ymm registers next to the two operands.
//
// Counting: one step = one FMA on each chain = kChains x lanes multiply-adds, and one FMA counts as
// 2 flops. GFLOP/s = (sum over threads of steps) x kChains x lanes x 2 / wall time, where the wall
// time runs from the earliest thread's start to the latest thread's end. When every thread does the
// same number of steps this is threads x steps x kChains x lanes x 2 / time. A run lasts --seconds
// (each thread checks the clock every kChunk steps); the best of --repeats runs is kept.
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 12;
constexpr long kChunk = 1L << 14;  // steps per kernel call; each thread checks the clock between calls

// Multiplier just below 1 and a small addend: every chain converges to add / (1 - mul) ~ 0.8, so
// the values stay normal (no overflow, no denormal slow path) however long it runs.
volatile float g_mul = 0.99999988f;
volatile float g_add = 1e-7f;
volatile float g_sink = 0.0f;  // receives the accumulators' sum, so the loops cannot be removed

// AVX2 + FMA: 8 fp32 lanes per ymm register.
__attribute__((target("avx2,fma"), noinline)) float fma_chains_avx2(long steps, float mul, float add,
                                                                     float init) {
  const __m256 m = _mm256_set1_ps(mul);
  const __m256 a = _mm256_set1_ps(add);
  __m256 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(init + static_cast<float>(c));
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], m, a);
  }
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) acc[0] = _mm256_add_ps(acc[0], acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  return sum;
}

// AVX-512F: 16 fp32 lanes per zmm register (32 registers, so 12 chains fit easily).
__attribute__((target("avx512f"), noinline)) float fma_chains_avx512(long steps, float mul, float add,
                                                                      float init) {
  const __m512 m = _mm512_set1_ps(mul);
  const __m512 a = _mm512_set1_ps(add);
  __m512 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(init + static_cast<float>(c));
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], m, a);
  }
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) acc[0] = _mm512_add_ps(acc[0], acc[c]);
  // A plain store and scalar sum: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized in its header.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc[0]);
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  return sum;
}

using Kernel = float (*)(long, float, float, float);

struct Isa {
  const char* name;
  int lanes;
  Kernel kernel;
};

struct Options {
  std::vector<int> threads;  // empty: 1..nproc
  double seconds = 0.3;
  int repeats = 5;
  std::string csv;
};

struct Run {
  double gflops = 0.0;
  double seconds = 0.0;
};

using Clock = std::chrono::steady_clock;

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "fma_peak: error: %s\n", msg.c_str());
  std::exit(2);
}

void print_usage() {
  std::printf(
      "usage: fma_peak [--threads LIST] [--seconds S] [--repeats R] [--csv FILE]\n"
      "Measures peak fp32 FMA throughput (GFLOP/s) for every supported ISA (avx2+fma, avx512f).\n"
      "  --threads LIST  comma-separated thread counts, e.g. 1,2 (default: 1,2,...,nproc)\n"
      "  --seconds S     duration of one timed run, 0 < S <= 60 (default 0.3)\n"
      "  --repeats R     timed runs per (isa, threads); the best is kept, 1..100 (default 5)\n"
      "  --csv FILE      also write rows isa,threads,gflops,lanes,chains,seconds to FILE\n"
      "  --help          this text\n");
}

long parse_long(const std::string& s, const char* what, long lo, long hi) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
    usage_error(std::string(what) + " wants an integer in " + std::to_string(lo) + ".." +
                std::to_string(hi) + ", got '" + s + "'");
  return v;
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], val;
    const bool has_eq = arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos;
    if (has_eq) {
      val = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
    }
    if (arg == "--help" || arg == "-h") {
      print_usage();
      std::exit(0);
    }
    if (arg != "--threads" && arg != "--seconds" && arg != "--repeats" && arg != "--csv")
      usage_error("unknown argument '" + std::string(argv[i]) + "' (see --help)");
    if (!has_eq) {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      val = argv[++i];
    }
    if (arg == "--threads") {
      o.threads.clear();
      size_t pos = 0;
      while (true) {
        const size_t comma = val.find(',', pos);
        o.threads.push_back(static_cast<int>(
            parse_long(val.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos),
                       "--threads", 1, 4096)));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (arg == "--seconds") {
      errno = 0;
      char* end = nullptr;
      const double v = std::strtod(val.c_str(), &end);
      if (val.empty() || *end != '\0' || errno != 0 || !(v > 0.0) || v > 60.0)
        usage_error("--seconds wants a number in (0, 60], got '" + val + "'");
      o.seconds = v;
    } else if (arg == "--repeats") {
      o.repeats = static_cast<int>(parse_long(val, "--repeats", 1, 100));
    } else {
      if (val.empty()) usage_error("--csv needs a file name");
      o.csv = val;
    }
  }
  return o;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      size_t b = line.find_first_not_of(" \t", colon + 1);
      return b == std::string::npos ? std::string("unknown") : line.substr(b);
    }
  }
  return "unknown";
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {  // should not happen; fall back to "no pinning" semantics on CPU ids 0..n-1
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned c = 0; c < n; ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

std::atomic<bool> g_pin_failed{false};

// One timed run: `threads` threads pinned round-robin over `cpus`, released together by a barrier,
// each calling the kernel in chunks until `seconds` have passed on its own clock.
Run run_once(const Isa& isa, int threads, const std::vector<int>& cpus, double seconds) {
  std::barrier sync(threads);
  std::vector<long> steps(threads, 0);
  std::vector<Clock::time_point> t0(threads), t1(threads);
  std::vector<float> sums(threads, 0.0f);
  const float mul = g_mul, add = g_add;
  const auto duration = std::chrono::duration<double>(seconds);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus[static_cast<size_t>(i) % cpus.size()], &set);
      if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) g_pin_failed = true;
      sync.arrive_and_wait();
      const auto start = Clock::now();
      long n = 0;
      float sum = 0.0f;
      do {
        sum += isa.kernel(kChunk, mul, add, 1.0f + static_cast<float>(i));
        n += kChunk;
      } while (Clock::now() - start < duration);
      t1[i] = Clock::now();
      t0[i] = start;
      steps[i] = n;
      sums[i] = sum;
    });
  }
  for (auto& t : pool) t.join();
  const auto first = *std::min_element(t0.begin(), t0.end());
  const auto last = *std::max_element(t1.begin(), t1.end());
  const double wall = std::chrono::duration<double>(last - first).count();
  double total_steps = 0.0;
  float total_sum = 0.0f;
  for (int i = 0; i < threads; ++i) {
    total_steps += static_cast<double>(steps[i]);
    total_sum += sums[i];
  }
  g_sink = g_sink + total_sum;
  // flops = steps x chains x lanes x 2 (an FMA is a multiply and an add)
  Run r;
  r.seconds = wall;
  r.gflops = total_steps * kChains * isa.lanes * 2.0 / wall * 1e-9;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_args(argc, argv);

  // An unwritable --csv path is reported like any other bad argument, before anything runs.
  FILE* csv = nullptr;
  if (!opt.csv.empty()) {
    csv = std::fopen(opt.csv.c_str(), "w");
    if (!csv) usage_error("cannot write --csv " + opt.csv + ": " + std::strerror(errno));
    std::fprintf(csv, "isa,threads,gflops,lanes,chains,seconds\n");
  }

  __builtin_cpu_init();
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool has_avx512 = __builtin_cpu_supports("avx512f");
  std::vector<Isa> isas;
  if (has_avx2) isas.push_back({"avx2", 8, fma_chains_avx2});
  if (has_avx512) isas.push_back({"avx512f", 16, fma_chains_avx512});

  const std::vector<int> cpus = allowed_cpus();
  const int nproc = static_cast<int>(cpus.size());
  if (opt.threads.empty())
    for (int t = 1; t <= nproc; ++t) opt.threads.push_back(t);

  std::printf("cpu: %s; %d CPU%s in the affinity mask; ISAs: %s%s%s\n", cpu_model().c_str(), nproc,
              nproc == 1 ? "" : "s", has_avx2 ? "avx2+fma" : "(no avx2+fma)",
              has_avx512 ? ", avx512f" : "", has_avx512 ? "" : " (no avx512f: skipped)");
  if (isas.empty()) {
    std::fprintf(stderr, "fma_peak: error: this CPU supports neither avx2+fma nor avx512f\n");
    return 1;
  }
  for (int t : opt.threads)
    if (t > nproc)
      std::printf("note: %d threads on %d CPU%s: pinned round-robin, so some threads share a CPU\n", t,
                  nproc, nproc == 1 ? "" : "s");

  // best[t index] = (gflops, isa name), for the peak summary
  std::vector<std::pair<double, const char*>> best(opt.threads.size(), {0.0, ""});
  for (const Isa& isa : isas) {
    for (size_t ti = 0; ti < opt.threads.size(); ++ti) {
      const int t = opt.threads[ti];
      Run top;
      for (int r = 0; r < opt.repeats; ++r) {
        const Run run = run_once(isa, t, cpus, opt.seconds);
        if (run.gflops > top.gflops) top = run;
      }
      std::printf("fma peak: %s (%d x fp32 lanes, %d chains), %d thread%s: %.1f GFLOP/s (best of %d)\n",
                  isa.name, isa.lanes, kChains, t, t == 1 ? "" : "s", top.gflops, opt.repeats);
      if (t <= nproc) {
        // per-thread rate / (2 pipes x lanes x 2 flops) = cycles per second, if there are 2 FMA pipes
        // of the full width. Cores that split a 512-bit FMA in two (Zen 4) read half the clock here.
        const double ghz = top.gflops / t / (2.0 * isa.lanes * 2.0);
        std::printf("  est. clock: %.2f GHz per core (estimate: assumes 2 FMA pipes of %d lanes each)\n", ghz,
                    isa.lanes);
      }
      if (csv)
        std::fprintf(csv, "%s,%d,%.3f,%d,%d,%.6f\n", isa.name, t, top.gflops, isa.lanes, kChains, top.seconds);
      if (top.gflops > best[ti].first) best[ti] = {top.gflops, isa.name};
    }
  }
  for (size_t ti = 0; ti < opt.threads.size(); ++ti)
    std::printf("peak, %d thread%s: %.1f GFLOP/s (%s)\n", opt.threads[ti], opt.threads[ti] == 1 ? "" : "s",
                best[ti].first, best[ti].second);
  if (g_pin_failed) std::fprintf(stderr, "fma_peak: warning: pthread_setaffinity_np failed; threads not pinned\n");
  if (csv && std::fclose(csv) != 0) {
    std::fprintf(stderr, "fma_peak: error: writing %s failed\n", opt.csv.c_str());
    return 1;
  }
  return 0;
}
