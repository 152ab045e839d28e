// nn_train's stop signals: SIGTERM (Slurm's preemption and `scancel`) and SIGUSR1 (sbatch
// --signal) ask the run to stop after its current step and save (src/train/stop.h has the
// protocol). main installs them first thing.
#pragma once

namespace nn::app {

void install_stop_signals();
void restore_stop_signals();  // the handlers from before install_stop_signals (tests)

}  // namespace nn::app
