// nvtx_recorder: a tiny NVTX injection library for tests/nvtx/check_nvtx.sh.
//
// Build it as a shared library (C++ only, no CUDA runtime):
//   g++ -std=c++20 -O2 -fPIC -shared -I<dir holding nvtx3/> nvtx_recorder.cpp -o libnvtx_recorder.so
// and run a program that uses NVTX3 with
//   NVTX_INJECTION64_PATH=/abs/path/libnvtx_recorder.so NVTX_RECORD_DIR=/some/dir program ...
//
// How it attaches: on the program's first NVTX call, the NVTX3 header code reads
// NVTX_INJECTION64_PATH, dlopen()s the library and calls its InitializeInjectionNvtx2
// with the program's nvtxGetExportTable. The callbacks export table
// (NVTX_ETID_CALLBACKS) hands out, per module, an array of pointers to the program's
// function-pointer slots; writing a slot routes that NVTX API call here. Slots left
// alone become no-ops.
//
// What it records (core module only): RangePushA/W/Ex, RangePop, RangeStartA/W/Ex,
// RangeEnd, MarkA/W/Ex, kept per thread (each thread has its own push/pop stack).
// At process exit it writes one log per process into $NVTX_RECORD_DIR:
//   nvtx.rank<R>.pid<P>.log   (R from OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK; "none")
// Lines (tab-separated; names have tabs and newlines replaced by spaces):
//   # nvtx_recorder pid=<P> rank=<R>
//   push   <thread> <depth> <name>    depth of the new range: 0 = outermost
//   pop    <thread> <depth> <name>    depth and name of the range closed
//   pop    <thread> -1      -         a pop with nothing open (an error)
//   mark   <thread> <depth> <name>    depth = ranges open on that thread
//   start  <thread> <id>    <name>    start/end ranges (not nested; matched by id)
//   end    <thread> <id>    <name or ->
//   summary pushes=N pops=N underflows=N unclosed=N starts=N ends=N unmatched_ends=N open_starts=N marks=N threads=N dropped=N balanced=yes|no
// <thread> is a small index in order of first NVTX use (0 = the first thread).
// The file is written under a temporary name and renamed, so a reader sees all or nothing.
// Without NVTX_RECORD_DIR only the summary line goes to stderr.
//
// The library writes nothing unless it was actually injected (InitializeInjectionNvtx2
// called), so linking this file into some other program by accident is harmless.

#if __has_include(<nvtx3/nvToolsExt.h>)
#define NVTX_NO_IMPL  // types and declarations only: a tool must not carry the NVTX implementation
#include <nvtx3/nvToolsExt.h>
#define NVTX_RECORDER_ENABLED 1
#else
#define NVTX_RECORDER_ENABLED 0
#endif

#if NVTX_RECORDER_ENABLED

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cwchar>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <unistd.h>

namespace {

enum class Kind : std::uint8_t { Push, Pop, Mark, Start, End };

struct Event {
  Kind kind;
  std::uint32_t thread;
  std::int64_t value;  // depth (push/pop/mark) or range id (start/end)
  std::string name;
};

struct ThreadState {
  std::uint32_t index = 0;
  std::vector<std::string> stack;  // names of the open push/pop ranges
};

// Enough events for any sane test run; past it, events are counted but not kept.
constexpr std::size_t kMaxEvents = std::size_t(1) << 24;

struct Recorder {
  std::mutex mu;
  bool injected = false;
  std::vector<Event> events;
  std::unordered_map<std::thread::id, ThreadState> threads;
  std::unordered_map<std::uint64_t, std::string> open_starts;  // start/end ranges by id
  std::uint64_t next_id = 1;
  std::uint64_t pushes = 0, pops = 0, underflows = 0, starts = 0, ends = 0, unmatched_ends = 0, marks = 0,
                dropped = 0;

  ThreadState& self() {
    auto [it, fresh] = threads.try_emplace(std::this_thread::get_id());
    if (fresh) it->second.index = std::uint32_t(threads.size() - 1);
    return it->second;
  }
  void add(Kind k, std::uint32_t thread, std::int64_t value, std::string name) {
    if (events.size() >= kMaxEvents) {
      ++dropped;
      return;
    }
    events.push_back(Event{k, thread, value, std::move(name)});
  }

