// The emulator's NCCL (sim/include/nccl.h, sim/runtime/nccl*.cpp): the version and error
// strings, communicator queries, ncclAllReduce's sums for float, double and uint64 (in place and
// out of place, on a created stream in the lazy mode), groups, and the all-reduce never waiting
// for a peer's stream (the no-deadlock case against a host collective). Runs at any rank count
// (make test: 1..4); its hazard reports, refusals and abort: test_sim_nccl_checks.cu.
// Emulator only.
#include "sim_nccl_util.h"

#ifdef SIM_EMULATOR
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using simtest::DeviceBuffer;

static_assert(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 && ncclInternalError == 3 &&
              ncclInvalidArgument == 4 && ncclInvalidUsage == 5 && ncclRemoteError == 6 && ncclInProgress == 7);
static_assert(ncclInt8 == 0 && ncclChar == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclInt == 2 && ncclUint32 == 3 &&
              ncclInt64 == 4 && ncclUint64 == 5 && ncclFloat16 == 6 && ncclHalf == 6 && ncclFloat32 == 7 &&
              ncclFloat == 7 && ncclFloat64 == 8 && ncclDouble == 8 && ncclBfloat16 == 9);
static_assert(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4);
static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES && NCCL_UNIQUE_ID_BYTES == 128);

// One element's value on one rank: exact sums (dyadic), or values whose sum rounds.
template <class T>
T value(int rank, size_t i, bool rounding) {
  if (rounding) return static_cast<T>((rank + 1) * 0.1 + static_cast<double>(i) * 1e-3);
  return static_cast<T>(static_cast<double>(rank + 1) * 0.5 + static_cast<double>(i % 97));
}
template <>
uint64_t value<uint64_t>(int rank, size_t i, bool) {
  return (uint64_t(1) << 40) * static_cast<uint64_t>(rank + 1) + i;
}

template <class T>
__global__ void fill_kernel(T* v, const T* from, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = from[i];
}

template <class T>
MPI_Datatype mpi_of() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else return MPI_UINT64_T;
}

// Fills send on the stream (a kernel the all-reduce must see), all-reduces it lazily, and
// compares with MPI_Allreduce over MPI_COMM_WORLD of the same values.
template <class T>
void check_sum(ncclComm_t comm, cudaStream_t stream, ncclDataType_t type, bool in_place, bool rounding,
               int size) {
  const int n = 1000;
  std::vector<T> mine(n), want(n);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 0; i < n; ++i) mine[i] = value<T>(rank, i, rounding);
  MPI_Allreduce(mine.data(), want.data(), n, mpi_of<T>(), MPI_SUM, MPI_COMM_WORLD);
  DeviceBuffer<T> src(mine), send(n), recv(n);
  fill_kernel<T><<<(n + 127) / 128, 128, 0, stream>>>(send.get(), src.get(), n);
  T* out = in_place ? send.get() : recv.get();
  ASSERT_NCCL_OK(ncclAllReduce(send.get(), out, n, type, ncclSum, comm, stream));
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady) << "the all-reduce waits for its stream";
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
  const std::vector<T> got = download(out, n);
  if (rounding && size > 2) {  // Open MPI's nonblocking and blocking all-reduce may add in other orders
    for (int i = 0; i < n; ++i) ASSERT_NEAR(static_cast<double>(got[i]), static_cast<double>(want[i]), 1e-5) << i;
    return;
  }
  ASSERT_EQ(0, std::memcmp(got.data(), want.data(), n * sizeof(T))) << "element 0: " << got[0] << " vs " << want[0];
}

TEST_F(SimNccl, VersionAndErrorStrings) {
  int v = 0;
  ASSERT_NCCL_OK(ncclGetVersion(&v));
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(NCCL_VERSION(2, 21, 0), 22100);
  EXPECT_EQ(NCCL_VERSION(2, 8, 4), 2804);
  EXPECT_EQ(std::string(ncclGetErrorString(ncclSuccess)), "no error");
  EXPECT_NE(std::string(ncclGetErrorString(ncclInvalidUsage)).find("invalid usage"), std::string::npos);
  EXPECT_NE(std::string(ncclGetErrorString(ncclInvalidArgument)).find("invalid argument"), std::string::npos);
  EXPECT_EQ(std::string(ncclGetErrorString(static_cast<ncclResult_t>(42))), "unknown result code");
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm_)).find("ncclGetVersion"), std::string::npos);
}

