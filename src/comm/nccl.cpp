// The job's NCCL communicator (nccl.h): made from MPI, used by --comm nccl's engine
// (src/exchange/nccl.h) and by --exact on's word sums under it.
#include "comm/nccl.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/check.h"
#include "common/errors.h"
#include "comm/mpi_check.h"

#if defined(SIM_EMULATOR) || defined(NN_HAVE_NCCL)
#define NN_NCCL 1
#include <nccl.h>
#else
#define NN_NCCL 0
#endif

namespace nn::comm {

#if NN_NCCL

namespace {

// Two ranks of one host on one device: "ranks 0 and 1 share ..." or "" (rank 0 decides; every
// rank gets the verdict). key: "host bus-id" of this rank.
std::string shared_gpu(const std::string& key) {
  const std::vector<std::string> keys = gather_strings(key);
  std::string why;
  for (std::size_t a = 0; a < keys.size() && why.empty(); ++a)
    for (std::size_t b = a + 1; b < keys.size() && why.empty(); ++b)
      if (keys[a] == keys[b])
        why = "--comm nccl needs a GPU of its own for every rank: ranks " + std::to_string(a) + " and " +
              std::to_string(b) + " share the GPU at " + keys[a] +
              " (NCCL refuses that; ask Slurm for as many GPUs as tasks a node, or use --comm host)";
  return broadcast(why);
}

// "host 0000:01:00.0": where this rank's current device is.
std::string device_key() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  char bus[48];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", unsigned(prop.pciDomainID), unsigned(prop.pciBusID),
                unsigned(prop.pciDeviceID));
  return processor_name() + " " + bus;
}

}  // namespace

namespace {

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw InternalError(std::string(what) + " failed: " + ncclGetErrorString(r));
}

template <class V>
ncclDataType_t nccl_type() {
  if constexpr (std::is_same_v<V, float>) return ncclFloat;
  else if constexpr (std::is_same_v<V, double>) return ncclDouble;
  else {
    static_assert(std::is_same_v<V, std::uint64_t>, "NCCL sums float, double or uint64_t here");
    return ncclUint64;
  }
}

std::atomic<ncclComm_t> g_open{nullptr};  // for abort_nccl (the step timeout's thread)
Nccl* g_nccl = nullptr;                    // for nccl_reduction (the training thread's)

}  // namespace

struct Nccl::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;  // sum_host's copies and sums
  void* scratch = nullptr;        // sum_host's device buffer
  std::size_t scratch_bytes = 0;
};

std::string nccl_support() { return ""; }

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "?";
  // 2.9 and later: major * 10000 + minor * 100 + patch; before: major * 1000 + minor * 100 + patch.
  const int major = v >= 10000 ? v / 10000 : v / 1000, minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

std::string nccl_name() {
#ifdef SIM_EMULATOR
  return "the emulator's NCCL " + nccl_version();
#else
  return "NCCL " + nccl_version();
#endif
}

