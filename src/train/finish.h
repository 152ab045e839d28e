// The end of a run (finish.cpp): the --device cpu BLAS bound, the --report JSON, the final
// parameters, test precision, the files, the --verify replay; or the save after a stop signal.
// Internal to src/train.
#pragma once
#include <nlohmann/json.hpp>

#include "train/run.h"

namespace nn::train {

// --device cpu: every rank times its step's library GEMMs at once; rank 0 prints the bound.
template <class T, class Model>
void measure_blas_bound(Run<T, Model>& R);

// --report / --profile: rank 0's JSON report (report.h), its summary on R.out; the --graph line.
template <class T, class Model>
nlohmann::ordered_json performance_report(Run<T, Model>& R);

// A signal stopped the run: save where it stands, close the metrics file, the result.
template <class T, class Model>
void stop_run(Run<T, Model>& R);

// Test precision, the files (metrics closed, --save, --report), the --verify replay.
template <class T, class Model>
void finish_run(Run<T, Model>& R, const nlohmann::ordered_json& report);

}  // namespace nn::train
