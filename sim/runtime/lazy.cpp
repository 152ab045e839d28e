// Lazy stream mode (the default; SIM_STREAMS=sync turns it off): an adversarial but legal
// CUDA schedule for multi-stream code. In the Sync mode every kernel, async copy and memset
// runs at its call, so two streams can never disagree and a forgotten cudaStreamWaitEvent
// goes unnoticed. In Lazy mode work queued on a created stream waits until something forces it:
//   - cudaStreamSynchronize(s): s's queue; cudaEventSynchronize(e): e's stream up to the record;
//   - cudaStreamQuery(s) / cudaEventQuery(e) with work still pending (on s, or on e's stream
//     before the record): cudaErrorNotReady, and the device takes one step (one queued item
//     runs), so a polling loop sees "not ready" rounds and still ends;
//   - a wait node (cudaStreamWaitEvent) reached in a queue: the waited stream up to the record;
//   - synchronous calls (cudaMemcpy, cudaMemset, cudaMalloc, cudaFree, cudaDeviceSynchronize)
//     and work on the legacy stream: every queue (blocking streams sync with the legacy one).
// Each queue runs in order, so the result is one a GPU could produce; a consumer stream that
// does not wait for its producer reads data the producer has not written yet.
// Tested by tests/sim/test_sim_lazy.cu and, on the trainer's overlap path, by
// tests/train/test_strategies.cpp.
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>

#include "internal.h"
#include "sim/sim_api.h"

namespace sim::detail {

namespace {
std::mutex& lazy_mutex() {
  static auto* m = new std::mutex();  // never destroyed: usable from static destructors
  return *m;
}
// Lazy unless SIM_STREAMS=sync (the debugging escape hatch).
bool env_lazy() {
  const char* v = std::getenv("SIM_STREAMS");
  if (!v || !*v || std::string(v) == "lazy") return true;
  if (std::string(v) == "sync") return false;
  std::fprintf(stderr, "sim: SIM_STREAMS=%s is not lazy|sync; using lazy\n", v);
  return true;
}
}  // namespace

std::atomic<bool> g_lazy_streams{env_lazy()};

bool lazy_streams() { return g_lazy_streams.load(std::memory_order_relaxed); }

namespace {
thread_local unsigned long long tl_last_enqueued = 0;
}

unsigned long long lazy_enqueue(CUstream_st* s, std::function<void()> node) {
  std::lock_guard<std::mutex> lk(lazy_mutex());
  s->pending.push_back(std::move(node));
  return tl_last_enqueued = ++s->enqueued;
}

unsigned long long lazy_last_enqueued() { return tl_last_enqueued; }

void lazy_drain(CUstream_st* s, unsigned long long upto) {
  while (lazy_step(s, upto)) {
  }
}

bool lazy_step(CUstream_st* s, unsigned long long upto) {
  if (!s || !stream_valid(s)) return false;  // a destroyed stream ran its work at destruction
  std::function<void()> node;
  {
    std::lock_guard<std::mutex> lk(lazy_mutex());
    if (s->done >= upto || s->pending.empty()) return false;
    node = std::move(s->pending.front());
    s->pending.pop_front();
  }
  {
    ReplayScope r;  // the node's own calls are its work, not new sync points
    node();
  }
  std::lock_guard<std::mutex> lk(lazy_mutex());
  ++s->done;
  return true;
}

bool lazy_step_any() {
  std::vector<CUstream_st*> all;
  {
    std::lock_guard<std::mutex> lk(G().m);
    all.assign(G().streams.begin(), G().streams.end());
  }
  for (CUstream_st* s : all)
    if (lazy_step(s, std::numeric_limits<unsigned long long>::max())) return true;
  return false;
}

void lazy_drain_all() {
  std::vector<CUstream_st*> all;
  {
    std::lock_guard<std::mutex> lk(G().m);
    all.assign(G().streams.begin(), G().streams.end());
  }
  for (CUstream_st* s : all) lazy_drain(s, std::numeric_limits<unsigned long long>::max());
}

void lazy_forget_stream(CUstream_st* s) {
  lazy_drain(s, std::numeric_limits<unsigned long long>::max());
  std::lock_guard<std::mutex> lk(G().m);
  for (CUevent_st* e : G().events)
    if (e->lazy_stream == s) e->lazy_stream = nullptr;
}

}  // namespace sim::detail

namespace sim {

void set_stream_mode(StreamMode m) {
  if (m == StreamMode::Sync) detail::lazy_drain_all();
  detail::g_lazy_streams.store(m == StreamMode::Lazy);
}

StreamMode stream_mode() { return detail::lazy_streams() ? StreamMode::Lazy : StreamMode::Sync; }

}  // namespace sim