std::unique_ptr<Nccl> Nccl::open() {
  if (g_nccl) throw std::logic_error("Nccl::open: a communicator is open already");
  if (const std::string why = shared_gpu(device_key()); !why.empty()) throw UserError(why);
  ncclUniqueId id{};
  if (rank() == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  broadcast_bytes(&id, sizeof id);
  std::unique_ptr<Nccl> n(new Nccl);
  n->impl_ = std::make_unique<Impl>();
  {
    detail::Busy busy("ncclCommInitRank");
    nccl_check(ncclCommInitRank(&n->impl_->comm, size(), id, rank()), "ncclCommInitRank");
  }
  CUDA_CHECK(cudaStreamCreate(&n->impl_->stream));
  g_open.store(n->impl_->comm);
  g_nccl = n.get();
  return n;
}

Nccl::~Nccl() {
  g_nccl = nullptr;
  if (!impl_) return;
  if (impl_->scratch) CUDA_CHECK_NOTHROW(cudaFree(impl_->scratch));
  if (impl_->stream) CUDA_CHECK_NOTHROW(cudaStreamDestroy(impl_->stream));
  // A communicator the step timeout aborted is gone already (g_open cleared there).
  if (g_open.exchange(nullptr) == impl_->comm && impl_->comm) {
    const ncclResult_t r = ncclCommDestroy(impl_->comm);
    if (r != ncclSuccess) std::fprintf(stderr, "ncclCommDestroy failed: %s\n", ncclGetErrorString(r));
  }
}

template <class V>
void Nccl::sum_on(V* buf, std::size_t n, void* stream) {
  if (n == 0) return;
  // Marked for the step timeout too: a GPU queues the call and returns, but the emulator's NCCL
  // may finish an earlier all-reduce of the stream here (sim/docs/nccl.md).
  detail::Busy busy("ncclAllReduce");
  nccl_check(ncclAllReduce(buf, buf, n, nccl_type<V>(), ncclSum, impl_->comm, static_cast<cudaStream_t>(stream)),
             "ncclAllReduce");
}

void Nccl::wait(void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  detail::Busy busy("ncclAllReduce (the host in cudaStreamQuery, waiting for the stream)");
  for (;;) {
    const cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) CUDA_CHECK(q);
    ncclResult_t async = ncclSuccess;
    nccl_check(ncclCommGetAsyncError(impl_->comm, &async), "ncclCommGetAsyncError");
    nccl_check(async, "ncclAllReduce (asynchronous error)");
    std::this_thread::yield();
  }
}

template <class V>
void Nccl::sum_host(V* buf, std::size_t n) {
  const std::size_t bytes = n * sizeof(V);
  if (bytes > impl_->scratch_bytes) {
    if (impl_->scratch) CUDA_CHECK(cudaFree(impl_->scratch));
    impl_->scratch = nullptr;
    CUDA_CHECK(cudaMalloc(&impl_->scratch, bytes));
    impl_->scratch_bytes = bytes;
  }
  V* d = static_cast<V*>(impl_->scratch);
  CUDA_CHECK(cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, impl_->stream));
  sum_on(d, n, impl_->stream);
  CUDA_CHECK(cudaMemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, impl_->stream));
  wait(impl_->stream);
}

void abort_nccl() {
  if (const ncclComm_t c = g_open.exchange(nullptr)) ncclCommAbort(c);
}

namespace {
template <class V>
Request host_sum(V* buf, std::size_t n) {
  if (!g_nccl) throw std::logic_error("nccl_reduction: no open communicator");
  g_nccl->sum_host(buf, n);
  return Request();
}
}  // namespace

template <class V>
Reduction<V> nccl_reduction() {
  return {&host_sum<V>, &host_sum<V>, "ncclAllReduce"};
}

#else  // a CUDA build without NCCL: --comm nccl refused (plan.cpp asks nccl_support first)

struct Nccl::Impl {};

std::string nccl_support() {
  return "--comm nccl: this build has no NCCL (.ci/deps.sh found none when it was built: module load nccl, or "
         "pip install --user nvidia-nccl-cu12 or -cu13 to match CUDA, then make clean and make)";
}
std::string nccl_version() { return ""; }
std::string nccl_name() { return "no NCCL"; }
std::unique_ptr<Nccl> Nccl::open() { throw UserError(nccl_support()); }
Nccl::~Nccl() = default;
template <class V>
void Nccl::sum_on(V*, std::size_t, void*) {
  throw std::logic_error(nccl_support());
}
void Nccl::wait(void*) { throw std::logic_error(nccl_support()); }
template <class V>
void Nccl::sum_host(V*, std::size_t) {
  throw std::logic_error(nccl_support());
}
void abort_nccl() {}
template <class V>
Reduction<V> nccl_reduction() {
  throw std::logic_error(nccl_support());
}

#endif

#define NN_INSTANTIATE(V)                                        \
  template void Nccl::sum_on<V>(V*, std::size_t, void*);         \
  template void Nccl::sum_host<V>(V*, std::size_t);              \
  template Reduction<V> nccl_reduction<V>();
NN_INSTANTIATE(float)
NN_INSTANTIATE(double)
NN_INSTANTIATE(std::uint64_t)
#undef NN_INSTANTIATE

}  // namespace nn::comm