  int push(std::string name) {
    std::lock_guard<std::mutex> lock(mu);
    ThreadState& t = self();
    const int depth = int(t.stack.size());
    ++pushes;
    add(Kind::Push, t.index, depth, name);
    t.stack.push_back(std::move(name));
    return depth;
  }
  int pop() {
    std::lock_guard<std::mutex> lock(mu);
    ThreadState& t = self();
    if (t.stack.empty()) {
      ++underflows;
      add(Kind::Pop, t.index, -1, "-");
      return -1;
    }
    ++pops;
    const int depth = int(t.stack.size()) - 1;
    add(Kind::Pop, t.index, depth, t.stack.back());
    t.stack.pop_back();
    return depth;
  }
  void mark(std::string name) {
    std::lock_guard<std::mutex> lock(mu);
    ThreadState& t = self();
    ++marks;
    add(Kind::Mark, t.index, std::int64_t(t.stack.size()), std::move(name));
  }
  std::uint64_t start(std::string name) {
    std::lock_guard<std::mutex> lock(mu);
    ThreadState& t = self();
    const std::uint64_t id = next_id++;
    ++starts;
    add(Kind::Start, t.index, std::int64_t(id), name);
    open_starts.emplace(id, std::move(name));
    return id;
  }
  void end(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    ThreadState& t = self();
    auto it = open_starts.find(id);
    if (it == open_starts.end()) {
      ++unmatched_ends;
      add(Kind::End, t.index, std::int64_t(id), "-");
      return;
    }
    ++ends;
    add(Kind::End, t.index, std::int64_t(id), it->second);
    open_starts.erase(it);
  }

  std::string summary_locked() const {
    std::uint64_t unclosed = 0;
    for (const auto& [id, t] : threads) unclosed += t.stack.size();
    const bool balanced = unclosed == 0 && underflows == 0 && pushes == pops && open_starts.empty() &&
                          unmatched_ends == 0;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "summary\tpushes=%llu\tpops=%llu\tunderflows=%llu\tunclosed=%llu\tstarts=%llu\tends=%llu\t"
                  "unmatched_ends=%llu\topen_starts=%llu\tmarks=%llu\tthreads=%llu\tdropped=%llu\tbalanced=%s",
                  (unsigned long long)pushes, (unsigned long long)pops, (unsigned long long)underflows,
                  (unsigned long long)unclosed, (unsigned long long)starts, (unsigned long long)ends,
                  (unsigned long long)unmatched_ends, (unsigned long long)open_starts.size(),
                  (unsigned long long)marks, (unsigned long long)threads.size(), (unsigned long long)dropped,
                  balanced ? "yes" : "no");
    return buf;
  }

  static const char* rank_env() {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
      const char* r = std::getenv(v);
      if (r && *r) return r;
    }
    return nullptr;
  }

  void write_log() {
    std::lock_guard<std::mutex> lock(mu);
    if (!injected) return;
    injected = false;  // once
    const std::string summary = summary_locked();
    const char* dir = std::getenv("NVTX_RECORD_DIR");
    if (!dir || !*dir) {
      std::fprintf(stderr, "nvtx_recorder: %s\n", summary.c_str());
      return;
    }
    const char* rank = rank_env();
    std::string rank_tag = "none";
    if (rank) {
      rank_tag.clear();
      for (const char* c = rank; *c; ++c) rank_tag += (*c >= '0' && *c <= '9') ? *c : '_';
    }
    const std::string base = std::string(dir) + "/nvtx.rank" + rank_tag + ".pid" + std::to_string(getpid()) + ".log";
    const std::string tmp = base + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "nvtx_recorder: cannot write %s\n", tmp.c_str());
      return;
    }
    std::fprintf(f, "# nvtx_recorder pid=%ld rank=%s\n", long(getpid()), rank_tag.c_str());
    static const char* const kNames[] = {"push", "pop", "mark", "start", "end"};
    for (const Event& e : events)
      std::fprintf(f, "%s\t%u\t%lld\t%s\n", kNames[int(e.kind)], unsigned(e.thread), (long long)e.value,
                   e.name.c_str());
    std::fprintf(f, "%s\n", summary.c_str());
    const bool ok = std::ferror(f) == 0;
    if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), base.c_str()) != 0) {
      std::fprintf(stderr, "nvtx_recorder: write error on %s\n", base.c_str());
      std::remove(tmp.c_str());
    }
  }

};

// Never destroyed: a thread still making NVTX calls while the process exits finds it
// intact (its events just miss the log). The log is written by an atexit handler.
Recorder& recorder() {
  static Recorder* const r = new Recorder;
  return *r;
}

void write_at_exit() { recorder().write_log(); }

std::string clean(const char* s) {
  if (!s) return "(null)";
  std::string out(s);
  for (char& c : out)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return out;
}

std::string clean(const wchar_t* s) {
  if (!s) return "(null)";
  std::string out;
  for (; *s; ++s) {
    const wchar_t c = *s;
    out += (c == L'\t' || c == L'\n' || c == L'\r') ? ' ' : (c >= 0x20 && c < 0x7f) ? char(c) : '?';
  }
  return out;
}

