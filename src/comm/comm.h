// The communication layer: the only code in the project that calls MPI.
// Session owns MPI_Init/Finalize; the helpers reduce and broadcast plain values.
// Tested by tests/comm/test_comm.cpp at 1-4 ranks (make test).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nn::comm {

// RAII MPI session. Constructing it initialises MPI (once per process); destroying it
// finalises. Errors inside MPI abort the job (MPI_ERRORS_ARE_FATAL), as an internal fault.
class Session {
 public:
  Session(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

int rank();
int size();
// Rank within the node (MPI_COMM_TYPE_SHARED): the index to choose a GPU with.
int local_rank();
std::string processor_name();

// True on every rank iff `ok` is true on every rank.
bool all_ok(bool ok);
// Element-wise logical OR over ranks, in place (all ranks pass the same length).
void any_of_each(std::vector<int>& flags);
// Sums over ranks, in place.
void sum(std::vector<double>& values);
void sum(std::vector<float>& values);
std::uint64_t sum(std::uint64_t value);
// Rank 0's string reaches every rank.
std::string broadcast(const std::string& s);
void barrier();
// Ends the whole job at once (internal fault on one rank).
[[noreturn]] void abort_job(int code);

}  // namespace nn::comm
