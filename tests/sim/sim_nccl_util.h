// Shared by the tests of the emulator's NCCL (tests/sim/test_sim_nccl*.cu): the SimNccl fixture
// gives every rank of MPI_COMM_WORLD its own emulated device (SIM_DEVICES semantics: one device
// per rank on this host), a created stream in the lazy mode and a communicator over all ranks.
// Emulator only (the CUDA build has no nccl.h of the emulator's).
#pragma once

#ifdef SIM_EMULATOR
#include <mpi.h>
#include <nccl.h>

#include <vector>

#include "sim_test_util.h"

// n elements of device memory, after every stream's work (cudaMemcpy).
template <class T>
std::vector<T> download(const T* p, size_t n) {
  std::vector<T> h(n);
  (void)cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  return h;
}

#define ASSERT_NCCL_OK(expr) ASSERT_EQ((expr), ncclSuccess) << #expr << ": " << ncclGetLastError(nullptr)

class SimNccl : public simtest::SimTest {
 protected:
  void SetUp() override {
    simtest::SimTest::SetUp();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    saved_devices_ = sim::devices();
    saved_mode_ = sim::stream_mode();
    sim::set_stream_mode(sim::StreamMode::Lazy);
    sim::set_devices(size_ > 4 ? size_ : 4);
    ASSERT_CUDA_OK(cudaSetDevice(rank_));
    ASSERT_CUDA_OK(cudaStreamCreate(&stream_));
    ASSERT_NCCL_OK(init(&comm_));
  }
  void TearDown() override {
    if (!reset_) {
      EXPECT_CUDA_OK(cudaStreamDestroy(stream_));
    }
    if (comm_) {
      EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
    }
    cudaSetDevice(0);
    sim::set_devices(saved_devices_);
    sim::set_stream_mode(saved_mode_);
    simtest::SimTest::TearDown();
  }
  // A communicator over every rank (collective): rank 0's unique id, broadcast over MPI.
  ncclResult_t init(ncclComm_t* comm, int rank = -1) {
    ncclUniqueId id;
    if (rank_ == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    return ncclCommInitRank(comm, size_, id, rank < 0 ? rank_ : rank);
  }
  // After a test provoked a fault: clears it (cudaDeviceReset also deletes the stream).
  void clear_fault() {
    sim::reset();
    reset_ = true;
  }

  int rank_ = 0, size_ = 1, saved_devices_ = 1;
  sim::StreamMode saved_mode_ = sim::StreamMode::Lazy;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool reset_ = false;
};
#endif
