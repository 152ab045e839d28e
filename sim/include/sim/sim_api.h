// Emulator-only control API (schedule order, fault mode, workers, statistics).
// Implemented in runtime/api.cpp and runtime/pool.cpp; tests/sim uses it to
// record faults instead of aborting and to replay schedules.
#pragma once
#include <string>

namespace sim {
enum class Order { Forward, Reverse, Random };
enum class FaultMode { Abort, Record };

void set_order(Order o, unsigned long long seed = 1);  // overrides SIM_ORDER/SIM_SEED at run time
Order order();
unsigned long long seed();
std::string describe_schedule();  // e.g. "order=random seed=7 workers=1 streams=lazy"

void set_fault_mode(FaultMode m);
FaultMode fault_mode();
std::string last_fault();  // "" if none since the last reset()
void reset();              // same as cudaDeviceReset()

// Streams: Lazy (default) queues work on created streams until a synchronising call, an
// event wait or the legacy stream forces it, exposing a missing cudaStreamWaitEvent; queries
// answer cudaErrorNotReady while work is pending (and run one item each). Sync runs all work
// at the call. SIM_STREAMS=sync selects Sync at start. Switching to Sync drains.
enum class StreamMode { Sync, Lazy };
void set_stream_mode(StreamMode m);
StreamMode stream_mode();

// Device memory is fenced from host code: the address cudaMalloc returns faults when host
// code dereferences it, as on a GPU. Emulated device work (kernels, copies, the emulated
// cuBLAS) reaches the same bytes through the allocation's device view. device_view(p) is
// that address for device memory (p itself for host, managed or unknown memory). Only code
// that models a library with its own device access may use it -- the project's emulated
// CUDA-aware MPI (src/comm) does; ordinary host code never should.
void* device_view(const void* p);

// Per-access checks of kernel loads and stores (runtime/checks.cpp; .cu files built by simcc
// without -fsanitize=address). Bounds of shared memory, device allocations and __device__
// variables are always checked. racecheck: a shared-memory word written by one warp and read
// or written by another with no __syncthreads between is a fault. initcheck: a kernel read of
// device memory nothing has written is a fault. Both on by default; SIM_RACECHECK=0 and
// SIM_INITCHECK=0 turn them off at start, these at run time.
void set_racecheck(bool on);  // on: the first 3 launches of each kernel configuration
void set_racecheck_all();      // every launch (SIM_RACECHECK=all)
bool racecheck();
void set_initcheck(bool on);
bool initcheck();

void set_workers(int n);  // resize the worker pool at run time (tests)
int workers();

// Devices: cudaGetDeviceCount answers SIM_DEVICES (default 1, 1..64), a multi-GPU node in one
// process. Every device is the same emulator on the same host memory (a pointer from one works
// on all); cudaSetDevice only selects which one a host thread's queries name. set_devices
// overrides SIM_DEVICES at run time (tests; clamped to 1..64; a thread's current device is
// kept, so call cudaSetDevice afterwards).
void set_devices(int k);
int devices();

struct Stats {
  unsigned long long launches, blocks, threads, barriers, fiber_switches;
};
Stats stats();  // counters since program start
}  // namespace sim
