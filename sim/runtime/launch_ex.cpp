// Launch attributes, untyped launches and programmatic dependent launch (sim/include/sim/launch_ex.h):
// the registry of kernels seen with their parameter types (what an untyped launch needs), the
// attributes of cudaLaunchKernelEx, and per stream the previous kernel, whose accesses a PDL
// launch's threads may overlap until they call cudaGridDependencySynchronize() (the hazard
// itself is checked with the global race records, checks.cpp). Tested by tests/sim/test_sim_pdl.cu and
// tests/sim/test_sim_untyped.cu.
#include <map>
#include <set>
#include "internal.h"
#include "sim/launch_ex.h"

namespace sim::detail {

namespace {
struct Known {
  UntypedLauncher launcher;
  const char* name;
  bool from_load;  // name from the registration at load time: a typed use's name replaces it
};
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<const void*, Known>& registry() {
  static auto* r = new std::map<const void*, Known>();  // never destroyed: kernels may launch at exit
  return *r;
}
}  // namespace

void note_kernel(const void* fn, UntypedLauncher launcher, const char* name) {
  std::lock_guard<std::mutex> lk(registry_mutex());
  Known& k = registry()[fn];
  k.launcher = launcher;
  if (name && *name && (!k.name || !*k.name || k.from_load)) k.name = name, k.from_load = false;
}

// Before main (sim/launch.h's kernel_at_load): the kernel's name is what follows "F = " in
// "const char* sim::detail::kernel_pretty() [with auto F = k<float>]".
void note_kernel_at_load(const void* fn, UntypedLauncher launcher, const char* pretty) {
  std::string name = pretty ? pretty : "";
  const size_t at = name.find("F = ");
  name = at == std::string::npos ? std::string("kernel") : name.substr(at + 4);
  if (!name.empty() && name.back() == ']') name.pop_back();
  if (name.size() > 4 && name.compare(0, 3, "(& ") == 0 && name.back() == ')') name = name.substr(3, name.size() - 4);
  std::lock_guard<std::mutex> lk(registry_mutex());
  Known& k = registry()[fn];
  if (!k.launcher) k.launcher = launcher;
  if (k.name && *k.name) return;
  static auto* names = new std::set<std::string>();  // kept for the process, as the map is
  k.name = names->insert(name).first->c_str();
  k.from_load = true;
}

UntypedLauncher find_kernel(const void* fn, const char** name) {
  std::lock_guard<std::mutex> lk(registry_mutex());
  const auto it = registry().find(fn);
  if (it == registry().end()) return nullptr;
  if (name) *name = it->second.name;
  return it->second.launcher;
}

const char* kernel_name_from_args(const char* text) {
  if (!text || !*text) return "kernel";
  static std::mutex m;
  static auto* names = new std::map<const char*, std::string>();  // by the call site's literal
  std::lock_guard<std::mutex> lk(m);
  auto it = names->find(text);
  if (it != names->end()) return it->second.c_str();
  // The second top-level argument: skip the configuration, stop at the next comma outside
  // brackets (template arguments may hold commas).
  std::string t(text), out;
  int depth = 0, arg = 0;
  for (char c : t) {
    if (c == '(' || c == '<' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == '>' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      if (++arg == 2) break;
      continue;
    }
    if (arg == 1) out += c;
  }
  const size_t a = out.find_first_not_of(" \t\n&"), b = out.find_last_not_of(" \t\n");
  out = a == std::string::npos ? std::string("kernel") : out.substr(a, b - a + 1);
  return names->emplace(text, out).first->second.c_str();
}

bool launch_attributes(const cudaLaunchConfig_t* cfg, const void* fn, const char* what, Site s, LaunchParams* lp) {
  if (!cfg) {
    refuse(cudaErrorInvalidValue, what, "config is NULL (at %s:%d)", s.file, s.line);
    return false;
  }
  if (cfg->numAttrs && !cfg->attrs) {
    refuse(cudaErrorInvalidValue, what, "numAttrs = %u with attrs NULL (at %s:%d)", cfg->numAttrs, s.file, s.line);
    return false;
  }
  lp->grid = cfg->gridDim;
  lp->block = cfg->blockDim;
  lp->shmem = cfg->dynamicSmemBytes;
  lp->stream = cfg->stream;
  for (unsigned i = 0; i < cfg->numAttrs; ++i) {
    const cudaLaunchAttribute& a = cfg->attrs[i];
    switch (a.id) {
      case cudaLaunchAttributeIgnore:
      case cudaLaunchAttributeAccessPolicyWindow:  // a cache hint: nothing to model
      case cudaLaunchAttributePriority:
        break;
      case cudaLaunchAttributeCooperative: lp->cooperative = a.val.cooperative != 0; break;
      case cudaLaunchAttributeProgrammaticStreamSerialization:
        lp->pdl = a.val.programmaticStreamSerializationAllowed != 0;
        break;
      case cudaLaunchAttributeClusterDimension:  // checked by launch_prepare (cluster.cpp)
        lp->cluster[0] = a.val.clusterDim.x;
        lp->cluster[1] = a.val.clusterDim.y;
        lp->cluster[2] = a.val.clusterDim.z;
        if (!lp->cluster[0] || !lp->cluster[1] || !lp->cluster[2]) {
          refuse(cudaErrorInvalidClusterSize, what, "cluster dimension %ux%ux%u has a zero (at %s:%d)", lp->cluster[0],
                 lp->cluster[1], lp->cluster[2], s.file, s.line);
          return false;
        }
        break;
      case cudaLaunchAttributeClusterSchedulingPolicyPreference:  // where clusters run: nothing to model
        break;
      default:
        refuse(cudaErrorNotSupported, what, "launch attribute %d is not emulated (at %s:%d)", int(a.id), s.file,
               s.line);
        return false;
    }
  }
  if (lp->cooperative) {
    if (const cudaError_t e = cooperative_fits(fn, lp->grid, lp->block, lp->shmem, lp->name, s.file, s.line)) {
      (void)e;
      return false;
    }
  }
  return true;
}

cudaError_t untyped_launch(const void* fn, const LaunchParams& lp, void** args, const char* what) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  const char* name = nullptr;
  const UntypedLauncher launch = find_kernel(fn, &name);
  if (!launch)
    return refuse(cudaErrorInvalidDeviceFunction, what,
                  "%p is no kernel the emulator has seen with its parameter types (at %s:%d): it learns them "
                  "from a typed use of the kernel, such as cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, "
                  "kernel, threads, shmem) sizing the grid first, a typed launch, or the typed overload "
                  "cudaLaunchCooperativeKernel(kernel, ...)",
                  fn, lp.file, lp.line);
  LaunchParams p = lp;
  if (name && *name) p.name = name;
  launch(fn, p, args);
  return launch_error_of_call();
}

