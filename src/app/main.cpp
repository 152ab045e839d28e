// nn_train's entry point: MPI session, options (src/app/options.cpp), then the
// data-parallel trainer (src/train/trainer.cpp), which prints everything on rank 0.
// Run: `make run`, or mpirun -np P build/cpu/bin/nn_train --help. The options are tested by
// tests/app/test_options.cpp, the trainer by tests/train/; this file by running it.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "app/exit_codes.h"
#include "app/options.h"
#include "app/run.h"
#include "app/signals.h"
#include "comm/comm.h"
#include "common/errors.h"
#include "io/idx.h"

namespace {

enum class Parsed { kRun, kHelp, kFailed };

// Every rank parsed the same arguments, so the verdicts should agree; one flag per rank
// makes sure of it (a --config file that only some nodes can read), so that no rank
// trains while another has already left. Help anywhere means help everywhere.
Parsed agree_on_parse(const std::string& my_error, bool my_help) {
  const int rank = nn::comm::rank();
  const auto n = static_cast<std::size_t>(nn::comm::size());
  std::vector<int> flags(n + 1, 0);  // [r]: rank r failed; [n]: some rank asked for help
  flags[static_cast<std::size_t>(rank)] = my_error.empty() ? 0 : 1;
  flags[n] = my_help ? 1 : 0;
  nn::comm::any_of_each(flags);
  int first = -1;
  for (std::size_t r = 0; r < n && first < 0; ++r)
    if (flags[r]) first = static_cast<int>(r);
  if (first < 0) return flags[n] ? Parsed::kHelp : Parsed::kRun;
  // One line: rank 0's message, or the first failing rank's if rank 0 parsed fine.
  if (rank == first) {
    const std::string who = rank == 0 ? "" : "rank " + std::to_string(rank) + ": ";
    std::fprintf(stderr, "error: %s%s\n", who.c_str(), my_error.c_str());
  }
  return Parsed::kFailed;
}

}  // namespace

int main(int argc, char** argv) {
  // First thing, so a SIGTERM / SIGUSR1 during start-up stops the run after its first step
  // (saved) instead of killing it; trainer.h describes the protocol.
  nn::app::install_stop_signals();
  nn::comm::Session mpi(&argc, &argv);
  const int rank = nn::comm::rank();

  nn::app::ParseResult opts;
  std::string parse_error;
  try {
    opts = nn::app::parse_config(argc, argv);
  } catch (const nn::UserError& e) {
    parse_error = e.what();
  }
  switch (agree_on_parse(parse_error, opts.help)) {
    case Parsed::kFailed:
      return nn::app::kExitBadOptions;
    case Parsed::kHelp:
      if (rank == 0) std::fputs(nn::app::help_text().c_str(), stdout);
      return 0;
    case Parsed::kRun:
      break;
  }

  try {
    // run_training reports user errors itself, the same on every rank (exit 1).
    return nn::app::run_training(opts.config);
  } catch (const std::exception& e) {
    // Whatever escapes may have escaped on this rank only, while the others wait in a
    // collective: end the whole job rather than hang. A user error that escapes is still
    // reported as one, with its exit code.
    const bool user = dynamic_cast<const nn::UserError*>(&e) != nullptr ||
                      dynamic_cast<const nn::io::IdxError*>(&e) != nullptr;
    if (user)
      std::fprintf(stderr, "error: %s\n", e.what());
    else
      std::fprintf(stderr, "internal error on rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    if (user && nn::comm::size() == 1) return 1;  // alone, nobody can be left waiting
    nn::comm::abort_job(user ? nn::app::kExitUserError : nn::app::kExitInternal);
  } catch (...) {
    std::fprintf(stderr, "internal error on rank %d: unknown exception\n", rank);
    nn::comm::abort_job(nn::app::kExitInternal);
  }
}
