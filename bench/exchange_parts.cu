// The parts of one gradient exchange, timed alone (the scaling model's inputs, docs/scaling.md):
//   copies     pinned device -> host and host -> device of M bytes (cudaEvents, median), every
//              rank at once (ranks that share a GPU share its copy engines and PCIe link)
//   allreduce  the host all-reduce the trainer calls (nn::comm::allreduce_sum, MPI_IN_PLACE,
//              MPI_SUM on float) of M bytes at the job's rank count: a barrier, then the call,
//              timed on each rank; the row is the slowest rank's median
//   reduce     the host's reduction rate: y += x over M bytes of float (one core, median)
// Run under mpirun at each rank count; Open MPI's algorithm comes from the environment
// (OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=N), which
// the ALGO column echoes. In the emulator build the copies are the emulator's host copies: not
// GPU figures (the rows say "emulator").
//   exchange_parts [--bytes 814120,3256360] [--repeats 200] [--parts copies,allreduce,reduce]
//                  [--csv FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "common/check.h"
#include "common/device_buffer.h"

namespace {

#ifdef SIM_EMULATOR
constexpr const char* kWhere = "emulator";
#else
constexpr const char* kWhere = "gpu";
#endif

struct Options {
  std::vector<std::size_t> bytes{4 * (795 * 256 + 10), 4 * (795 * 1024 + 10)};  // H = 256 and 1024
  int repeats = 200;
  bool copies = true, allreduce = true, reduce = true;
  std::string csv;
};

[[noreturn]] void usage(const std::string& why) {
  if (nn::comm::rank() == 0)
    std::fprintf(stderr, "exchange_parts: %s\nusage: exchange_parts [--bytes N,N] [--repeats R] "
                         "[--parts copies,allreduce,reduce] [--csv FILE]\n", why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--bytes") {
      o.bytes.clear();
      const std::string v = value();
      for (std::size_t p = 0; p <= v.size();) {
        const std::size_t q = std::min(v.find(',', p), v.size());
        char* end = nullptr;
        const unsigned long long n = std::strtoull(v.substr(p, q - p).c_str(), &end, 10);
        if (q == p || *end || n < 4) usage("--bytes wants counts of at least 4 bytes, comma-separated: " + v);
        o.bytes.push_back(static_cast<std::size_t>(n));
        p = q + 1;
      }
    } else if (a == "--repeats") {
      o.repeats = std::atoi(value().c_str());
      if (o.repeats < 1) usage("--repeats wants a positive count");
    } else if (a == "--parts") {
      std::string v = ",";
      v += value();
      v += ',';
      o.copies = v.find(",copies,") != std::string::npos;
      o.allreduce = v.find(",allreduce,") != std::string::npos;
      o.reduce = v.find(",reduce,") != std::string::npos;
      if (!o.copies && !o.allreduce && !o.reduce) usage("--parts names none of copies, allreduce, reduce");
    } else if (a == "--csv") {
      o.csv = value();
    } else {
      usage("unknown argument " + a);
    }
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * double(v.size() - 1) + 0.5)];
}

// The slowest rank's value (every rank calls it).
double slowest(double mine) {
  const std::vector<double> all = nn::comm::gather_to_root({mine});
  double m = mine;
  for (double v : all) m = std::max(m, v);
  std::vector<double> out{m};
  nn::comm::broadcast(out);
  return out[0];
}

struct Row {
  std::string part;
  std::size_t bytes;
  double med_us, p10_us, p90_us;
};