// ---- programmatic dependent launch ---------------------------------------------------------
namespace {
struct LastKernel {
  uint64_t race_id = 0;
  bool pdl = false, early = false;
  uint64_t primary = 0;  // its own first primary
};
std::mutex g_pdl_m;
std::map<cudaStream_t, LastKernel>& last_kernels() {
  static auto* m = new std::map<cudaStream_t, LastKernel>();
  return *m;
}
bool legacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }
}  // namespace

void pdl_launch_begin(Launch& L, const LaunchParams& p) {
  L.pdl = p.pdl;
  L.pdl_primary[0] = L.pdl_primary[1] = 0;
  L.triggered.store(false);
  L.early_trigger.store(false);
  if (!p.pdl) return;
  std::lock_guard<std::mutex> lk(g_pdl_m);
  const auto it = last_kernels().find(p.stream);
  if (it == last_kernels().end()) return;
  L.pdl_primary[0] = it->second.race_id;
  // That kernel let this one start before it had waited for its own predecessor: the one
  // before it may still run too.
  if (it->second.pdl && it->second.early) L.pdl_primary[1] = it->second.primary;
}

void pdl_launch_end(const Launch& L, const LaunchParams& p) {
  std::lock_guard<std::mutex> lk(g_pdl_m);
  LastKernel& k = last_kernels()[p.stream];
  k.race_id = L.race_id;
  k.pdl = L.pdl;
  k.early = L.early_trigger.load();
  k.primary = L.pdl_primary[0];
}

void pdl_stream_op(cudaStream_t s) {
  std::lock_guard<std::mutex> lk(g_pdl_m);
  if (legacy(s)) last_kernels().clear();
  else last_kernels().erase(s);
}

void pdl_reset() {
  std::lock_guard<std::mutex> lk(g_pdl_m);
  last_kernels().clear();
}

void global_race_watch_const_reads();  // checks.cpp

void pdl_wait(Site s) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("cudaGridDependencySynchronize()", s);
  w->ctx[w->cur].pdl_waited = 1;
}

void pdl_trigger(Site s) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("cudaTriggerProgrammaticLaunchCompletion()", s);
  if (w->pdl_triggered) return;
  w->pdl_triggered = true;
  if (w->L->pdl && !w->ctx[w->cur].pdl_waited) w->L->early_trigger.store(true);
  // From now on the next kernel may run beside this block: its later reads of read-only
  // arguments are recorded too (a write of the next kernel before its wait would race them).
  if (!w->L->triggered.exchange(true)) global_race_watch_const_reads();
}

}  // namespace sim::detail
