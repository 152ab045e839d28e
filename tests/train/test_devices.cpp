// Every rank's node and device (src/train/devices.{h,cpp}): the mapping, the header lines,
// the consistency check and the report's "rank_devices" on hand-made ranks over several
// fake hosts (rank-local), then select_device and a training with --report at every rank
// count, with 1..4 emulated devices per node (sim::set_devices; collective).
//
// One node cannot tell the node-local rank from the global rank (they are equal), so the
// hand-made multi-host lists carry that check: the list a rank-modulo mapping would give is
// refused by check_placement. tests/cli/device_map.sh runs nn_train itself (SIM_DEVICES).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../temp_dir.h"
#include "comm/comm.h"
#include "common/nn_real.h"
#include "schedule/rng.h"
#include "train/devices.h"
#include "train/report.h"
#include "train/trainer.h"
#include "synthetic.h"
#ifdef SIM_EMULATOR
#include "sim/sim_api.h"
#endif

namespace nn::train {
namespace {

using nlohmann::json;

// `per_host` ranks on each of `hosts` hosts, `k` devices each. Block placement (ranks 0..n-1 on
// the first host, ...) or round robin (rank r on host r % hosts), as mpirun --map-by does.
// by_global: the wrong mapping, device = global rank % k.
std::vector<RankDevice> fake_job(int hosts, int per_host, int k, bool round_robin, bool by_global = false) {
  std::vector<RankDevice> out;
  std::vector<int> next_local(std::size_t(hosts), 0);
  for (int r = 0; r < hosts * per_host; ++r) {
    const int h = round_robin ? r % hosts : r / per_host;
    RankDevice d;
    d.rank = r;
    d.host = "node-" + std::string(1, char('a' + h));
    d.local_rank = next_local[std::size_t(h)]++;
    d.device_count = k;
    d.device = by_global ? r % k : device_for(d.local_rank, k);
    d.device_name = "Fake GPU";
    out.push_back(d);
  }
  return out;
}

TEST(Devices, DeviceIsTheLocalRankModuloTheCount) {
  EXPECT_EQ(device_for(0, 1), 0);
  EXPECT_EQ(device_for(3, 1), 0);
  EXPECT_EQ(device_for(3, 4), 3);
  EXPECT_EQ(device_for(5, 4), 1);
  EXPECT_EQ(device_for(2, 0), -1);
}

TEST(Devices, HeaderHasOneLinePerNodeInRankOrder) {
  const auto block = fake_job(2, 2, 4, false);
  EXPECT_EQ(placement_lines(block), (std::vector<std::string>{
                                        "ranks on node-a: 0->gpu0 1->gpu1 (4 devices: Fake GPU)",
                                        "ranks on node-b: 2->gpu0 3->gpu1 (4 devices: Fake GPU)"}));
  const auto rr = fake_job(2, 3, 2, true);  // 3 ranks on 2 devices per node: gpu0 shared
  EXPECT_EQ(placement_lines(rr), (std::vector<std::string>{
                                     "ranks on node-a: 0->gpu0 2->gpu1 4->gpu0 (2 devices: Fake GPU)",
                                     "ranks on node-b: 1->gpu0 3->gpu1 5->gpu0 (2 devices: Fake GPU)"}));
  auto mixed = fake_job(1, 2, 1, false);
  mixed[1].device_name = "Other GPU";
  EXPECT_EQ(placement_lines(mixed),
            (std::vector<std::string>{"ranks on node-a: 0->gpu0 1->gpu0 (1 device: Fake GPU; 1 device: Other GPU)"}));
  EXPECT_TRUE(placement_lines({}).empty());
}

TEST(Devices, CpuRanksShowTheCpuAndItsThreads) {
  std::vector<RankDevice> v(2);
  for (int r = 0; r < 2; ++r) {
    v[std::size_t(r)].rank = v[std::size_t(r)].local_rank = r;
    v[std::size_t(r)].host = "h";
    v[std::size_t(r)].device_name = "Xeon";
    v[std::size_t(r)].threads = 1;
    v[std::size_t(r)].threads_from = "cores / ranks";
  }
  EXPECT_EQ(placement_lines(v),
            (std::vector<std::string>{"ranks on h: 0->cpu 1->cpu (CPU Xeon, 1 BLAS thread each (cores / ranks))"}));
  EXPECT_EQ(check_placement(v), "");
  const json j = rank_json(v[1]);
  EXPECT_TRUE(j["device"].is_null());
  EXPECT_EQ(j["device_count"], 0);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(rank_from_json(j), v[1]);
}

// A rank with fewer cores than the BLAS threads asked for (cpu_threads.h) gets one warning
// line naming it, how many others, and the launches that give each rank its cores.
TEST(Devices, RanksShortOfCoresGetOneWarningLineWithTheFix) {
  std::vector<RankDevice> v(3);
  for (int r = 0; r < 3; ++r) {
    RankDevice& d = v[std::size_t(r)];
    d.rank = d.local_rank = r;
    d.host = "h";
    d.device_name = "Xeon";
    d.threads = 2;
    d.threads_asked = 2;
    d.threads_from = "OPENBLAS_NUM_THREADS";
    d.node_cores = 8;
  }
  EXPECT_EQ(threads_warning(v), "");  // every rank has its 2 cores
  EXPECT_EQ(threads_warning({}), "");
  v[1].threads = v[2].threads = 1;
  v[1].threads_from = v[2].threads_from = "OPENBLAS_NUM_THREADS=2, but 1 core in its affinity mask";
  EXPECT_EQ(threads_warning(v),
            "rank 1 on h runs 1 BLAS thread (OPENBLAS_NUM_THREADS=2, but 1 core in its affinity mask); so do 1 more "
            "rank: to give each rank 2 cores, launch with slurm/mpirun.sh (one host), mpirun --map-by slot:PE=2 or srun "
            "--cpus-per-task=2");
  for (RankDevice& d : v) d.node_cores = 4;  // 3 ranks x 2 threads on 4 cores: fewer of either
  EXPECT_EQ(threads_warning(v),
            "rank 1 on h runs 1 BLAS thread (OPENBLAS_NUM_THREADS=2, but 1 core in its affinity mask); so do 1 more "
            "rank: h has 4 cores for 3 ranks x 2 threads: run at most 2 ranks per node there, or ask for 1 thread");
  v[2].threads = 2;
  const std::string one = threads_warning(v);
  EXPECT_EQ(one.find("more rank"), std::string::npos) << one;
  EXPECT_EQ(one.find('\n'), std::string::npos) << one;
  const json j = rank_json(v[1]);  // the report keeps what was asked
  EXPECT_EQ(j["threads_asked"], 2);
  EXPECT_EQ(rank_from_json(j), v[1]);
  json old = j;  // a report written before "threads_asked" existed still reads
  old.erase("threads_asked");
  EXPECT_EQ(rank_from_json(old).threads_asked, 0);
  v[1].device = 0;  // GPU ranks have no BLAS threads to warn about
  v[1].device_count = 1;
  EXPECT_EQ(threads_warning({v[1]}), "");
}

TEST(Devices, CheckAcceptsLocalRankMappingAndRefusesGlobalRankMapping) {
  for (const bool rr : {false, true})
    for (const int k : {1, 2, 4}) {
      EXPECT_EQ(check_placement(fake_job(2, 2, k, rr)), "") << "k=" << k << " rr=" << rr;
      EXPECT_EQ(check_placement(fake_job(3, 4, k, rr)), "") << "k=" << k << " rr=" << rr;
    }
  // device = global rank % k: rank 2 (local rank 0 on node-b) on gpu2, rank 3 on gpu3.
  const std::string why = check_placement(fake_job(2, 2, 4, false, true));
  EXPECT_EQ(why, "rank 2 on node-b: device 2 of 4, expected local rank 0 % 4");
  EXPECT_NE(check_placement(fake_job(2, 2, 2, true, true)), "");  // round robin: rank 1 on gpu1
  // Blocks of k ranks per node on k GPUs: global % k == local % k, the wrong mapping looks
  // right. A test must put more ranks on a node than it has devices, or fewer (2 nodes x 2
  // ranks, 4 devices each, as tests/multinode does), to tell them apart.
  EXPECT_EQ(check_placement(fake_job(2, 2, 2, false, true)), "");
  auto dup = fake_job(2, 2, 4, false);
  dup[3].rank = 2;
  EXPECT_NE(check_placement(dup), "");
  auto bad_local = fake_job(2, 2, 4, false);
  bad_local[2].local_rank = 2;  // as if node-b's ranks counted from the job's start
  bad_local[2].device = 2;
  EXPECT_EQ(check_placement(bad_local), "rank 2 on node-b: local rank 2, expected 0");
}

TEST(Devices, ReportListsEveryRank) {
  ReportInputs in;
  in.device = "Fake GPU";
  in.ranks = 4;
  in.hidden = 8;
  in.batch = 10;
  in.rank_devices = fake_job(2, 2, 4, false);
  const nlohmann::ordered_json r = make_report(in);
  EXPECT_EQ(r["ranks"], 4);  // the count stays: bench/plots.py and scaling.sh read it
  ASSERT_TRUE(r["rank_devices"].is_array());
  ASSERT_EQ(r["rank_devices"].size(), 4u);
  EXPECT_EQ(r["rank_devices"][2].dump(),
            R"({"rank":2,"host":"node-b","local_rank":0,"device":0,"device_count":4,"device_name":"Fake GPU"})");
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(rank_from_json(r["rank_devices"][i]), in.rank_devices[i]);
}

// ---- this job (collective) ----

// The emulator's device count for one test (the CUDA build: the machine's own).
struct DeviceCount {
  int saved = 0;
  explicit DeviceCount(int k) {
#ifdef SIM_EMULATOR
    saved = sim::devices();
    sim::set_devices(k);
#else
    (void)k;
#endif
  }
  ~DeviceCount() {
#ifdef SIM_EMULATOR
    sim::set_devices(saved);
#endif
    (void)cudaSetDevice(0);
  }
};

int visible_devices() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

TEST(Devices, SelectDeviceUsesTheNodeLocalRank) {
  for (const int k : {1, 2, 3, 4}) {
    const DeviceCount dc(k);
    const int count = visible_devices();
    RankDevice me;
    ASSERT_EQ(select_device(me), "");
    EXPECT_EQ(me.rank, comm::rank());
    EXPECT_EQ(me.local_rank, comm::local_rank());
    EXPECT_EQ(me.host, comm::processor_name());
    EXPECT_EQ(me.device_count, count);
    EXPECT_EQ(me.device, comm::local_rank() % count);
    int current = -1;
    ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
    EXPECT_EQ(current, me.device);
    const std::vector<RankDevice> all = gather_ranks(me);
    std::string why;
    if (comm::rank() == 0) {
      EXPECT_EQ(int(all.size()), comm::size());
      why = check_placement(all);
      EXPECT_EQ(why, "") << "k=" << k;
      if (!all.empty()) {
        EXPECT_EQ(all[0], me);
      }
    } else {
      EXPECT_TRUE(all.empty());
    }
    EXPECT_TRUE(comm::all_ok(why.empty()));
#ifndef SIM_EMULATOR
    break;  // a real machine has the devices it has
#endif
  }
}

// Rank 0's header and report of a tiny training, checked against this job (rank 0).
bool check_run(const std::string& header, const std::string& report, int k, bool cpu,
               const std::vector<std::string>& hosts) {
  const int p = comm::size();
  const json r = json::parse(report);
  EXPECT_EQ(r["ranks"], p);
  const json& rd = r["rank_devices"];
  EXPECT_TRUE(rd.is_array() && int(rd.size()) == p) << rd.dump();
  std::vector<RankDevice> all;
  for (const json& e : rd) all.push_back(rank_from_json(e));
  EXPECT_EQ(check_placement(all), "");
  for (const RankDevice& d : all) {
    if (d.rank >= 0 && d.rank < int(hosts.size())) {
      EXPECT_EQ(d.host, hosts[std::size_t(d.rank)]);
    }
    EXPECT_EQ(d.device, cpu ? -1 : d.local_rank % k);
    EXPECT_EQ(d.device_count, cpu ? 0 : k);
  }
  for (const std::string& line : placement_lines(all))
    EXPECT_NE(header.find("\n" + line + "\n"), std::string::npos) << line << "\nnot in\n" << header;
  if (!cpu && p >= 2 && k >= 2) {
    EXPECT_NE(header.find(" 1->gpu1"), std::string::npos) << header;
  }
  return !::testing::Test::HasFailure();
}

TEST(Devices, HeaderAndReportOfATrainingListEveryRank) {
  nn::test::TempDir tmp("nn_devices");
  const std::string dir = comm::broadcast(comm::rank() == 0 ? tmp.str() : std::string());
  for (const int k : {1, 2, 3, 0}) {  // 0: --device cpu (the CUDA build: the machine's count each time)
    const DeviceCount dc(k == 0 ? 1 : k);
    Config c;
    c.hidden = 8;
    c.batch = 8;
    c.epochs = 1;
    c.seed = 4;
    c.device = k == 0 ? Device::Cpu : Device::Gpu;
    c.report = dir + "/r" + std::to_string(k) + ".json";
    const std::string head_path = dir + "/h" + std::to_string(k) + ".txt";
    std::FILE* out = comm::rank() == 0 ? std::fopen(head_path.c_str(), "w") : nullptr;
    (void)train_on<nn_real>(c, noise_data(40, 8, 5, 22), out);
    if (out) std::fclose(out);
    bool ok = true;
    // Every rank's own host name, gathered independently of the trainer (rank order on rank 0).
    const std::vector<std::string> hosts = comm::gather_strings(comm::processor_name());
    if (comm::rank() == 0) ok = check_run(slurp(head_path), slurp(c.report), visible_devices(), k == 0, hosts);
    EXPECT_TRUE(comm::all_ok(ok)) << "k=" << k;
  }
}

}  // namespace
}  // namespace nn::train
