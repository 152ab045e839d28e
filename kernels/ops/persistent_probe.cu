// The persistent step's per-phase probe (persistent_step.h, NN_PERSISTENT_PROBE=FILE): a device
// buffer of timestamps for the next launches of the second kernel, then per launch one summary
// line (each phase's median over the steps of its slowest block) and CSV rows appended to FILE.
// Host code; the kernel writes the marks (persistent_step2.cu). Tested by
// tests/kernels/test_persistent_step2.cpp (PersistentProbe.*).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/device_buffer.h"
#include "ops/persistent_step.h"
#include "ops/persistent_step2.h"

namespace nn {
namespace {

struct Probe {
  std::mutex m;
  int launches = 0;  // probed so far
  DeviceBuffer<unsigned long long> buf;
};
Probe& probe_state() {
  static auto* p = new Probe();  // never destroyed: a launch may come after static destructors
  return *p;
}
const char* probe_file() {
  const char* f = std::getenv("NN_PERSISTENT_PROBE");
  return f && *f ? f : nullptr;
}
int probe_limit() {
  const char* v = std::getenv("NN_PERSISTENT_PROBE_LAUNCHES");
  return v && *v ? std::atoi(v) : 3;
}
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

// A buffer for steps x blocks x probe_marks(variant) marks when this launch is probed, else null.
unsigned long long* probe_begin(const PersistentPlan& plan, int steps) {
  if (!probe_file()) return nullptr;
  Probe& p = probe_state();
  std::lock_guard<std::mutex> lk(p.m);
  if (p.launches >= probe_limit()) return nullptr;
  const std::size_t n = static_cast<std::size_t>(steps) * plan.blocks * persist2::probe_marks(plan.variant);
  if (p.buf.size() < n) p.buf = DeviceBuffer<unsigned long long>(n);
  CUDA_CHECK(cudaMemset(p.buf.get(), 0, n * sizeof(unsigned long long)));
  return p.buf.get();
}

// After a probed launch: waits for it, then appends its summary and rows to the file.
void probe_end(const PersistentPlan& plan, int steps, cudaStream_t s) {
  CUDA_CHECK(cudaStreamSynchronize(s));
  Probe& p = probe_state();
  std::lock_guard<std::mutex> lk(p.m);
  const int nb = plan.blocks, K = persist2::probe_marks(plan.variant);
  std::vector<unsigned long long> t(static_cast<std::size_t>(steps) * nb * K);
  p.buf.download(t.data(), t.size());
  const int launch = ++p.launches;
  // Each mark's name (the CSV rows: the time it was reached); variant 3 has three inside phase A.
  static const char* kNames2[] = {"A", "barrier1", "B", "barrier2", "C"};
  static const char* kNames3[] = {"wait", "convert", "gather", "A", "barrier1", "B", "barrier2", "C"};
  const char* const* names = K == persist2::kProbeMarks3 ? kNames3 : kNames2;
  const int a_end = K - 5;  // the mark that ends phase A
  auto row = [&](int st, int b) { return &t[(static_cast<std::size_t>(st) * nb + b) * K]; };
  // Per step: each span's slowest block (a mark minus the mark before it; for variant 3 also the
  // whole of phase A), and the step from the earliest start to the latest end of phase C.
  std::vector<std::vector<double>> span(K);  // span[m]: up to mark m; span[0]: variant 3's whole A
  std::vector<double> step_us;
  for (int st = 0; st < steps; ++st) {
    unsigned long long first = ~0ull, last = 0;
    for (int m = 0; m < K; ++m) {
      double worst = 0;
      for (int b = 0; b < nb; ++b) {
        const unsigned long long* r = row(st, b);
        worst = std::max(worst, double(m > 0 ? r[m] - r[m - 1] : r[a_end] - r[0]) / 1000.0);
      }
      span[m].push_back(worst);
    }
    for (int b = 0; b < nb; ++b) {
      first = std::min(first, row(st, b)[0]);
      last = std::max(last, row(st, b)[K - 1]);
    }
    step_us.push_back(double(last - first) / 1000.0);
  }
  std::FILE* f = std::fopen(probe_file(), "a");
  if (!f) return;
  std::fprintf(f, "# persistent probe: launch %d, variant %d, %d steps, %d blocks, tile %dx%d, %d slices; median over "
               "steps of the slowest block, us:", launch, plan.variant, steps, nb, plan.tile_h, plan.tile_d,
               plan.slices);
  // Variant 3: "A" (the whole phase), its parts (wait, convert, gather, forward), then the rest.
  if (a_end > 1) std::fprintf(f, " A %.2f", median(span[0]));
  for (int m = 1; m < K; ++m)
    std::fprintf(f, " %s %.2f", a_end > 1 && m == a_end ? "forward" : names[m - 1], median(span[m]));
  std::fprintf(f, " step %.2f (model %.2f)\n", median(step_us), plan.predicted_us);
  for (int st = 0; st < steps; ++st)
    for (int b = 0; b < nb; ++b)
      for (int m = 1; m < K; ++m)
        std::fprintf(f, "%d,%d,%d,%s,%llu\n", launch, st, b, names[m - 1], row(st, b)[m] - row(st, b)[0]);
  std::fclose(f);
}

}  // namespace nn
