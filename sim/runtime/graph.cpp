// CUDA Graphs by stream capture: between cudaStreamBeginCapture and cudaStreamEndCapture,
// kernels, async copies, memsets and event records queued on the capturing stream become
// nodes of a graph instead of running; cudaGraphLaunch replays them in capture order (the
// emulator's streams are synchronous, so capture order is a valid topological order).
// Strict like CUDA: synchronous calls and legacy-stream launches during a global-mode
// capture are refused and invalidate it. Tested by tests/sim/test_sim_graph.cu.
#include <limits>
#include <thread>
#include "internal.h"

struct CUgraph_st {
  std::vector<std::function<void()>> nodes;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> nodes;
};
struct CUgraphNode_st {};

namespace sim::detail {

std::atomic<int> g_active_captures{0};

namespace {
struct Capture {
  CUgraph_st* graph;
  cudaStreamCaptureMode mode;
  std::thread::id thread;
  bool invalid;
};
struct GraphState {
  std::mutex m;
  std::map<cudaStream_t, Capture> captures;
  std::set<CUgraph_st*> graphs;
  std::set<CUgraphExec_st*> execs;
};
GraphState& GS() {
  static auto* g = new GraphState();  // never destroyed: usable from static destructors
  return *g;
}
thread_local int tl_replay_depth = 0;

bool is_legacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

// Does a capture in progress forbid unsafe calls on this thread? Lock held.
bool guards_this_thread(const Capture& c) {
  return c.mode == cudaStreamCaptureModeGlobal ||
         (c.mode == cudaStreamCaptureModeThreadLocal && c.thread == std::this_thread::get_id());
}
// Invalidates every capture that guards this thread; true if there was one. Lock held.
bool invalidate_guarding() {
  bool any = false;
  for (auto& [s, c] : GS().captures)
    if (guards_this_thread(c)) {
      c.invalid = true;
      any = true;
    }
  return any;
}
}  // namespace

ReplayScope::ReplayScope() { ++tl_replay_depth; }
ReplayScope::~ReplayScope() { --tl_replay_depth; }

bool in_replay() { return tl_replay_depth > 0; }

bool is_created_stream(cudaStream_t s) {
  return !is_legacy(s) && s != cudaStreamPerThread;
}

cudaError_t capture_check(cudaStream_t stream, bool legacy_work) {
  if (g_active_captures.load(std::memory_order_relaxed) == 0 || tl_replay_depth > 0)
    return cudaSuccess;
  std::lock_guard<std::mutex> lk(GS().m);
  auto it = GS().captures.find(stream);
  if (!is_legacy(stream) && it != GS().captures.end()) {
    it->second.invalid = true;
    return set_error(cudaErrorStreamCaptureUnsupported);
  }
  if (!invalidate_guarding()) return cudaSuccess;
  return set_error(legacy_work ? cudaErrorStreamCaptureImplicit : cudaErrorStreamCaptureUnsupported);
}

cudaError_t capture_forbids(cudaStream_t stream, bool legacy_work) {
  if (!capture_active() || tl_replay_depth > 0) return cudaSuccess;
  if (const cudaError_t e = capture_check(stream, legacy_work)) return e;
  if (lazy_streams()) {  // a synchronising call: the stream's queued work, or everything
    if (is_created_stream(stream))
      lazy_drain(stream, std::numeric_limits<unsigned long long>::max());
    else
      lazy_drain_all();
    // A fault in the work just run is this call's error, as on a GPU.
    if (const cudaError_t e = sticky_error()) return set_error(e);
  }
  return cudaSuccess;
}

bool capture_active_on(cudaStream_t stream) {
  if (g_active_captures.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lk(GS().m);
  return GS().captures.count(stream) != 0;
}

CaptureVerdict capture_node(cudaStream_t stream, std::function<void()> node) {
  if (!capture_active() || tl_replay_depth > 0) return CaptureVerdict::Run;
  {
    std::lock_guard<std::mutex> lk(GS().m);
    auto it = GS().captures.find(stream);
    if (it != GS().captures.end()) {
      if (it->second.invalid) {
        set_error(cudaErrorStreamCaptureInvalidated);
        return CaptureVerdict::Refused;
      }
      it->second.graph->nodes.push_back(std::move(node));
      return CaptureVerdict::Captured;
    }
    // The legacy stream synchronises with every blocking stream, so work on it would make
    // the capturing stream depend on something outside the graph.
    if (is_legacy(stream) && invalidate_guarding()) {
      set_error(cudaErrorStreamCaptureImplicit);
      return CaptureVerdict::Refused;
    }
  }
  if (lazy_streams()) {
    if (is_created_stream(stream)) {
      lazy_enqueue(stream, std::move(node));
      return CaptureVerdict::Deferred;
    }
    lazy_drain_all();  // the legacy stream waits for every blocking stream's earlier work
  }
  return CaptureVerdict::Run;
}

}  // namespace sim::detail

using namespace sim::detail;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (!stream_valid(s)) return set_error(cudaErrorInvalidResourceHandle);
  if (is_legacy(s)) return set_error(cudaErrorStreamCaptureUnsupported);
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return set_error(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lk(GS().m);
  if (GS().captures.count(s)) return set_error(cudaErrorIllegalState);
  auto* g = new CUgraph_st();
  GS().graphs.insert(g);
  GS().captures[s] = Capture{g, mode, std::this_thread::get_id(), false};
  g_active_captures.fetch_add(1);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* pGraph) {
  if (!pGraph) return set_error(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lk(GS().m);
  auto it = GS().captures.find(s);
  if (it == GS().captures.end()) return set_error(cudaErrorIllegalState);
  if (it->second.mode != cudaStreamCaptureModeRelaxed && it->second.thread != std::this_thread::get_id())
    return set_error(cudaErrorStreamCaptureWrongThread);
  const Capture c = it->second;
  GS().captures.erase(it);
  g_active_captures.fetch_sub(1);
  if (c.invalid) {
    GS().graphs.erase(c.graph);
    delete c.graph;
    *pGraph = nullptr;
    return set_error(cudaErrorStreamCaptureInvalidated);
  }
  *pGraph = c.graph;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  if (!status) return set_error(cudaErrorInvalidValue);
  if (!stream_valid(s)) return set_error(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lk(GS().m);
  auto it = GS().captures.find(s);
  *status = it == GS().captures.end() ? cudaStreamCaptureStatusNone
            : it->second.invalid      ? cudaStreamCaptureStatusInvalidated
                                      : cudaStreamCaptureStatusActive;
  // Asking about the legacy stream while a global capture runs is itself illegal in CUDA.
  if (is_legacy(s) && invalidate_guarding()) return set_error(cudaErrorStreamCaptureImplicit);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pExec, cudaGraph_t g, unsigned long long) {
  if (!pExec) return set_error(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lk(GS().m);
  if (!GS().graphs.count(g)) return set_error(cudaErrorInvalidValue);
  auto* x = new CUgraphExec_st{g->nodes};  // a snapshot: later changes to g do not reach it
  GS().execs.insert(x);
  *pExec = x;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (!stream_valid(s)) return set_error(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard<std::mutex> lk(GS().m);
    if (!GS().execs.count(x)) return set_error(cudaErrorInvalidResourceHandle);
  }
  // A graph launched into a capturing stream would become a child-graph node; not needed.
  if (capture_active()) {
    std::lock_guard<std::mutex> lk(GS().m);
    if (GS().captures.count(s)) return set_error(cudaErrorNotSupported);
  }
  if (lazy_streams() && tl_replay_depth == 0) {
    if (is_created_stream(s)) {  // queued whole; its nodes were snapshotted at instantiation
      lazy_enqueue(s, [nodes = x->nodes]() mutable {
        const cudaError_t before = tl_last_error;  // as below: an unread error stays unread
        tl_last_error = cudaSuccess;
        for (auto& node : nodes) {
          node();
          if (sticky_error() != cudaSuccess || tl_last_error != cudaSuccess) return;
        }
        tl_last_error = before;
      });
      return cudaSuccess;
    }
    lazy_drain_all();
  }
  ReplayScope r;
  const cudaError_t before = tl_last_error;  // an unread error from earlier stays unread
  tl_last_error = cudaSuccess;
  for (auto& node : x->nodes) {
    node();
    if (const cudaError_t e = sticky_error()) return set_error(e);
    if (tl_last_error != cudaSuccess) return tl_last_error;  // a refused launch
  }
  tl_last_error = before;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* numNodes) {
  if (!numNodes) return set_error(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lk(GS().m);
  if (!GS().graphs.count(g)) return set_error(cudaErrorInvalidValue);
  if (nodes) {  // the emulator's nodes have no identity beyond their index
    const size_t n = std::min(*numNodes, g->nodes.size());
    for (size_t i = 0; i < n; ++i) nodes[i] = reinterpret_cast<cudaGraphNode_t>(i + 1);
  }
  *numNodes = g->nodes.size();
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
  std::lock_guard<std::mutex> lk(GS().m);
  if (!GS().execs.erase(x)) return set_error(cudaErrorInvalidValue);
  delete x;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  std::lock_guard<std::mutex> lk(GS().m);
  if (!GS().graphs.erase(g)) return set_error(cudaErrorInvalidValue);
  delete g;
  return cudaSuccess;
}

}  // extern "C"
