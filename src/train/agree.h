// Rank-wide verdicts: a user error found on one rank (rank 0 reading a file, a rank with no
// GPU) becomes the same nn::UserError on every rank, so no rank is left waiting in a
// collective that another never enters, and rank 0 prints it once (src/app/run.cpp).
// Internal to src/train; exercised by tests/train and tests/cli/bad_input.sh.
#pragma once
#include <string>
#include <vector>

#include "comm/comm.h"
#include "common/errors.h"
#include "io/idx.h"

namespace nn::train {

// Runs fn on rank 0. A user error there reaches every rank as the same nn::UserError, so no
// rank is left waiting in a collective that rank 0 never enters.
template <class F>
void on_root(F&& fn) {
  std::string err;  // "E<message>" on failure: an exception may carry an empty message
  if (comm::rank() == 0) {
    try {
      fn();
    } catch (const UserError& e) {
      err = std::string("E") + e.what();
    } catch (const io::IdxError& e) {
      err = std::string("E") + e.what();
    }
  }
  err = comm::broadcast(err);
  if (!err.empty()) throw UserError(err.substr(1));
}

// A problem one rank may find alone (no GPU on its node): the first one, by rank, becomes
// the same nn::UserError on every rank.
inline void all_ranks_ok(const std::string& local_problem) {
  std::string first;
  const std::vector<std::string> all = comm::gather_strings(local_problem);
  for (std::size_t r = 0; r < all.size() && first.empty(); ++r)
    if (!all[r].empty()) first = "E rank " + std::to_string(r) + ": " + all[r];
  first = comm::broadcast(first);
  if (!first.empty()) throw UserError(first.substr(2));
}

}  // namespace nn::train
