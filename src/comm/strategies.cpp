// The gradient-exchange primitives of the communication strategies: non-blocking allreduce
// (overlap), the Send/Recv parameter server, gathering model-parallel slices, and the
// CUDA-aware-MPI query. Still src/comm, still the only MPI user. Tested by
// tests/comm/test_strategies.cpp at 1-4 ranks and through the trainer (tests/train).
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "comm/comm.h"
#include "comm/mpi_buffer.h"
#include "comm/mpi_check.h"

namespace nn::comm {
namespace {

using detail::check;
using detail::kMaxCount;



template <class T>
MPI_Datatype mpi_type() {
  return sizeof(T) == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT;
}

}  // namespace

struct Request::Impl {
  std::vector<MPI_Request> reqs;
};

Request::Request() : impl_(std::make_unique<Impl>()) {}
Request::~Request() {
  if (impl_) wait();
}
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&& o) noexcept {
  if (this != &o) {
    if (impl_) wait();
    impl_ = std::move(o.impl_);
  }
  return *this;
}

bool Request::test() {
  if (!impl_ || impl_->reqs.empty()) return true;
  int done = 0;
  check(MPI_Testall(static_cast<int>(impl_->reqs.size()), impl_->reqs.data(), &done,
                    MPI_STATUSES_IGNORE),
        "MPI_Testall");
  if (done) impl_->reqs.clear();
  return done != 0;
}

void Request::wait() {
  if (!impl_ || impl_->reqs.empty()) return;
  check((detail::Busy("MPI_Waitall (of MPI_Iallreduce)"), MPI_Waitall(static_cast<int>(impl_->reqs.size()), impl_->reqs.data(), MPI_STATUSES_IGNORE)),
        "MPI_Waitall");
  impl_->reqs.clear();
}

namespace {
template <class T>
Request iallreduce_impl(T* buf, std::size_t n) {
  Request r;
  // One request per piece; every rank cuts the same pieces, so they pair up.
  for (std::size_t done = 0; done < n;) {
    const std::size_t m = std::min(kMaxCount, n - done);
    MPI_Request q;
    check(MPI_Iallreduce(MPI_IN_PLACE, detail::mpi_buffer(buf + done), static_cast<int>(m), mpi_type<T>(), MPI_SUM,
                         MPI_COMM_WORLD, &q),
          "MPI_Iallreduce");
    r.impl().reqs.push_back(q);
    done += m;
  }
  return r;
}
}  // namespace

Request iallreduce_sum(float* buf, std::size_t n) { return iallreduce_impl(buf, n); }
Request iallreduce_sum(double* buf, std::size_t n) { return iallreduce_impl(buf, n); }

namespace {
template <class T>
void ps_sum_impl(T* buf, std::size_t n) {
  int p = 1, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (p == 1 || n == 0) return;
  if (n > kMaxCount) throw std::length_error("ps_sum: more than INT_MAX values");
  const int count = static_cast<int>(n);
  constexpr int kTagUp = 71, kTagDown = 72;
  if (r != 0) {
    check((detail::Busy("MPI_Send", 0), MPI_Send(detail::mpi_buffer(buf), count, mpi_type<T>(), 0, kTagUp, MPI_COMM_WORLD)),
          "MPI_Send");
    check((detail::Busy("MPI_Recv", 0), MPI_Recv(detail::mpi_buffer(buf), count, mpi_type<T>(), 0, kTagDown, MPI_COMM_WORLD, MPI_STATUS_IGNORE)),
          "MPI_Recv");
    return;
  }
  // The server: rank order, not MPI_ANY_SOURCE, so the sum's rounding never depends on
  // which worker happened to finish first.
  std::vector<T> incoming(n);
  for (int q = 1; q < p; ++q) {
    check((detail::Busy("MPI_Recv", q), MPI_Recv(incoming.data(), count, mpi_type<T>(), q, kTagUp, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE)),
          "MPI_Recv");
    for (std::size_t i = 0; i < n; ++i) buf[i] += incoming[i];
  }
  for (int q = 1; q < p; ++q)
    check((detail::Busy("MPI_Send", q), MPI_Send(detail::mpi_buffer(buf), count, mpi_type<T>(), q, kTagDown, MPI_COMM_WORLD)),
          "MPI_Send");
}
}  // namespace

void ps_sum(float* buf, std::size_t n) { ps_sum_impl(buf, n); }
void ps_sum(double* buf, std::size_t n) { ps_sum_impl(buf, n); }

std::vector<double> gather_to_root(const std::vector<double>& mine) {
  int p = 1, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (mine.size() > kMaxCount) throw std::length_error("gather_to_root: more than INT_MAX values");
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(r == 0 ? p : 0), displs(r == 0 ? p : 0);
  check((detail::Busy("MPI_Gather"), MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD)), "MPI_Gather");
  std::vector<double> all;
  if (r == 0) {
    long long total = 0;
    for (int q = 0; q < p; ++q) {
      if (total > INT_MAX) throw std::length_error("gather_to_root: more than INT_MAX values");
      displs[q] = static_cast<int>(total);
      total += counts[q];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  check((detail::Busy("MPI_Gatherv"), MPI_Gatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                    0, MPI_COMM_WORLD)),
        "MPI_Gatherv");
  return all;
}

std::string device_pointer_support() {
#ifdef SIM_EMULATOR
  const char* v = std::getenv("SIM_MPI_CUDA_AWARE");
  if (v && std::strcmp(v, "0") == 0)
    return "SIM_MPI_CUDA_AWARE=0 makes the emulator build pretend MPI is not CUDA-aware";
  return "";
#elif defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  if (MPIX_Query_cuda_support() == 1) return "";
  return "this Open MPI was built with CUDA support, but it is not available at run time "
         "(MPIX_Query_cuda_support() = 0)";
#else
  return "this MPI library does not report CUDA support (no MPIX_CUDA_AWARE_SUPPORT in "
         "<mpi-ext.h>): use a CUDA-aware Open MPI build, or --mpi host";
#endif
}

}  // namespace nn::comm
