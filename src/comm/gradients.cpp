// The gradient's sums over the ranks, the data-parallel step's MPI calls (src/train/step.cpp):
// MPI_Allreduce, blocking (allreduce_sum) or not (iallreduce_sum: a Request that the step tests
// and waits for, so layer 2's sum runs while layer 1 is still copied), and the parameter server's
// MPI_Send/MPI_Recv (ps_sum). In place, on host (or pinned) memory, or device memory with a
// CUDA-aware MPI (mpi_buffer.h). Tested by tests/comm/test_comm.cpp and test_strategies.cpp at
// 1-4 ranks and through the trainer (tests/train).
#include <mpi.h>

#include <algorithm>
#include <cstddef>
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

// MPI counts are ints: longer buffers go in pieces of at most INT_MAX elements.
template <class T>
void allreduce_sum_impl(T* buf, std::size_t n, MPI_Datatype type) {
  for (std::size_t done = 0; done < n;) {
    const std::size_t m = std::min(kMaxCount, n - done);
    check((detail::Busy("MPI_Allreduce"), MPI_Allreduce(MPI_IN_PLACE, detail::mpi_buffer(buf + done), static_cast<int>(m), type,
                        MPI_SUM, MPI_COMM_WORLD)),
          "MPI_Allreduce");
    done += m;
  }
}

}  // namespace

void allreduce_sum(float* buf, std::size_t n) { allreduce_sum_impl(buf, n, MPI_FLOAT); }
void allreduce_sum(double* buf, std::size_t n) { allreduce_sum_impl(buf, n, MPI_DOUBLE); }

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

}  // namespace nn::comm
