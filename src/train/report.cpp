// The --report performance report: PhaseTimer (CUDA events at the phase boundaries of each
// batch, read one batch late), the report's arithmetic (FLOPs, bytes, medians, rates,
// roofline) and its atomic write. Tested by tests/train/test_report*.cpp.
#include "train/report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/check.h"

namespace nn::train {

// ---- PhaseTimer ----

PhaseTimer::PhaseTimer(bool active, bool host_clock) : active_(active), host_(host_clock) {
  if (!active_ || host_) return;
  for (Slot& s : slots_)
    for (cudaEvent_t& e : s.ev) CUDA_CHECK(cudaEventCreate(&e));
}

PhaseTimer::~PhaseTimer() {
  for (Slot& s : slots_)
    for (cudaEvent_t e : s.ev)
      if (e) CUDA_CHECK_NOTHROW(cudaEventDestroy(e));
}

void PhaseTimer::record(Mark m) {
  Slot& s = slots_[cur_];
  if (s.n == kMaxMarks) throw std::logic_error("PhaseTimer: more marks in one batch than events");
  if (host_)
    s.at[s.n] = std::chrono::steady_clock::now();
  else
    CUDA_CHECK(cudaEventRecord(s.ev[s.n], 0));  // the default stream, where the model works
  s.what[s.n] = m;
  ++s.n;
}

void PhaseTimer::begin(Mark first) {
  if (!active_) return;
  Slot& s = slots_[cur_];
  if (s.pending) read(s);  // only if end() could not read it (never in the trainer's order)
  s.n = 0;
  record(first);
}

void PhaseTimer::mark(Mark next) {
  if (active_) record(next);
}

void PhaseTimer::end() {
  if (!active_) return;
  record(Mark::Untimed);  // the final event: what follows belongs to no batch
  slots_[cur_].pending = true;
  cur_ ^= 1;
  // The batch before this one: finished on the device, or about to be, while this one is
  // already queued behind it.
  if (slots_[cur_].pending) read(slots_[cur_]);
}

void PhaseTimer::flush() {
  if (!active_) return;
  // Oldest first: the other slot holds the earlier batch when both are pending.
  if (slots_[cur_].pending) read(slots_[cur_]);
  if (slots_[cur_ ^ 1].pending) read(slots_[cur_ ^ 1]);
}

void PhaseTimer::read(Slot& s) {
  s.pending = false;
  if (s.n < 2) return;
  if (!host_) CUDA_CHECK(cudaEventSynchronize(s.ev[s.n - 1]));
  const auto seconds = [&](int a, int b) {
    if (host_) return std::chrono::duration<double>(s.at[std::size_t(b)] - s.at[std::size_t(a)]).count();
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, s.ev[a], s.ev[b]));
    return double(ms) * 1e-3;
  };
  BatchTiming t;
  const auto add = [](double& into, double v) { into = std::isnan(into) ? v : into + v; };
  for (int i = 0; i + 1 < s.n; ++i) {
    const double dt = seconds(i, i + 1);
    switch (s.what[i]) {
      case Mark::Forward: add(t.forward, dt); break;
      case Mark::Backward: add(t.backward, dt); break;
      case Mark::ForwardBackward: add(t.compute, dt); break;
      case Mark::D2H: add(t.d2h, dt); break;
      case Mark::Allreduce: add(t.allreduce, dt); break;
      case Mark::H2D: add(t.h2d, dt); break;
      case Mark::Step: add(t.step, dt); break;
      case Mark::Untimed: break;
    }
  }
  if (!std::isnan(t.forward) || !std::isnan(t.backward)) {
    // Timed apart: the sum, with a missing half (an empty slice's forward) as zero.
    t.compute = (std::isnan(t.forward) ? 0 : t.forward) + (std::isnan(t.backward) ? 0 : t.backward);
    if (std::isnan(t.forward)) t.forward = 0;
    if (std::isnan(t.backward)) t.backward = 0;
  }
  t.batch = seconds(0, s.n - 1);
  done_.push_back(t);
}

// ---- the report ----

double batch_flops(std::size_t B, int H, int D, int C) {
  const double b = double(B), h = double(H);
  return 2 * b * h * (D + C)     // forward: W1 X, W2 A1
         + 2 * b * h * (D + C);  // backward: dW1 = dZ1 X^T, dW2 = dZ2 A1^T
}

