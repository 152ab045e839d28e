// NN_RANGE("name"): an NVTX range for the rest of the enclosing scope (NvtxRange: one held as an
// object). Uses the
// header-only NVTX3 from the CUDA toolkit when present (both builds; it costs nothing
// unless a tool such as nsys injects itself), and compiles to nothing otherwise.
#pragma once

#if defined(NN_HAVE_NVTX) && __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
namespace nn {
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};
}  // namespace nn
#define NN_RANGE_CAT2(a, b) a##b
#define NN_RANGE_CAT(a, b) NN_RANGE_CAT2(a, b)
#define NN_RANGE(name) ::nn::NvtxRange NN_RANGE_CAT(nn_range_, __LINE__)(name)
#else
namespace nn {
class NvtxRange {  // without NVTX: nothing
 public:
  explicit NvtxRange(const char*) {}
};
}  // namespace nn
#define NN_RANGE(name) ((void)0)
#endif