TEST_F(SimNccl, CommunicatorQueries) {
  int count = 0, rank = -1, device = -1;
  ASSERT_NCCL_OK(ncclCommCount(comm_, &count));
  ASSERT_NCCL_OK(ncclCommUserRank(comm_, &rank));
  ASSERT_NCCL_OK(ncclCommCuDevice(comm_, &device));
  EXPECT_EQ(count, size_);
  EXPECT_EQ(rank, rank_);
  EXPECT_EQ(device, rank_);
  ncclResult_t async = ncclInternalError;
  ASSERT_NCCL_OK(ncclCommGetAsyncError(comm_, &async));
  EXPECT_EQ(async, ncclSuccess);
  // Ranks in reverse order: the communicator's rank is the argument, not the MPI rank.
  ncclComm_t rev = nullptr;
  ASSERT_NCCL_OK(init(&rev, size_ - 1 - rank_));
  ASSERT_NCCL_OK(ncclCommUserRank(rev, &rank));
  EXPECT_EQ(rank, size_ - 1 - rank_);
  ASSERT_NCCL_OK(ncclCommDestroy(rev));
}

TEST_F(SimNccl, SumsMatchMpiAllreduce) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    for (bool rounding : {false, true}) {
      check_sum<float>(comm_, stream_, ncclFloat, in_place, rounding, size_);
      check_sum<double>(comm_, stream_, ncclDouble, in_place, rounding, size_);
      if (HasFatalFailure()) return;
    }
    check_sum<uint64_t>(comm_, stream_, ncclUint64, in_place, false, size_);
  }
}

TEST_F(SimNccl, OtherOpsAndTypes) {
  const int n = 64;
  std::vector<int32_t> mine(n);
  for (int i = 0; i < n; ++i) mine[i] = (rank_ + 1) * (i + 1);
  DeviceBuffer<int32_t> buf(mine), out(n);
  ASSERT_NCCL_OK(ncclAllReduce(buf.get(), out.get(), n, ncclInt32, ncclMax, comm_, stream_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
  std::vector<int32_t> got = download(out.get(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], size_ * (i + 1)) << i;
  ASSERT_NCCL_OK(ncclAllReduce(buf.get(), out.get(), n, ncclInt32, ncclAvg, comm_, stream_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
  got = download(out.get(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], (size_ + 1) * (i + 1) / 2) << i;
}

TEST_F(SimNccl, GroupsIssueAtTheOutermostEnd) {
  const int n = 300;
  std::vector<float> a(n, 1.0f + rank_);
  std::vector<double> b(n, 0.25 * (rank_ + 1));
  DeviceBuffer<float> da(a);
  DeviceBuffer<double> db(b), dout(n);
  ASSERT_NCCL_OK(ncclGroupStart());
  ASSERT_NCCL_OK(ncclAllReduce(da.get(), da.get(), n, ncclFloat, ncclSum, comm_, stream_));
  ASSERT_NCCL_OK(ncclGroupStart());
  ASSERT_NCCL_OK(ncclAllReduce(db.get(), dout.get(), n, ncclDouble, ncclSum, comm_, stream_));
  ASSERT_NCCL_OK(ncclGroupEnd());
  EXPECT_EQ(cudaStreamQuery(stream_), cudaSuccess) << "nothing is issued before the outermost ncclGroupEnd";
  ASSERT_NCCL_OK(ncclGroupEnd());
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
  const float fa = static_cast<float>(size_ * (size_ + 1) / 2);
  const double fb = 0.25 * size_ * (size_ + 1) / 2;
  for (float x : download(da.get(), n)) ASSERT_EQ(x, fa);
  for (double x : download(dout.get(), n)) ASSERT_EQ(x, fb);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
}

// Rank 0 forces its stream before a host collective on MPI_COMM_WORLD; the others enter the host
// collective first and force their streams after. On a GPU NCCL progresses without the host, so
// this ends; an emulator that started the all-reduce only when a stream reaches it would hang.
TEST_F(SimNccl, NoDeadlockAgainstHostCollectives) {
  if (size_ < 2) GTEST_SKIP() << "needs two ranks";
  const int n = 256;
  std::vector<double> mine(n, rank_ + 1.0);
  DeviceBuffer<double> a(mine), b(mine);
  for (int round = 0; round < 2; ++round) {
    DeviceBuffer<double>& buf = round == 0 ? a : b;
    ASSERT_NCCL_OK(ncclAllReduce(buf.get(), buf.get(), n, ncclDouble, ncclSum, comm_, stream_));
    double host = rank_, total = 0;
    if (rank_ == 0) {
      ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
    }
    if (round == 0) {
      MPI_Allreduce(&host, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      EXPECT_EQ(total, size_ * (size_ - 1) / 2.0);
    } else {
      MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank_ != 0) {
      ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
    }
    for (double x : download(buf.get(), n)) ASSERT_EQ(x, size_ * (size_ + 1) / 2.0);
  }
}

}  // namespace
#endif