double gradient_bytes(int H, int D, int C, std::size_t real_size) {
  const double h = H, d = D, c = C;
  return 2 * (h * d + h + c * h + c) * double(real_size);
}

namespace {

using Json = nlohmann::ordered_json;

std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// num / den, or nothing when den is missing, not positive or not finite.
std::optional<double> ratio(std::optional<double> num, std::optional<double> den) {
  if (!num || !den || !std::isfinite(*num) || !std::isfinite(*den) || !(*den > 0)) return std::nullopt;
  const double q = *num / *den;
  if (!std::isfinite(q)) return std::nullopt;
  return q;
}

Json or_null(std::optional<double> v) { return v ? Json(*v) : Json(nullptr); }

// The values of one phase, or of a per-batch sum of phases, over the batches that ran it.
template <class F>
std::vector<double> series(const std::vector<BatchTiming>& bs, F value) {
  std::vector<double> out;
  out.reserve(bs.size());
  for (const BatchTiming& b : bs) {
    const double v = value(b);
    if (!std::isnan(v)) out.push_back(v);
  }
  return out;
}

Json phase_json(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  Json j;
  j["total_s"] = total;
  j["median_s"] = or_null(median(v));
  j["count"] = v.size();
  return j;
}

// The course's roofline: the compute ceiling and the PCIe and MPI rates, combined per byte at
// arithmetic intensity ai; nothing when a rate is missing.
std::optional<double> roofline_prediction(std::optional<double> ai, std::optional<double> ceiling, bool cpu,
                                          bool communicated, std::optional<double> p_pci,
                                          std::optional<double> p_mpi) {
  if (!ai || !ceiling) return std::nullopt;
  if (!communicated) return ceiling;  // nothing communicated (p = 1): the compute term alone
  if (cpu && p_mpi) return ratio(*ai, *ai / *ceiling + 1 / *p_mpi / 2);  // no PCIe on the host: MPI only
  if (p_pci && p_mpi) return ratio(*ai, *ai / *ceiling + (1 / *p_pci + 1 / *p_mpi) / 2);
  return std::nullopt;
}

}  // namespace

nlohmann::ordered_json make_report(const ReportInputs& in) {
  const std::vector<BatchTiming>& bs = in.batches;
  const auto forward = series(bs, [](const BatchTiming& b) { return b.forward; });
  const auto backward = series(bs, [](const BatchTiming& b) { return b.backward; });
  const auto compute = series(bs, [](const BatchTiming& b) { return b.compute; });
  const auto d2h = series(bs, [](const BatchTiming& b) { return b.d2h; });
  const auto allreduce = series(bs, [](const BatchTiming& b) { return b.allreduce; });
  const auto h2d = series(bs, [](const BatchTiming& b) { return b.h2d; });
  const auto step = series(bs, [](const BatchTiming& b) { return b.step; });
  const auto batch = series(bs, [](const BatchTiming& b) { return b.batch; });
  const auto pci = series(bs, [](const BatchTiming& b) { return b.d2h + b.h2d; });  // NaN unless both ran

  Json j;
  j["schema"] = "nn-report-1";
  j["device"] = in.device;
  j["build"] = in.cpu ? "cpu" : in.emulator ? "emulator" : "cuda";
  j["ranks"] = in.ranks;
  j["rank_devices"] = Json::array();
  for (const RankDevice& d : in.rank_devices) j["rank_devices"].push_back(rank_json(d));
  j["precision"] = in.is_double ? "double" : "float";
  j["config"] = {{"hidden", in.hidden}, {"batch", in.batch},     {"epochs", in.epochs},
                 {"n_train", in.n_train}, {"gemm", in.gemm}, {"profile", in.profile}};
  if (!in.gemm_why.empty()) j["config"]["gemm_auto"] = in.gemm_why;
  Json& ph = j["phases"];
  ph["forward"] = phase_json(forward);
  ph["backward"] = phase_json(backward);
  ph["d2h"] = phase_json(d2h);
  ph["allreduce"] = phase_json(allreduce);
  ph["h2d"] = phase_json(h2d);
  ph["step"] = phase_json(step);
  ph["batch"] = phase_json(batch);
  ph["forward_backward"] = phase_json(compute);

  const double F = batch_flops(in.batch, in.hidden, in.D, in.C);
  const double bytes = gradient_bytes(in.hidden, in.D, in.C, in.is_double ? 8 : 4);
  const double mpi_bytes = in.exact_bytes ? double(in.exact_bytes)
                           : in.node_shared ? gradient_bytes(in.hidden, 0, in.C, in.is_double ? 8 : 4)
                                            : bytes;
  j["exact"] = in.exact_bytes > 0;
  j["per_batch"] = {{"flops", F}, {"pci_bytes", bytes}, {"mpi_bytes", mpi_bytes}, {"batches", bs.size()}};

  const auto p_flops = ratio(F, median(compute));
  const auto p_pci = ratio(bytes, median(pci));
  const auto p_mpi = ratio(mpi_bytes, median(allreduce));
  j["measured"] = {{"p_flops", or_null(p_flops)},
                   {"p_pci", or_null(p_pci)},
                   {"p_mpi", or_null(p_mpi)},
                   {"flops_per_s", or_null(ratio(F, median(batch)))}};
  // The CPU's ceiling is its BLAS rate on these shapes, measured apart from the training.
  const std::optional<double> ceiling = in.gemm_flops_per_s > 0 ? std::optional<double>(in.gemm_flops_per_s) : p_flops;
  if (in.gemm_flops_per_s > 0) j["measured"]["gemm_flops_per_s"] = in.gemm_flops_per_s;
  const auto ai = ratio(F, bytes);
  j["arithmetic_intensity"] = or_null(ai);
  const bool communicated = !(pci.empty() && allreduce.empty());
  j["roofline_prediction_flops_per_s"] = or_null(roofline_prediction(ai, ceiling, in.cpu, communicated, p_pci, p_mpi));
  j["epoch_seconds"] = in.epoch_seconds;
  j["total_s"] = in.total_s;
  return j;
}

