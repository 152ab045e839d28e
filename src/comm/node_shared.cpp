// Memory shared by the ranks of one node (comm::NodeShared, comm::one_node): an MPI-3 shared
// window (MPI_Win_allocate_shared) held in a lock_all epoch for its whole life, so loads and
// stores are plain memory accesses and sync() is the only MPI call per use. Used by the host
// model's node-shared step (--device cpu, src/train/step.cpp). Tested by
// tests/comm/test_node_shared.cpp at 1-4 ranks.
#include <mpi.h>

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <vector>

#include "comm/comm.h"
#include "comm/mpi_check.h"

namespace nn::comm {
using detail::check;

bool one_node() { return local_size() == size(); }

struct NodeShared::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Win win = MPI_WIN_NULL;
  std::vector<void*> parts;
};

NodeShared::NodeShared(std::size_t bytes) : impl_(std::make_unique<Impl>()) {
  // The node's communicator, ranks in MPI_COMM_WORLD's order (key = world rank).
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &impl_->comm),
        "MPI_Comm_split_type");
  int n = 0;
  check(MPI_Comm_size(impl_->comm, &n), "MPI_Comm_size");
  check(MPI_Comm_rank(impl_->comm, &my_rank_), "MPI_Comm_rank");
  if (n != size()) {
    MPI_Comm_free(&impl_->comm);
    throw std::runtime_error("NodeShared: the ranks are not all on one node");
  }
  // Whole pages, plus one: Open MPI puts a header in front of the first part (measured: parts
  // began 264 bytes into a page), so each part is aligned up to its first page boundary.
  // The offset within a page is the same in every process (each maps the segment page-aligned).
  constexpr std::size_t kPage = 4096;
  const std::size_t padded = bytes == 0 ? 0 : (bytes + kPage - 1) / kPage * kPage + kPage;
  MPI_Info info;
  check(MPI_Info_create(&info), "MPI_Info_create");
  // Each rank's part on its own pages (first touch by its owner; no false sharing between parts).
  check(MPI_Info_set(info, "alloc_shared_noncontig", "true"), "MPI_Info_set");
  void* base = nullptr;
  {
    detail::Busy busy("MPI_Win_allocate_shared");
    check(MPI_Win_allocate_shared(static_cast<MPI_Aint>(padded), 1, info, impl_->comm, &base, &impl_->win),
          "MPI_Win_allocate_shared");
  }
  MPI_Info_free(&info);
  impl_->parts.resize(std::size_t(n));
  for (int q = 0; q < n; ++q) {
    MPI_Aint got = 0;
    int unit = 0;
    void* p = nullptr;
    check(MPI_Win_shared_query(impl_->win, q, &got, &unit, &p), "MPI_Win_shared_query");
    const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(p);
    impl_->parts[std::size_t(q)] = got > 0 ? reinterpret_cast<void*>((at + kPage - 1) / kPage * kPage) : nullptr;
  }
  check(MPI_Win_lock_all(MPI_MODE_NOCHECK, impl_->win), "MPI_Win_lock_all");
}

NodeShared::~NodeShared() {
  if (!impl_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI is gone: the OS takes the pages back
  // MPI_Win_free is collective: a rank unwinding from an error of its own would wait there
  // for ranks that are still training (they end when it aborts the job). Leave the window.
  if (std::uncaught_exceptions() > 0) return;
  MPI_Win_unlock_all(impl_->win);
  {
    detail::Busy busy("MPI_Win_free");
    MPI_Win_free(&impl_->win);
  }
  MPI_Comm_free(&impl_->comm);
}

void* NodeShared::of(int q) const {
  if (q < 0 || std::size_t(q) >= impl_->parts.size()) throw std::out_of_range("NodeShared::of: no such rank");
  return impl_->parts[std::size_t(q)];
}

void NodeShared::fence() const { check(MPI_Win_sync(impl_->win), "MPI_Win_sync"); }

void NodeShared::sync() const {
  check(MPI_Win_sync(impl_->win), "MPI_Win_sync");
  check((detail::Busy("MPI_Barrier"), MPI_Barrier(impl_->comm)), "MPI_Barrier");
  check(MPI_Win_sync(impl_->win), "MPI_Win_sync");
}

}  // namespace nn::comm
