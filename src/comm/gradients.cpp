// The gradient's sums over the ranks, the exchange engines' MPI calls (src/exchange): MPI_Allreduce,
// blocking (allreduce_sum) or not (iallreduce_sum: a Request that an engine tests and waits for,
// so layer 2's sum runs while layer 1 is still copied), and the parameter server's
// MPI_Send/MPI_Recv (ps_sum); each for float, double and 64-bit unsigned integers. In place, on
// host (or pinned) memory, or device memory with a CUDA-aware MPI (mpi_buffer.h). Each function
// makes its MPI calls itself. Tested by tests/comm/test_comm.cpp and test_strategies.cpp at 1-4
// ranks, through the engines (tests/exchange) and the trainer (tests/train).
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "comm/comm.h"
#include "comm/mpi_buffer.h"
#include "comm/mpi_check.h"

namespace nn::comm {

using detail::check;
using detail::kMaxCount;

namespace {
template <class V>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<V, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<V, double>) return MPI_DOUBLE;
  else {
    static_assert(std::is_same_v<V, std::uint64_t>, "the gradient's sums take float, double or uint64_t");
    return MPI_UINT64_T;
  }
}
}  // namespace

struct Request::Impl {
  std::vector<MPI_Request> reqs;
};

Request::Request() = default;
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

Request::Impl& Request::impl() {
  if (!impl_) impl_ = std::make_unique<Impl>();
  return *impl_;
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

// MPI counts are ints: longer buffers go in pieces of at most INT_MAX elements.
template <class V>
Request allreduce_sum(V* buf, std::size_t n) {
  for (std::size_t done = 0; done < n;) {
    const std::size_t m = std::min(kMaxCount, n - done);
    check((detail::Busy("MPI_Allreduce"), MPI_Allreduce(MPI_IN_PLACE, detail::mpi_buffer(buf + done), static_cast<int>(m),
                                                        mpi_type<V>(), MPI_SUM, MPI_COMM_WORLD)),
          "MPI_Allreduce");
    done += m;
  }
  return {};
}

// One request per piece; every rank cuts the same pieces, so they pair up.
template <class V>
Request iallreduce_sum(V* buf, std::size_t n) {
  Request r;
  for (std::size_t done = 0; done < n;) {
    const std::size_t m = std::min(kMaxCount, n - done);
    MPI_Request q;
    check(MPI_Iallreduce(MPI_IN_PLACE, detail::mpi_buffer(buf + done), static_cast<int>(m), mpi_type<V>(), MPI_SUM,
                         MPI_COMM_WORLD, &q),
          "MPI_Iallreduce");
    r.impl().reqs.push_back(q);
    done += m;
  }
  return r;
}

template <class V>
Request ps_sum(V* buf, std::size_t n) {
  int p = 1, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (p == 1 || n == 0) return {};
  if (n > kMaxCount) throw std::length_error("ps_sum: more than INT_MAX values");
  const int count = static_cast<int>(n);
  constexpr int kTagUp = 71, kTagDown = 72;
  if (r != 0) {
    check((detail::Busy("MPI_Send", 0), MPI_Send(detail::mpi_buffer(buf), count, mpi_type<V>(), 0, kTagUp, MPI_COMM_WORLD)),
          "MPI_Send");
    check((detail::Busy("MPI_Recv", 0), MPI_Recv(detail::mpi_buffer(buf), count, mpi_type<V>(), 0, kTagDown, MPI_COMM_WORLD, MPI_STATUS_IGNORE)),
          "MPI_Recv");
    return {};
  }
  // The server: rank order, not MPI_ANY_SOURCE, so the sum's rounding never depends on
  // which worker happened to finish first.
  std::vector<V> incoming(n);
  for (int q = 1; q < p; ++q) {
    check((detail::Busy("MPI_Recv", q), MPI_Recv(incoming.data(), count, mpi_type<V>(), q, kTagUp, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE)),
          "MPI_Recv");
    for (std::size_t i = 0; i < n; ++i) buf[i] += incoming[i];
  }
  for (int q = 1; q < p; ++q)
    check((detail::Busy("MPI_Send", q), MPI_Send(detail::mpi_buffer(buf), count, mpi_type<V>(), q, kTagDown, MPI_COMM_WORLD)),
          "MPI_Send");
  return {};
}

#define NN_INSTANTIATE(V)                                      \
  template Request allreduce_sum<V>(V*, std::size_t);         \
  template Request iallreduce_sum<V>(V*, std::size_t);        \
  template Request ps_sum<V>(V*, std::size_t);
NN_INSTANTIATE(float)
NN_INSTANTIATE(double)
NN_INSTANTIATE(std::uint64_t)
#undef NN_INSTANTIATE

}  // namespace nn::comm
