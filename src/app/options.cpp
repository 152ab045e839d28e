// nn_train's options: one table (name, value name, help, default, strict setter) drives both
// the CLI11 command line and the `key = value` --config file, so both sources accept and
// reject exactly the same values. Tested by tests/app/test_options.cpp.
#include "app/options.h"

#include <CLI/CLI.hpp>

#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "app/config_file.h"
#include "app/option_values.h"
#include "common/errors.h"
#include "gemm/gemm.h"

namespace nn::app {

using namespace ::nn::train;  // the training side's names: Config and its enums, train_on, the stop flag

namespace {

using namespace option_values;

struct Spec {
  const char* name;   // long option without "--"; also the config-file key
  const char* value;  // value name in --help; nullptr for a flag
  const char* help;
  std::string (*shown_default)(const Config&);
  void (*set)(Config&, const std::string&);  // converts, validates, stores; throws BadValue
};

// --comm's value (nccl too) or --mpi's (host or device only).
Comm to_comm(const std::string& v, bool nccl) {
  const std::string s = trim(v);
  if (s == "host") return Comm::Host;
  if (s == "device") return Comm::Device;
  if (s == "nccl" && nccl) return Comm::Nccl;
  throw BadValue{s.empty() ? "missing value" : nccl ? "must be host, device or nccl" : "must be host or device"};
}

// --gemm's help, from the GEMM registry (kernels/gemm/variants.h).
const std::string kGemmHelp = "GEMM: " + gemm_variants_help() +
    "; auto: the variant measured fastest on this GPU class at the nearest shape (kernels/gemm/auto_table.h), else 4";

// clang-format off
const Spec kSpecs[] = {
  {"data", "DIR", "directory of the four MNIST IDX files (raw or .gz)",
   [](const Config& c) { return c.data; },
   [](Config& c, const std::string& v) { c.data = to_path(v); }},
  {"hidden", "H", "hidden units, 1..65536",
   [](const Config& c) { return std::to_string(c.hidden); },
   [](Config& c, const std::string& v) { c.hidden = to_int32(v, 1, kMaxHidden); }},
  {"batch", "B", "global batch size, split over the MPI ranks",
   [](const Config& c) { return std::to_string(c.batch); },
   [](Config& c, const std::string& v) { c.batch = to_size(v, 1, kMaxBatch); }},
  {"epochs", "E", "number of epochs (0: only score the --load or --resume weights on the test set)",
   [](const Config& c) { return std::to_string(c.epochs); },
   [](Config& c, const std::string& v) { c.epochs = to_int32(v, 0, kIntMax); }},
  {"lr", "X", "learning rate, > 0",
   [](const Config& c) { return shown(c.lr); },
   [](Config& c, const std::string& v) {
     c.lr = to_double(v);
     if (!(c.lr > 0)) throw BadValue{"must be greater than 0"};
   }},
  {"reg", "X", "L2 strength (weights only), >= 0",
   [](const Config& c) { return shown(c.reg); },
   [](Config& c, const std::string& v) {
     c.reg = to_double(v);
     if (c.reg < 0) throw BadValue{"must not be negative"};
   }},
  {"train-size", "N", "use the first N training images (0 = all)",
   [](const Config& c) { return std::to_string(c.train_size); },
   [](Config& c, const std::string& v) { c.train_size = to_size(v, 0); }},
  {"test-size", "N", "use the first N test images (0 = all)",
   [](const Config& c) { return std::to_string(c.test_size); },
   [](Config& c, const std::string& v) { c.test_size = to_size(v, 0); }},
  {"val-fraction", "F", "held-out tail of the training images (validation), in [0, 1)",
   [](const Config& c) { return shown(c.val_fraction); },
   [](Config& c, const std::string& v) {
     c.val_fraction = to_double(v);
     if (!(c.val_fraction >= 0 && c.val_fraction < 1)) throw BadValue{"must be in [0, 1)"};
   }},
  {"seed", "S", "seed of the initial weights and the per-epoch shuffles",
   [](const Config& c) { return std::to_string(c.seed); },
   [](Config& c, const std::string& v) { c.seed = to_u64(v); }},
  {"no-shuffle", nullptr, "batches in file order instead of shuffled every epoch",
   [](const Config& c) { return std::string(c.shuffle ? "off" : "on"); },
   [](Config& c, const std::string& v) { c.shuffle = !to_bool(v); }},
  {"gemm", "V", kGemmHelp.c_str(),
   [](const Config& c) { return c.gemm_auto ? std::string("auto") : std::to_string(c.gemm); },
   [](Config& c, const std::string& v) {
     const std::string s = trim(v);
     c.gemm_auto = s == "auto";
     if (c.gemm_auto) {
       c.gemm = gemm_default_variant();  // until train_with resolves it (train/gemm_auto.h)
       return;
     }
     if (s.empty() || std::isalpha(static_cast<unsigned char>(s[0])))
       throw BadValue{"must be auto or a variant 0.." + std::to_string(kGemmVariants - 1)};
     c.gemm = to_int32(v, 0, kGemmVariants - 1);
     if (!gemm_variant_available(c.gemm))
       throw BadValue{"variant " + v + " is not available in this build"};
   }},
  {"save", "FILE", "write a checkpoint (weights + training state) after every epoch and at the end",
   [](const Config& c) { return or_none(c.save); },
   [](Config& c, const std::string& v) { c.save = to_path(v); }},
  {"resume", nullptr, "with --save FILE: continue the run saved in FILE if it exists (else start "
   "fresh); the same command line serves every restart",
   [](const Config& c) { return std::string(c.resume ? "on" : "off"); },
   [](Config& c, const std::string& v) { c.resume = to_bool(v); }},
  {"save-every", "K", "with --save: also save every K steps (0 = at epoch ends only)",
   [](const Config& c) { return std::to_string(c.save_every); },
   [](Config& c, const std::string& v) { c.save_every = to_size(v, 0); }},
  {"load", "FILE", "start from this checkpoint instead of fresh weights",
   [](const Config& c) { return or_none(c.load); },
   [](Config& c, const std::string& v) { c.load = to_path(v); }},
  {"verify", nullptr, "replay the run on the CPU reference (Armadillo), compare",
   [](const Config& c) { return std::string(c.verify ? "on" : "off"); },
   [](Config& c, const std::string& v) { c.verify = to_bool(v); }},
  {"metrics", "FILE", "write per-epoch metrics as CSV",
   [](const Config& c) { return or_none(c.metrics); },
   [](Config& c, const std::string& v) { c.metrics = to_path(v); }},
  {"print-every", "K", "print the loss every K batches (0 = off)",
   [](const Config& c) { return std::to_string(c.print_every); },
   [](Config& c, const std::string& v) { c.print_every = to_int32(v, 0, kIntMax); }},
  {"report", "FILE", "write a JSON performance report (phase times, FLOPs, bytes, roofline)",
   [](const Config& c) { return or_none(c.report); },
   [](Config& c, const std::string& v) { c.report = to_path(v); }},
  {"profile", nullptr, "MPI_Barrier + cudaDeviceSynchronize between phases: attributable "
   "phase times, but it perturbs the timings",
   [](const Config& c) { return std::string(c.profile ? "on" : "off"); },
   [](Config& c, const std::string& v) { c.profile = to_bool(v); }},
  {"strategy", "S", "allreduce | ps (Send/Recv parameter server on rank 0) | model "
   "(model parallel: hidden units split over the ranks)",
   [](const Config& c) { return std::string(strategy_name(c.strategy)); },
   [](Config& c, const std::string& v) {
     const std::string s = trim(v);
     if (s == "allreduce") c.strategy = Strategy::Allreduce;
     else if (s == "ps") c.strategy = Strategy::ParamServer;
     else if (s == "model") c.strategy = Strategy::Model;
     else throw BadValue{s.empty() ? "missing value" : "must be allreduce, ps or model"};
   }},
  {"no-overlap", nullptr, "reduce the gradients after the whole backward pass instead of "
   "overlapping layer 2's reduction with the dW1 GEMM",
   [](const Config& c) { return std::string(c.overlap ? "off" : "on"); },
   [](Config& c, const std::string& v) { c.overlap = !to_bool(v); }},
  {"exchange-chunk", "BYTES", "GPU ranks, the gradient staged through host memory: layer 1's gradient "
   "in pieces of BYTES, each summed while the next is copied down and the last copied up; auto "
   "(512 KiB, docs/scaling.md) | 0 (one piece)",
   [](const Config& c) { return c.exchange_chunk == kExchangeChunkAuto ? std::string("auto") : std::to_string(c.exchange_chunk); },
   [](Config& c, const std::string& v) {
     c.exchange_chunk = trim(v) == "auto" ? kExchangeChunkAuto : to_size(v, 0, 1LL << 40);
   }},
  {"node-shared", "M", "--device cpu, --strategy allreduce, ranks on one node: one copy of the "
   "weights in shared memory, each rank steps its columns of W1 (no W1 gradient is sent); auto "
   "(where possible) | on (an error where not) | off (all-reduce the whole gradient)",
   [](const Config& c) { return std::string(node_shared_name(c.node_shared)); },
   [](Config& c, const std::string& v) {
     const std::string s = trim(v);
     if (s == "auto") c.node_shared = NodeShared::Auto;
     else if (s == "on") c.node_shared = NodeShared::On;
     else if (s == "off") c.node_shared = NodeShared::Off;
     else throw BadValue{s.empty() ? "missing value" : "must be auto, on or off"};
   }},
  {"exact", "M", "on: the weights depend on the data, the batch, the seed and the options only, not on "
   "the number of ranks or nodes or where a run was resumed (chunks of the batch summed exactly in "
   "fixed point; docs/training.md) | off (the default: a floating-point sum over the ranks)",
   [](const Config& c) { return std::string(c.exact ? "on" : "off"); },
   [](Config& c, const std::string& v) { c.exact = to_bool(v); }},
  {"comm", "M", "what sums the device gradient over the ranks: host (staged through pinned host memory "
   "to MPI) | device (device pointers to a CUDA-aware MPI) | nccl (ncclAllReduce on the GPU, no host copy)",
   [](const Config& c) { return std::string(comm_name(c.comm)); },
   [](Config& c, const std::string& v) { c.comm = to_comm(v, true); }},
  {"mpi", "M", "the older name of --comm host|device",
   [](const Config& c) { return std::string(comm_name(c.comm)); },
   [](Config& c, const std::string& v) { c.comm = to_comm(v, false); }},
  {"graph", nullptr, "capture each step's kernels between host synchronisation points as "
   "CUDA Graphs and replay them (auto: with the fused step, not on GPGPU-Sim)",
   [](const Config& c) { return std::string(graphs_name(c.graph)); },
   [](Config& c, const std::string& v) {
     c.graph = to_bool(v) ? Graphs::On : Graphs::Off;  // `graph = false` in a file: never
   }},
  {"no-graph", nullptr, "never capture CUDA Graphs (launch every kernel from the host)",
   [](const Config& c) { return std::string(c.graph == Graphs::Off ? "on" : "off"); },
   [](Config& c, const std::string& v) {
     if (to_bool(v)) c.graph = Graphs::Off;
     else if (c.graph == Graphs::Off) c.graph = Graphs::Auto;
   }},
  {"fused", "M", "--device gpu: the step as five fused kernels, the batch gathered from the resident "
   "images once a step, the loss kept on the device until the epoch ends; auto (with --gemm 4 or 5, data parallel) | "
   "on (an error where it cannot) | off (the separate kernels, for comparison)",
   [](const Config& c) { return std::string(fused_name(c.fused)); },
   [](Config& c, const std::string& v) {
     const std::string s = trim(v);
     if (s == "auto") c.fused = Fused::Auto;
     else if (s == "on") c.fused = Fused::On;
     else if (s == "off") c.fused = Fused::Off;
     else throw BadValue{s.empty() ? "missing value" : "must be auto, on or off"};
   }},
  {"persistent", "M", "with the fused step at one rank: runs of steps as one cooperative launch each, "
   "two grid barriers a step; on (an error where it cannot) | off (a graph replay a step) | auto (as "
   "measured where kernels/gemm/auto_table.h has this GPU class and shape, elsewhere where its plan "
   "predicts it faster than the fused step on this GPU)",
   [](const Config& c) { return std::string(persistent_name(c.persistent)); },
   [](Config& c, const std::string& v) {
     const std::string s = trim(v);
     if (s == "auto") c.persistent = Persistent::Auto;
     else if (s == "on") c.persistent = Persistent::On;
     else if (s == "off") c.persistent = Persistent::Off;
     else throw BadValue{s.empty() ? "missing value" : "must be auto, on or off"};
   }},
  {"timeout", "SEC", "end the job (exit code 6) when a step takes over SEC s (setup and the "
   "first step: max(4 SEC, 120)), naming the MPI call it waits in (0 = off)",
   [](const Config& c) { return shown(c.timeout); },
   [](Config& c, const std::string& v) { c.timeout = to_double(v, 0, 1e7); }},
  {"device", "D", "gpu (the CUDA device; the SIMT emulator in the emulator build) | cpu (the "
   "host's cores with BLAS, no emulator, in either build)",
   [](const Config& c) { return std::string(device_name(c.device)); },
   [](Config& c, const std::string& v) {
     const std::string s = trim(v);
     if (s == "gpu") c.device = Device::Gpu;
     else if (s == "cpu") c.device = Device::Cpu;
     else throw BadValue{s.empty() ? "missing value" : "must be gpu or cpu"};
   }},
  {"cpu-gemm", "LIB", "with --device cpu: the GEMM library, auto (oneDNN for float where the build has "
   "it, else OpenBLAS) | openblas | onednn (float only); make peer and make cpu-gemm-lab compare them",
   [](const Config& c) { return std::string(cpu_gemm_name(c.cpu_gemm)); },
   [](Config& c, const std::string& v) {
     const std::string s = trim(v);
     if (s == "auto") c.cpu_gemm = CpuGemm::Auto;
     else if (s == "openblas") c.cpu_gemm = CpuGemm::OpenBLAS;
     else if (s == "onednn") c.cpu_gemm = CpuGemm::OneDNN;
     else throw BadValue{s.empty() ? "missing value" : "must be auto, openblas or onednn"};
   }},
};
// clang-format on
constexpr std::size_t kNumSpecs = std::size(kSpecs);

const Spec* find_spec(std::string_view key) {
  for (const Spec& s : kSpecs)
    if (key == s.name) return &s;
  return nullptr;
}

const char* const kFooter =
    "--config FILE holds the same options as `key = value` lines, keys being the long\n"
    "names without dashes (`hidden = 512`, `no-shuffle = true`); `#` starts a comment.\n"
    "Options given on the command line override those in the file.";

// Where CLI11 stores the raw command line; converted by the Spec setters afterwards.
struct Raw {
  std::array<std::string, kNumSpecs> value;
  std::array<bool, kNumSpecs> flag{};
  std::array<CLI::Option*, kNumSpecs> opt{};
  std::string config;
  CLI::Option* config_opt = nullptr;
};

// The command line's defaults: Config's, except that the GEMM variant is --gemm auto (the
// measured table, train/gemm_auto.h); a Config built in code keeps the variant it names.
Config command_line_defaults() {
  Config c;
  c.gemm_auto = true;
  return c;
}

void build_app(CLI::App& app, Raw& raw) {
  app.name("nn_train");
  app.description("nn_train: two-layer MNIST network (784-H-10), data-parallel CUDA+MPI trainer");
  app.footer(kFooter);
  app.set_help_flag("-h,--help", "print this help and exit");
  app.get_formatter()->column_width(20);
  // Unknown options and stray arguments are collected and reported by us, in order.
  app.allow_extras(true);
  const Config defaults = command_line_defaults();
  for (std::size_t i = 0; i < kNumSpecs; ++i) {
    const Spec& s = kSpecs[i];
    const std::string help = std::string(s.help) + " [default: " + s.shown_default(defaults) + "]";
    if (s.value) {
      // The last occurrence wins, so `make run RUN_ARGS='--data x'` can override the
      // Makefile's own --data.
      raw.opt[i] = app.add_option(std::string("--") + s.name, raw.value[i], help)
                       ->type_name(s.value)
                       ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else {
      raw.opt[i] = app.add_flag(std::string("--") + s.name, raw.flag[i], help);
    }
  }
  raw.config_opt =
      app.add_option("--config", raw.config, "read options from FILE (see below) [default: none]")
          ->type_name("FILE")
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// A config file key must name an option (`config` itself excepted); a near miss gets a hint.
void check_file_key(const std::string& key, const std::string& at) {
  if (find_spec(key)) return;
  if (key == "config") throw UserError(at + "a config file cannot name another (`config`)");
  std::string hint;
  std::string dashed = key;
  for (char& c : dashed)
    if (c == '_') c = '-';
  if (dashed.rfind("--", 0) == 0) dashed.erase(0, 2);
  if (dashed != key && find_spec(dashed)) hint = " (did you mean `" + dashed + "`?)";
  throw UserError(at + "unknown key `" + key + "`" + hint);
}

}  // namespace

std::string help_text() {
  CLI::App app;
  Raw raw;
  build_app(app, raw);
  return app.help();
}

ParseResult parse_config(const std::vector<std::string>& args) {
  CLI::App app;
  Raw raw;
  build_app(app, raw);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 wants them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return ParseResult{Config{}, true, app.help()};
  } catch (const CLI::ParseError& e) {
    throw UserError(std::string(e.what()) + " (see --help)");
  }
  for (const std::string& extra : app.remaining()) {
    if (!extra.empty() && extra[0] == '-' && extra != "-")
      throw UserError("unknown option " + extra + " (see --help)");
    throw UserError("unexpected argument `" + extra + "` (options only; see --help)");
  }

  ParseResult result;
  result.config = command_line_defaults();
  Config& cfg = result.config;
  // The file first (every value in it checked, even those the command line overrides),
  // then the command line on top.
  if (raw.config_opt->count() > 0) {
    try {
      cfg.config_file = to_path(raw.config);
    } catch (const BadValue& b) {
      throw UserError("--config" + (raw.config.empty() ? "" : " " + raw.config) + ": " + b.problem);
    }
    for (const ConfigLine& it : read_config_file(cfg.config_file, check_file_key)) {
      try {
        find_spec(it.key)->set(cfg, it.value);
      } catch (const BadValue& b) {
        throw UserError(cfg.config_file + ":" + std::to_string(it.line) + ": " + it.key +
                        (it.value.empty() ? "" : " = " + it.value) + ": " + b.problem);
      }
    }
  }
  for (std::size_t i = 0; i < kNumSpecs; ++i) {
    if (raw.opt[i]->count() == 0) continue;
    const Spec& s = kSpecs[i];
    const std::string value = s.value ? raw.value[i] : (raw.flag[i] ? "true" : "false");
    try {
      s.set(cfg, value);
    } catch (const BadValue& b) {
      throw UserError(std::string("--") + s.name + (value.empty() ? "" : " " + value) + ": " +
                      b.problem);
    }
  }
  return result;
}

ParseResult parse_config(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_config(args);
}

}  // namespace nn::app
