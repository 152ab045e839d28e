// Cooperative launches and the grid barrier (cooperative_groups::this_grid().sync()).
// A cooperative launch runs every block at once, each on an OS thread of its own with its own
// fibers, so a block waiting at the grid barrier blocks only its own thread. Checked, as a GPU
// enforces or leaves undefined:
//   - the grid must fit on the device at once (occupancy x SMs), else the launch is refused
//     with cudaErrorCooperativeLaunchTooLarge and one line naming the numbers;
//   - grid.sync() in a kernel not launched cooperatively is a fault (on a GPU it may hang);
//   - a block that exits while others wait at a grid barrier is a fault naming the barrier
//     (on a GPU the others would wait forever); so is a barrier some blocks reach at another
//     call site;
//   - memory a block wrote before a grid barrier is ordered before every access after it (the
//     global race check, checks.cpp); without one, blocks stay unordered.
// Tested by tests/sim/test_sim_coop.cu.
#include <condition_variable>
#include <thread>
#include "internal.h"

namespace sim::detail {

struct GridBarrier {
  std::mutex m;
  std::condition_variable cv;
  unsigned long long arrived = 0, finished = 0, gen = 0;
  Site site{nullptr, 0};  // where the current barrier's first block arrived
};

namespace {
unsigned long long block_index(const Worker& w) {
  const uint3 b = w.block.block_idx;
  const dim3 g = w.block.grid_dim;
  return b.x + static_cast<unsigned long long>(g.x) * (b.y + static_cast<unsigned long long>(g.y) * b.z);
}
std::string block_name(const dim3 g, unsigned long long b) {
  return strf("(%llu,%llu,%llu)", b % g.x, (b / g.x) % g.y, b / (static_cast<unsigned long long>(g.x) * g.y));
}

// Thread 0 of a block, once its whole block has arrived: wait for every other block.
void wait_for_grid(Worker& w, Site s) {
  Launch& L = *w.L;
  GridBarrier& g = *L.grid_bar;
  std::unique_lock<std::mutex> lk(g.m);
  if (g.arrived == 0) g.site = s;
  if (!same_site(g.site, s)) {
    const Site first = g.site;
    lk.unlock();
    L.aborted.store(true);
    g.cv.notify_all();
    w.fiber_fault(cudaErrorLaunchFailure,
                  strf("grid barrier divergence: block %s waits at grid.sync() at %s:%d while other blocks wait at "
                       "%s:%d (every block must reach the same grid.sync()); %s",
                       block_name(L.grid, block_index(w)).c_str(), s.file, s.line, first.file, first.line,
                       w.where().c_str()));
  }
  const unsigned long long my_gen = g.gen;
  if (++g.arrived == L.nblocks) {
    g.arrived = 0;
    ++g.gen;
    note_grid_sync();
    g.cv.notify_all();
    return;
  }
  for (;;) {
    if (g.gen != my_gen) return;
    if (L.aborted.load()) {
      lk.unlock();
      throw FiberAbort{};  // another block faulted; its fault was reported
    }
    if (g.finished > 0 && g.arrived + g.finished == L.nblocks) {
      const unsigned long long gone = g.finished;
      lk.unlock();
      L.aborted.store(true);
      g.cv.notify_all();
      w.fiber_fault(cudaErrorLaunchFailure,
                    strf("grid.sync() at %s:%d can never complete: %llu of the %llu blocks exited without "
                         "reaching it (on a GPU the waiting blocks hang); %s",
                         s.file, s.line, gone, L.nblocks, w.where().c_str()));
    }
    g.cv.wait(lk);
  }
}
}  // namespace

void run_cooperative(Launch& L) {
  GridBarrier g;
  L.grid_bar = &g;
  std::vector<std::thread> blocks;
  blocks.reserve(L.nblocks);
  for (unsigned long long i = 0; i < L.nblocks; ++i)
    blocks.emplace_back([&L, &g, i] {
      this_worker()->run_block(L, L.block_at(i));
      {
        std::lock_guard<std::mutex> lk(g.m);
        ++g.finished;
      }
      g.cv.notify_all();
    });
  for (std::thread& t : blocks) t.join();
  L.grid_bar = nullptr;
}

void grid_sync(Site s) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("cooperative_groups::grid_group::sync()", s);
  if (!w->L->cooperative)
    w->fiber_fault(cudaErrorLaunchFailure,
                   strf("grid.sync() at %s:%d in a kernel not launched with cudaLaunchCooperativeKernel: its "
                        "blocks need not be resident together, so on a GPU the barrier is invalid and may hang; "
                        "%s",
                        s.file, s.line, w->where().c_str()));
  syncthreads(s);  // the whole block has arrived (divergence within the block is checked here)
  if (w->cur == 0) wait_for_grid(*w, s);
  syncthreads(s);  // the block goes on once thread 0 has seen every block arrive
}

bool grid_is_cooperative() {
  const Worker* w = tl_worker;
  return w && w->in_block && w->L && w->L->cooperative;
}

cudaError_t cooperative_fits(const void* fn, dim3 grid, dim3 block, size_t shmem, const char* name,
                             const char* file, int line) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  int per_sm = 0, sms = 0, dev = 0;
  const int threads = static_cast<int>(block.x * block.y * block.z);
  cudaGetDevice(&dev);
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, shmem) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return set_error(cudaErrorInvalidValue);
  const unsigned long long blocks = static_cast<unsigned long long>(grid.x) * grid.y * grid.z;
  if (blocks > static_cast<unsigned long long>(per_sm) * static_cast<unsigned long long>(sms)) {
    if (settings().fault_mode == FaultMode::Abort)
      std::fprintf(stderr,
                   "sim: cooperative launch of %s at %s:%d refused (cudaErrorCooperativeLaunchTooLarge): %llu "
                   "blocks of %d threads, but at most %d per SM x %d SMs = %d can be resident at once\n",
                   name, file, line, blocks, threads, per_sm, sms, per_sm * sms);
    return set_error(cudaErrorCooperativeLaunchTooLarge);
  }
  return cudaSuccess;
}

cudaError_t launch_error_of_call() { return cudaPeekAtLastError(); }

}  // namespace sim::detail