void write_report(const std::string& path, const nlohmann::ordered_json& report) {
  const std::string text = report.dump(2) + "\n";
  const auto fail = [&](int err) {
    return UserError("--report " + path + ": cannot write the report: " + std::strerror(err));
  };
  // A unique temporary name in the target's directory (rename is atomic there).
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) throw fail(errno);
  const mode_t mask = ::umask(0);  // mkstemp creates 0600; a report is an ordinary file
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  int err = 0;
  for (std::size_t done = 0; done < text.size() && err == 0;) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno != EINTR) err = errno;
    if (w > 0) done += std::size_t(w);
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw fail(err);
  }
}

void print_report_summary(std::FILE* out, const nlohmann::ordered_json& r) {
  if (!out) return;
  const auto num = [](const Json& v, double scale, const char* unit) {
    if (!v.is_number()) return std::string("n/a");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4g %s", v.get<double>() * scale, unit);
    return std::string(buf);
  };
  const bool runs = r.contains("persistent") && r["persistent"].is_boolean() && r["persistent"].get<bool>();
  std::fprintf(out, "timing on rank 0 over %s %s%s: median per %s, total\n", r["per_batch"]["batches"].dump().c_str(),
               runs ? "runs of steps (--persistent: one launch each)" : "batches",
               r["config"]["profile"].get<bool>() ? " (--profile: barriers and device syncs between phases)"
                                                  : "",
               runs ? "run" : "batch");
  for (const auto& [name, p] : r["phases"].items()) {
    if (p["count"].get<std::size_t>() == 0) continue;
    std::fprintf(out, "  %-16s %12s %12s\n", name.c_str(), num(p["median_s"], 1e3, "ms").c_str(),
                 num(p["total_s"], 1, "s").c_str());
  }
  const Json& m = r["measured"];
  std::fprintf(out, "rates: %s overall; compute %s, PCIe %s, MPI %s; roofline prediction %s\n",
               num(m["flops_per_s"], 1e-9, "GFLOP/s").c_str(), num(m["p_flops"], 1e-9, "GFLOP/s").c_str(),
               num(m["p_pci"], 1e-9, "GB/s").c_str(), num(m["p_mpi"], 1e-9, "GB/s").c_str(),
               num(r["roofline_prediction_flops_per_s"], 1e-9, "GFLOP/s").c_str());
}

}  // namespace nn::train
