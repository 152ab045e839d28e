// Warp-synchronous intrinsics (__shfl*_sync, __ballot_sync, __any/__all_sync,
// __syncwarp, __reduce_*_sync, __match_*_sync, and <mma.h>'s wmma::load_matrix_sync,
// store_matrix_sync and mma_sync): lanes rendezvous per (kind, mask,
// call site); misuse and deadlocks are faults. Tested by tests/sim and examples/checks.cu.
#include <algorithm>
#include <cstring>
#include "fiber.h"

namespace sim::detail {

namespace {
// Source lane of a shuffle, as PTX shfl.sync computes it (c = ((32-width)<<8) | clamp).
inline int shfl_src(int kind, int lane, int b, int width) {
  const int segmask = (32 - width) & 0x1f;
  const int cval = kind == kShflUp ? 0 : 0x1f;
  const int max_lane = (lane & segmask) | (cval & ~segmask);
  const int min_lane = lane & segmask;
  b &= 31;
  int j;
  bool ok;
  switch (kind) {
    case kShflUp: j = lane - b; ok = j >= max_lane; break;
    case kShflDown: j = lane + b; ok = j <= max_lane; break;
    case kShflXor: j = lane ^ b; ok = j <= max_lane; break;
    default: j = min_lane | (b & ~segmask); ok = j <= max_lane; break;
  }
  return ok ? j : lane;
}
}  // namespace

const char* kind_name(int k) {
  switch (k & 0xff) {
    case kSyncwarp: return "__syncwarp";
    case kShflIdx: return "__shfl_sync";
    case kShflUp: return "__shfl_up_sync";
    case kShflDown: return "__shfl_down_sync";
    case kShflXor: return "__shfl_xor_sync";
    case kBallot: return "__ballot_sync";
    case kAny: return "__any_sync";
    case kAll: return "__all_sync";
    case kReduceAdd: return "__reduce_add_sync";
    case kReduceMin: return "__reduce_min_sync";
    case kReduceMax: return "__reduce_max_sync";
    case kReduceAnd: return "__reduce_and_sync";
    case kReduceOr: return "__reduce_or_sync";
    case kReduceXor: return "__reduce_xor_sync";
    case kMatchAny: return "__match_any_sync";
    case kMatchAll: return "__match_all_sync";
    case kWmmaLoad: return "wmma::load_matrix_sync";
    case kWmmaStore: return "wmma::store_matrix_sync";
    case kWmmaMma: return "wmma::mma_sync";
    case kMmaSync: return "mma.sync m16n8k8 tf32";
  }
  return "warp op";
}

void Worker::deadlock_fault() {
  for (unsigned w = 0; w < (n + 31) / 32; ++w) {
    const WarpState& ws = warps[w];
    if (!ws.ngroups) continue;
    const WarpGroup& g = ws.groups[0];
    const unsigned missing = g.mask & ~g.arrived;
    const int lane = __builtin_ctz(missing);
    const ThreadCtx& o = ctx[w * 32 + lane];
    std::string other;
    if (o.state == kAtBarrier)
      other = strf("is at __syncthreads at %s:%d", o.site.file, o.site.line);
    else if (o.state == kAtWarp)
      other = strf("is at %s (mask 0x%08x) at %s:%d", kind_name(o.wkind), o.wmask, o.site.file,
                   o.site.line);
    else
      other = "has exited";
    fault_here(cudaErrorLaunchFailure,
               strf("warp op mismatch in %s: lanes 0x%08x of warp %u wait at %s (mask 0x%08x) "
                    "at %s:%d, but lane %d %s",
                    where().c_str(), g.arrived, w, kind_name(g.kind), g.mask, g.site.file,
                    g.site.line, lane, other.c_str()));
    return;
  }
}

unsigned long long Worker::warp_arrive(Site s, int kind, unsigned mask, unsigned long long v,
                                       unsigned size, int param, int width) {
  const int t = cur;
  ThreadCtx* c = &ctx[t];
  const int lane = t & 31, warp = t >> 5;
  const unsigned bit = 1u << lane;
  WarpState& ws = warps[warp];
  const int base = kind & 0xff;
  if (!(mask & bit))
    fiber_fault(cudaErrorLaunchFailure,
                strf("%s at %s:%d: mask 0x%08x does not include the calling lane %d (thread %s) in %s",
                     kind_name(kind), s.file, s.line, mask, lane, tid_str(*c).c_str(), where().c_str()));
  if (mask & ~ws.exist)
    fiber_fault(cudaErrorLaunchFailure,
                strf("%s at %s:%d: mask 0x%08x names lanes 0x%08x that do not exist (the block has "
                     "%u threads) in %s",
                     kind_name(kind), s.file, s.line, mask, mask & ~ws.exist, n, where().c_str()));
  if (mask & ws.exited)
    fiber_fault(cudaErrorLaunchFailure,
                strf("%s at %s:%d: mask 0x%08x names lanes 0x%08x that have exited in %s",
                     kind_name(kind), s.file, s.line, mask, mask & ws.exited, where().c_str()));
  if (base >= kShflIdx && base <= kShflXor && (width < 1 || width > 32 || (width & (width - 1))))
    fiber_fault(cudaErrorLaunchFailure,
                strf("%s at %s:%d: width %d is not a power of 2 in [1, 32] in %s", kind_name(kind),
                     s.file, s.line, width, where().c_str()));
  c->wkind = kind;
  c->wmask = mask;
  c->wvalue = v;
  c->wparam = param;
  c->wwidth = width;
  c->wsize = size;
  c->site = s;
  WarpGroup* g = nullptr;
  for (int i = 0; i < ws.ngroups; ++i) {
    WarpGroup& x = ws.groups[i];
    if (x.mask == mask && x.kind == kind && x.size == size && same_site(x.site, s)) {
      g = &x;
      break;
    }
  }
  if (!g) {
    g = &ws.groups[ws.ngroups++];
    *g = WarpGroup{mask, 0, kind, size, s};
  }
  g->arrived |= bit;
  if (g->arrived == mask) {
    const WarpGroup done = *g;
    *g = ws.groups[--ws.ngroups];
    complete(warp, done, t);
    return c->result;  // the last lane to arrive goes on without a switch
  }
  c->state = kAtWarp;
  yield();
  return c->result;
}

void Worker::complete(int warp, const WarpGroup& g, int self) {
  ThreadCtx* b = &ctx[warp * 32];
  arena.wstamp[warp] = ++arena.stamps;  // orders the lanes' shared accesses (racecheck)
  const unsigned mask = g.mask;
  const int kind = g.kind & 0xff;
  const bool sgn = (g.kind & 0x100) != 0;
  auto each = [mask](auto f) {
    for (unsigned m = mask; m; m &= m - 1) f(__builtin_ctz(m));
  };
  switch (kind) {
    case kSyncwarp:
      each([&](int l) { b[l].result = 0; });
      break;
    case kBallot:
    case kAny:
    case kAll: {
      unsigned bal = 0;
      each([&](int l) { if (b[l].wvalue) bal |= 1u << l; });
      const unsigned long long r = kind == kBallot ? bal : kind == kAny ? (bal != 0) : (bal == mask);
      each([&](int l) { b[l].result = r; });
      break;
    }
    case kShflIdx:
    case kShflUp:
    case kShflDown:
    case kShflXor:
      each([&](int l) {
        const int j = shfl_src(kind, l, b[l].wparam, b[l].wwidth);
        // Reading a lane outside the mask is undefined in CUDA: give all-ones bytes.
        b[l].result = ((mask >> j) & 1) ? b[j].wvalue : ~0ull;
      });
      break;
    case kReduceAdd:
    case kReduceMin:
    case kReduceMax:
    case kReduceAnd:
    case kReduceOr:
    case kReduceXor: {
      bool first = true;
      long long acc = 0;
      each([&](int l) {
        const long long x = sgn ? static_cast<long long>(static_cast<int>(b[l].wvalue))
                                : static_cast<long long>(static_cast<unsigned>(b[l].wvalue));
        if (first) { acc = x; first = false; return; }
        switch (kind) {
          case kReduceAdd: acc += x; break;
          case kReduceMin: acc = std::min(acc, x); break;
          case kReduceMax: acc = std::max(acc, x); break;
          case kReduceAnd: acc &= x; break;
          case kReduceOr: acc |= x; break;
          default: acc ^= x; break;
        }
      });
      const unsigned long long r = static_cast<unsigned>(acc);
      each([&](int l) { b[l].result = r; });
      break;
    }
    case kMatchAny:
      each([&](int l) {
        unsigned eq = 0;
        each([&](int k) { if (b[k].wvalue == b[l].wvalue) eq |= 1u << k; });
        b[l].result = eq;
      });
      break;
    case kWmmaLoad:
    case kWmmaStore:
    case kWmmaMma:
    case kMmaSync: {
      // <mma.h>: each lane passed its WarpCall record; the header's fn computes for the warp
      // (the lanes' records live on their fiber stacks, alive while they wait here).
      void* lanes[32] = {};
      each([&](int l) { lanes[l] = reinterpret_cast<void*>(static_cast<uintptr_t>(b[l].wvalue)); });
      const WarpCall* call = static_cast<const WarpCall*>(lanes[__builtin_ctz(mask)]);
      call->fn(lanes, mask);
      each([&](int l) { b[l].result = 0; });
      break;
    }
    case kMatchAll: {
      bool all = true;
      const unsigned long long v0 = b[__builtin_ctz(mask)].wvalue;
      each([&](int l) { all = all && b[l].wvalue == v0; });
      const unsigned long long r = all ? (mask | (1ull << 32)) : 0;
      each([&](int l) { b[l].result = r; });
      break;
    }
  }
  each([&](int l) {
    const int t = warp * 32 + l;
    if (t == self) return;
    b[l].state = kReady;
    ready[nready++] = t;
  });
}

unsigned long long warp_op(Site s, int kind, unsigned mask, unsigned long long value,
                           unsigned size, int param, int width) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel(kind_name(kind), s);
  return w->warp_arrive(s, kind, mask, value, size, param, width);
}

unsigned activemask() {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("__activemask()", Site{"?", 0});
  const WarpState& ws = w->warps[w->cur >> 5];
  return ws.exist & ~ws.exited;
}

}  // namespace sim::detail