std::string message_of(const nvtxEventAttributes_t* a) {
  if (!a) return "(null attributes)";
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return clean(a->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE: return clean(a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED: return "(registered string)";
    default: return "(no message)";
  }
}

// ---- the callbacks: signatures exactly as the nvtx*_impl_fntype typedefs ----
int NVTX_API push_a(const char* m) { return recorder().push(clean(m)); }
int NVTX_API push_w(const wchar_t* m) { return recorder().push(clean(m)); }
int NVTX_API push_ex(const nvtxEventAttributes_t* a) { return recorder().push(message_of(a)); }
int NVTX_API range_pop() { return recorder().pop(); }
void NVTX_API mark_a(const char* m) { recorder().mark(clean(m)); }
void NVTX_API mark_w(const wchar_t* m) { recorder().mark(clean(m)); }
void NVTX_API mark_ex(const nvtxEventAttributes_t* a) { recorder().mark(message_of(a)); }
nvtxRangeId_t NVTX_API start_a(const char* m) { return recorder().start(clean(m)); }
nvtxRangeId_t NVTX_API start_w(const wchar_t* m) { return recorder().start(clean(m)); }
nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t* a) { return recorder().start(message_of(a)); }
void NVTX_API range_end(nvtxRangeId_t id) { recorder().end(id); }

static_assert(std::is_same_v<decltype(&push_a), nvtxRangePushA_impl_fntype>);
static_assert(std::is_same_v<decltype(&push_w), nvtxRangePushW_impl_fntype>);
static_assert(std::is_same_v<decltype(&push_ex), nvtxRangePushEx_impl_fntype>);
static_assert(std::is_same_v<decltype(&range_pop), nvtxRangePop_impl_fntype>);
static_assert(std::is_same_v<decltype(&mark_a), nvtxMarkA_impl_fntype>);
static_assert(std::is_same_v<decltype(&mark_w), nvtxMarkW_impl_fntype>);
static_assert(std::is_same_v<decltype(&mark_ex), nvtxMarkEx_impl_fntype>);
static_assert(std::is_same_v<decltype(&start_a), nvtxRangeStartA_impl_fntype>);
static_assert(std::is_same_v<decltype(&start_w), nvtxRangeStartW_impl_fntype>);
static_assert(std::is_same_v<decltype(&start_ex), nvtxRangeStartEx_impl_fntype>);
static_assert(std::is_same_v<decltype(&range_end), nvtxRangeEnd_impl_fntype>);

template <class Fn>
bool install(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  // size is the largest valid index (the table has one unused slot 0).
  if (id == 0 || id > size || !table[id]) return false;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  if (!get_table) return 0;
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (!cb || cb->struct_size < sizeof(NvtxExportTableCallbacks) || !cb->GetModuleFunctionTable) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table) return 0;

  // The two that the range test needs must take; the rest are best effort.
  bool ok = install(table, size, NVTX_CBID_CORE_RangePushA, &push_a);
  ok = install(table, size, NVTX_CBID_CORE_RangePop, &range_pop) && ok;
  if (!ok) return 0;
  install(table, size, NVTX_CBID_CORE_RangePushW, &push_w);
  install(table, size, NVTX_CBID_CORE_RangePushEx, &push_ex);
  install(table, size, NVTX_CBID_CORE_MarkA, &mark_a);
  install(table, size, NVTX_CBID_CORE_MarkW, &mark_w);
  install(table, size, NVTX_CBID_CORE_MarkEx, &mark_ex);
  install(table, size, NVTX_CBID_CORE_RangeStartA, &start_a);
  install(table, size, NVTX_CBID_CORE_RangeStartW, &start_w);
  install(table, size, NVTX_CBID_CORE_RangeStartEx, &start_ex);
  install(table, size, NVTX_CBID_CORE_RangeEnd, &range_end);

  if (const auto* vi = static_cast<const NvtxExportTableVersionInfo*>(get_table(NVTX_ETID_VERSIONINFO));
      vi && vi->struct_size >= sizeof(NvtxExportTableVersionInfo) && vi->SetInjectionNvtxVersion)
    vi->SetInjectionNvtxVersion(NVTX_VERSION);

  Recorder& r = recorder();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.injected) return 1;  // a second NVTX instance in the process: one log is enough
    r.injected = true;
  }
  // Registered now, i.e. after the program's own early statics, so it runs before their
  // destructors; ranges are scoped (NN_RANGE), so none is open in a static destructor.
  std::atexit(write_at_exit);
  return 1;
}

#endif  // NVTX_RECORDER_ENABLED
