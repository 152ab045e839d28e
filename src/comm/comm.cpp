// Thin RAII and helper layer over MPI (the only MPI user in the project).
// Tested by tests/comm/test_comm.cpp under mpirun at 1-4 ranks.
#include "comm/comm.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace nn::comm {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  std::fprintf(stderr, "internal error: %s failed: %s\n", what, msg);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

}  // namespace

Session::Session(int* argc, char*** argv) {
  int done = 0;
  MPI_Initialized(&done);
  if (!done) check(MPI_Init(argc, argv), "MPI_Init");
}

Session::~Session() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

int rank() {
  int r = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  return r;
}

int size() {
  int n = 1;
  check(MPI_Comm_size(MPI_COMM_WORLD, &n), "MPI_Comm_size");
  return n;
}

int local_rank() {
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  int r = 0;
  check(MPI_Comm_rank(node, &r), "MPI_Comm_rank");
  MPI_Comm_free(&node);
  return r;
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  return std::string(name, static_cast<std::size_t>(len));
}

bool all_ok(bool ok) {
  int v = ok ? 1 : 0;
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD), "MPI_Allreduce");
  return v != 0;
}

void any_of_each(std::vector<int>& flags) {
  if (flags.empty()) return;
  check(MPI_Allreduce(MPI_IN_PLACE, flags.data(), static_cast<int>(flags.size()), MPI_INT, MPI_LOR,
                      MPI_COMM_WORLD),
        "MPI_Allreduce");
}

void sum(std::vector<double>& v) {
  if (v.empty()) return;
  check(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD),
        "MPI_Allreduce");
}

void sum(std::vector<float>& v) {
  if (v.empty()) return;
  check(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD),
        "MPI_Allreduce");
}

std::uint64_t sum(std::uint64_t value) {
  check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
  return value;
}

std::string broadcast(const std::string& s) {
  unsigned long long n = s.size();
  check(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast");
  std::string out = s;
  out.resize(n);
  if (n > 0)
    check(MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
  return out;
}

void barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

}  // namespace nn::comm