using Clock = std::chrono::steady_clock;
double since_us(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

void time_copies(const Options& o, std::vector<Row>& rows) {
  for (std::size_t bytes : o.bytes) {
    const std::size_t n = bytes / sizeof(float);
    nn::DeviceBuffer<float> dev(n);
    nn::PinnedBuffer<float> host(n);
    for (std::size_t i = 0; i < n; ++i) host.get()[i] = float(i % 1000) * 1e-3f;
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    for (int dir = 0; dir < 2; ++dir) {
      std::vector<double> t;
      for (int r = -5; r < o.repeats; ++r) {  // 5 warm-up copies
        nn::comm::barrier();
        CUDA_CHECK(cudaEventRecord(a));
        if (dir == 0)
          CUDA_CHECK(cudaMemcpyAsync(host.get(), dev.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
        else
          CUDA_CHECK(cudaMemcpyAsync(dev.get(), host.get(), n * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaEventRecord(b));
        CUDA_CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 0) t.push_back(1e3 * ms);
      }
      rows.push_back({dir == 0 ? "d2h" : "h2d", n * sizeof(float), slowest(median(t)), slowest(quantile(t, 0.1)),
                      slowest(quantile(t, 0.9))});
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
  }
}

void time_allreduce(const Options& o, std::vector<Row>& rows) {
  for (std::size_t bytes : o.bytes) {
    const std::size_t n = bytes / sizeof(float);
    std::vector<float> buf(n), fresh(n);
    for (std::size_t i = 0; i < n; ++i) fresh[i] = float((i + std::size_t(nn::comm::rank())) % 97) * 1e-3f;
    std::vector<double> t;
    for (int r = -5; r < o.repeats; ++r) {
      std::memcpy(buf.data(), fresh.data(), bytes / sizeof(float) * sizeof(float));
      nn::comm::barrier();
      const auto t0 = Clock::now();
      nn::comm::allreduce_sum(buf.data(), n);
      if (r >= 0) t.push_back(since_us(t0));
    }
    // The sum must be the sum: entry i is sum over ranks of ((i + q) % 97) / 1000.
    const int p = nn::comm::size();
    for (std::size_t i = 0; i < n; i += 997) {
      float want = 0;
      for (int q = 0; q < p; ++q) want += float((i + std::size_t(q)) % 97) * 1e-3f;
      if (std::abs(buf[i] - want) > 1e-4f * (1 + std::abs(want)))
        throw std::runtime_error("allreduce: entry " + std::to_string(i) + " is " + std::to_string(buf[i]) +
                                 ", the ranks' sum is " + std::to_string(want));
    }
    rows.push_back({"allreduce", n * sizeof(float), slowest(median(t)), slowest(quantile(t, 0.1)),
                    slowest(quantile(t, 0.9))});
  }
}

void time_reduce(const Options& o, std::vector<Row>& rows) {
  for (std::size_t bytes : o.bytes) {
    const std::size_t n = bytes / sizeof(float);
    std::vector<float> x(n, 1e-3f), y(n, 0.f);
    std::vector<double> t;
    for (int r = -5; r < o.repeats; ++r) {
      const auto t0 = Clock::now();
      float* __restrict__ yy = y.data();
      const float* __restrict__ xx = x.data();
      for (std::size_t i = 0; i < n; ++i) yy[i] += xx[i];
      if (r >= 0) t.push_back(since_us(t0));
    }
    volatile float keep = y[n / 2];
    (void)keep;
    rows.push_back({"reduce", n * sizeof(float), slowest(median(t)), slowest(quantile(t, 0.1)),
                    slowest(quantile(t, 0.9))});
  }
}

}  // namespace

int main(int argc, char** argv) {
  nn::comm::Session session(&argc, &argv);
  const Options o = parse(argc, argv);
  const int p = nn::comm::size();
  const char* algo = std::getenv("OMPI_MCA_coll_tuned_allreduce_algorithm");
  const std::string algorithm = algo ? algo : "default";
  std::vector<Row> rows;
  try {
    if (o.copies) time_copies(o, rows);
    if (o.allreduce) time_allreduce(o, rows);
    if (o.reduce) time_reduce(o, rows);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exchange_parts: error: %s\n", e.what());
    nn::comm::abort_job(1);
  }
  if (nn::comm::rank() != 0) return 0;
  std::printf("%-9s %5s %-8s %-8s %10s %10s %10s %9s\n", "part", "ranks", "algo", "where", "bytes", "median_us",
              "p10_us", "GB/s");
  std::FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "a");
  if (!o.csv.empty() && !csv) {
    std::fprintf(stderr, "exchange_parts: error: cannot open %s for appending\n", o.csv.c_str());
    return 1;
  }
  if (csv && std::ftell(csv) == 0) std::fprintf(csv, "part,ranks,algorithm,where,bytes,median_us,p10_us,p90_us\n");
  for (const Row& r : rows) {
    const bool host_only = r.part == "allreduce" || r.part == "reduce";
    const char* where = host_only ? "host" : kWhere;
    std::printf("%-9s %5d %-8s %-8s %10zu %10.2f %10.2f %9.2f\n", r.part.c_str(), p,
                r.part == "allreduce" ? algorithm.c_str() : "-", where, r.bytes, r.med_us, r.p10_us,
                double(r.bytes) / (r.med_us * 1e3));
    if (csv)
      std::fprintf(csv, "%s,%d,%s,%s,%zu,%.3f,%.3f,%.3f\n", r.part.c_str(), p,
                   r.part == "allreduce" ? algorithm.c_str() : "-", where, r.bytes, r.med_us, r.p10_us, r.p90_us);
  }
  if (csv) std::fclose(csv);
  return 0;
}
