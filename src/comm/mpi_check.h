// Internal to src/comm (comm.cpp, gradients.cpp, strategies.cpp): how an MPI call's failure ends the job,
// and the largest count one MPI call takes.
#pragma once
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <cstdio>

#include "comm/comm.h"

namespace nn::comm::detail {

// A failed MPI call is an internal fault: print it on this rank and abort the whole job
// (nn_train's exit code 4, src/app/exit_codes.h), since the other ranks may be waiting in it.
inline void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  std::fprintf(stderr, "internal error: %s failed: %s\n", what, msg);
  MPI_Abort(MPI_COMM_WORLD, 4);
}

// Marks this process as waiting in a blocking MPI call (comm::waiting_in, for the step
// timeout's message) from construction to destruction. peer: the one rank it waits for, where
// the call has one (a point-to-point receive), else -1.
class Busy {
 public:
  explicit Busy(const char* call, int peer = -1);
  ~Busy();
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;

 private:
  // What was marked before, restored on destruction (calls nest: a broadcast inside scatterv).
  const char* call_;
  int peer_;
  long long since_ns_;
};

// MPI counts are int: larger blocks go in pieces of at most this many elements.
inline constexpr std::size_t kMaxCount = static_cast<std::size_t>(INT_MAX);

}  // namespace nn::comm::detail
