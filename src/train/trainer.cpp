// The data-parallel (and model-parallel) training run, put together from its pieces
// (docs/architecture.md walks them):
//   setup.cpp   the Run (run.h): plan (plan.h, resume.h) on rank 0, device (devices.h), shards
//               scattered once, the step chosen
//   epoch.cpp   train_epochs -> run_epoch -> take_steps -> the step (step.cpp); end_epoch
//   finish.cpp  the BLAS bound, --report, test precision, files, --verify (verify.h)
// The pieces use only the model interface (model/model.h), so DeviceModel and CpuModel are
// two instantiations of train_with. Tested by tests/train at 1-4 ranks.
#include "train/trainer.h"

#include <type_traits>
#include <utility>

#include "common/errors.h"
#include "train/epoch.h"
#include "train/finish.h"
#include "train/gemm_auto.h"
#include "train/run.h"
#include "train/watchdog.h"

namespace nn::train {

namespace {

// The whole run with model type Model (DeviceModel<T>, or another with its public API).
template <class T, class Model>
TrainResult train_with(const Config& asked, const HostData& data, std::FILE* out) {
  Config cfg = asked;  // with --cpu-gemm and --gemm auto resolved: the header and report name what is used
  if (asked.device == Device::Cpu) cfg.cpu_gemm = resolved_cpu_gemm(asked.cpu_gemm, std::is_same_v<T, double>);
  resolve_gemm_auto(cfg, std::is_same_v<T, double>);  // --gemm auto: the variant, on every rank (collective)
  validate(cfg);
  if constexpr (kOnHost<Model> && std::is_same_v<T, double>)
    if (cfg.cpu_gemm == model::CpuGemm::OneDNN)
      throw UserError("--cpu-gemm onednn computes in float; this build trains in double (USE_DOUBLE=1)");
  Run<T, Model> R(cfg, data, out);
  if (R.out) print_header(R.out, cfg, data, R.setup);
  open_metrics(R);
  train_epochs(R);
  unwatch();  // the verification and the report are not timed (watchdog.h)
  if (R.progress.stop) {
    stop_run(R);
  } else {
    measure_blas_bound(R);
    finish_run(R, performance_report(R));
  }
  if (R.out && R.progress.result.saves)
    std::fprintf(R.out, "saves: %zu during training, %.1f ms each on average (rank 0)\n", R.progress.result.saves,
                 1e3 * R.progress.result.save_seconds / double(R.progress.result.saves));
  return std::move(R.progress.result);
}

}  // namespace

template <class T>
TrainResult train_on(const Config& cfg, const HostData& data, std::FILE* out) {
  if (cfg.device == Device::Cpu) return train_with<T, CpuModel<T>>(cfg, data, out);
  return train_with<T, DeviceModel<T>>(cfg, data, out);
}

template TrainResult train_on<float>(const Config&, const HostData&, std::FILE*);
template TrainResult train_on<double>(const Config&, const HostData&, std::FILE*);

}  // namespace nn::train
