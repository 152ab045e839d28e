// run_training (run.h): load, train, report, exit code.
#include "app/run.h"

#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "app/exit_codes.h"
#include "comm/comm.h"
#include "common/errors.h"
#include "common/nn_real.h"
#include "io/idx.h"
#include "train/agree.h"
#include "train/plan.h"
#include "train/trainer.h"
#include "train/util.h"
#include "train/watchdog.h"

namespace nn::app {

using namespace ::nn::train;  // the training side's names: Config and its enums, train_on, the stop flag

int run_training(const Config& cfg) { return run_training(cfg, stdout); }

int run_training(const Config& cfg, std::FILE* out) {
  const auto t0 = Clock::now();
  const bool root = comm::rank() == 0;
  try {
    validate(cfg);  // before reading 50 MB of images for nothing
    // --timeout: from here to the end of the last step (watchdog.h).
    std::optional<Watchdog> watchdog;
    if (cfg.timeout > 0) watchdog.emplace(cfg.timeout, comm::rank(), comm::processor_name(), kExitTimeout);
    struct Installed {
      explicit Installed(Watchdog* w) { set_watchdog(w); }
      ~Installed() { set_watchdog(nullptr); }
    } installed(watchdog ? &*watchdog : nullptr);
    watch("setup (loading and scattering the data)", true);
    HostData data;
    on_root([&] {
      std::error_code ec;
      const auto dir = std::filesystem::canonical(cfg.data, ec);
      if (ec) throw UserError(cfg.data + ": data directory not found (run `make data`)");
      data.train = {};
      io::Dataset tr = io::load_split(dir.string(), "train", kInputDim);
      io::Dataset te = io::load_split(dir.string(), "t10k", kInputDim);
      data.train.images = std::move(tr.images.pixels);
      data.train.labels = std::move(tr.labels);
      data.test.images = std::move(te.images.pixels);
      data.test.labels = std::move(te.labels);
      data.source = dir.string() == cfg.data ? cfg.data : cfg.data + " -> " + dir.string();
    });
    const TrainResult res = train_on<nn_real>(cfg, data, out);
    if (res.stopped) {
      if (root && out) {
        if (cfg.save.empty())
          std::fprintf(out, "stopped by a signal after %llu steps; nothing saved (no --save)\n",
                       (unsigned long long)res.steps);
        else
          std::fprintf(out, "stopped by a signal after %llu steps; state saved to %s: run the same command "
                       "with --resume to continue (exit code %d)\n", (unsigned long long)res.steps,
                       cfg.save.c_str(), kExitStopped);
        std::fflush(out);
      }
      return kExitStopped;
    }
    if (root && out) {
      std::fprintf(out, "total time: %.2f s\n", since(t0));
      std::fflush(out);
    }
    return res.verify.ok() ? kExitOk : kExitVerifyFailed;
  } catch (const Diverged& e) {
    if (root) std::fprintf(stderr, "error: %s\n", e.what());
    return kExitDiverged;
  } catch (const UserError& e) {
    // Thrown on every rank alike (on_root / all_ranks_ok / validate): one line, from rank 0.
    if (root) std::fprintf(stderr, "error: %s\n", e.what());
    return kExitUserError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error on rank %d: %s\n", comm::rank(), e.what());
    comm::abort_job(kExitInternal);
  }
}

}  // namespace nn::app
