// The emulated cuBLAS (include/cublas_api.h): handles, stream, pointer/math modes, workspace,
// and SGEMM/DGEMM computed by the host's CBLAS (OpenBLAS), independently of the project's own
// GEMM kernels. A GEMM is queued on the handle's stream exactly like a kernel (capture_node:
// stream capture records it, the lazy stream mode defers it) and, when it runs, checks its
// matrices like a kernel's pointer arguments. Argument checks return cuBLAS's documented status
// codes at the call. Only programs that call cuBLAS pull this file out of the runtime archive,
// so only they need -lopenblas. Tested by tests/sim/test_sim_cublas_*.cu and, as the trainer's
// GEMM variant 0, by tests/kernels/test_gemm.cpp.
#include <cblas.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "cublas_api.h"
#include "internal.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  void* workspace = nullptr;  // recorded only: the host BLAS needs no device scratch
  size_t workspace_bytes = 0;
  unsigned long long resets = sim::detail::device_resets();  // at creation
};

namespace sim::detail {
namespace {

std::mutex& handles_mutex() {
  static auto* m = new std::mutex();  // never destroyed: usable from static destructors
  return *m;
}
std::set<cublasContext*>& handles() {
  static auto* h = new std::set<cublasContext*>();
  return *h;
}
// A live handle: created and not destroyed, and not from before a cudaDeviceReset. A null or
// destroyed handle is NOT_INITIALIZED (on a GPU a destroyed one is undefined behaviour; here
// it is always caught). A handle kept across a reset points at device state the reset freed:
// on an H200 its next cublasSgemm returned CUBLAS_STATUS_EXECUTION_FAILED and a later kernel
// faulted with an illegal address; here every call but cublasDestroy refuses it.
bool registered(cublasHandle_t h) {
  if (!h) return false;
  std::lock_guard<std::mutex> lk(handles_mutex());
  return handles().count(h) != 0;
}
bool stale(cublasHandle_t h) { return h->resets != device_resets(); }
bool live(cublasHandle_t h) { return registered(h) && !stale(h); }
constexpr const char* kStaleHandle =
    "the handle was created before a cudaDeviceReset (sim::reset), which freed the device state "
    "it uses: destroy cuBLAS handles before a reset, create new ones after";
std::string bad_handle_why(cublasHandle_t h) {
  return registered(h) ? kStaleHandle : "bad handle (NULL, destroyed, or not from cublasCreate)";
}

const char* status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

// A refused call returns its status; in abort mode it also says why on stderr (as a refused
// launch does), since a program that ignores the status would otherwise go on silently.
cublasStatus_t refuse(cublasStatus_t s, const char* fn, const std::string& why) {
  if (settings().fault_mode == FaultMode::Abort)
    std::fprintf(stderr, "sim: %s returned %s: %s\n", fn, status_name(s), why.c_str());
  return s;
}

const char* op_name(cublasOperation_t op) {
  switch (op) {
    case CUBLAS_OP_N: return "CUBLAS_OP_N";
    case CUBLAS_OP_T: return "CUBLAS_OP_T";
    case CUBLAS_OP_C: return "CUBLAS_OP_C";
    default: return "invalid";
  }
}
bool gemm_op_ok(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// FP32 rounded to TF32 (8-bit exponent, 10 explicit mantissa bits): to nearest, ties away from
// zero, as the tensor cores' cvt.rna.tf32.f32 does. Inf and NaN pass unchanged.
float to_tf32(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) {
    u += 0x1000u;  // half of the 13 dropped bits, added to the magnitude
    u &= 0xffffe000u;
  }
  std::memcpy(&x, &u, sizeof x);
  return x;
}

bool tf32_overridden_off() {  // NVIDIA_TF32_OVERRIDE=0 disables TF32 everywhere (documented)
  const char* v = std::getenv("NVIDIA_TF32_OVERRIDE");
  return v && std::strcmp(v, "0") == 0;
}

// One GEMM, as queued: everything taken at the call (the handle's modes, host-mode scalars),
// except device-mode scalars and the matrices themselves, read when it runs.
template <class T>
struct Gemm {
  const char* fn;  // "cublasSgemm" / "cublasDgemm"
  bool a_trans, b_trans;
  int m, n, k;
  bool device_scalars;
  T alpha, beta;                      // host pointer mode
  const T *dalpha, *dbeta;            // device pointer mode
  const T* A;
  int lda;
  const T* B;
  int ldb;
  T* C;
  int ldc;
  bool tf32;

  static const char* type() { return std::is_same_v<T, float> ? "float" : "double"; }

  // [p, p + its footprint) must be device memory (a kernel could read it): a column-major
  // rows x cols matrix with leading dimension ld spans (cols - 1) * ld + rows elements. The
  // whole span must lie inside one device allocation.
  bool check(const char* arg, const void* p, int rows, int cols, int ld, bool writes) const {
    const size_t elems = static_cast<size_t>(cols - 1) * static_cast<size_t>(ld) + rows;
    const size_t bytes = elems * sizeof(T);
    const char* what = writes ? "written" : "read";
    std::string why;
    cudaError_t err = cudaErrorIllegalAddress;
    if (p == nullptr) {
      why = "is a null pointer";
    } else if (!is_kernel_accessible(p)) {
      why = "is not a device pointer (host memory?)";
    } else if (!device_range(p, bytes)) {
      why = strf("is device memory, but the %d x %d matrix %s there (leading dimension %d, "
                 "%zu bytes) runs past the end of its allocation",
                 rows, cols, what, ld, bytes);
    } else if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0) {
      why = strf("is not aligned to %zu bytes", alignof(T));
      err = cudaErrorMisalignedAddress;
    } else {
      return true;
    }
    report_fault(err, strf("%s argument %s (%s%s*) = %p %s", fn, arg, writes ? "" : "const ",
                           type(), p, why.c_str()));
    return false;
  }

  void operator()() const {
    // Like a kernel launched behind a faulted one: a sticky error means it does not run.
    if (sticky_error() != cudaSuccess) return;
    T al = alpha, be = beta;
    if (device_scalars) {
      if (!check("alpha", dalpha, 1, 1, 1, false) || !check("beta", dbeta, 1, 1, 1, false)) return;
      std::memcpy(&al, device_view(dalpha), sizeof(T));
      std::memcpy(&be, device_view(dbeta), sizeof(T));
    }
    // BLAS semantics: with k == 0 or alpha == 0, A and B are not read; with beta == 0, C is
    // not read (so NaN in C never reaches the result: C is cleared, never multiplied by 0).
    const bool product = k > 0 && al != T(0);
    const int a_rows = a_trans ? k : m, a_cols = a_trans ? m : k;
    const int b_rows = b_trans ? n : k, b_cols = b_trans ? k : n;
    if (product && (!check("A", A, a_rows, a_cols, lda, false) ||
                    !check("B", B, b_rows, b_cols, ldb, false)))
      return;
    if (!check("C", C, m, n, ldc, true)) return;
    T* c = static_cast<T*>(device_view(C));
    for (int j = 0; j < n; ++j) mark_written(c + static_cast<size_t>(j) * ldc, sizeof(T) * m);  // initcheck
    if (be == T(0) || (!product && be != T(1))) {
      for (int j = 0; j < n; ++j) {
        T* col = c + static_cast<size_t>(j) * ldc;
        for (int i = 0; i < m; ++i) col[i] = be == T(0) ? T(0) : be * col[i];
      }
    }
    if (!product) return;
    const T* a = static_cast<const T*>(device_view(A));
    const T* b = static_cast<const T*>(device_view(B));
    int la = lda, lb = ldb;
    std::vector<T> ta, tb;
    if constexpr (std::is_same_v<T, float>) {
      if (tf32) {  // tensor-op math: the inputs are rounded to TF32, the sums stay FP32
        auto round = [](const float* x, int rows, int cols, int ld, std::vector<float>& out) {
          out.resize(static_cast<size_t>(rows) * cols);
          for (int j = 0; j < cols; ++j)
            for (int i = 0; i < rows; ++i)
              out[i + static_cast<size_t>(j) * rows] = to_tf32(x[i + static_cast<size_t>(j) * ld]);
        };
        round(a, a_rows, a_cols, lda, ta);
        round(b, b_rows, b_cols, ldb, tb);
        a = ta.data();
        b = tb.data();
        la = a_rows;
        lb = b_rows;
      }
    }
    // C was cleared above when beta == 0, so beta is passed as given.
    const CBLAS_TRANSPOSE opa = a_trans ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE opb = b_trans ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasColMajor, opa, opb, m, n, k, al, a, la, b, lb, be, c, ldc);
    else
      cblas_dgemm(CblasColMajor, opa, opb, m, n, k, al, a, la, b, lb, be, c, ldc);
  }
};

int imax(int a, int b) { return a > b ? a : b; }

template <class T>
cublasStatus_t gemm(const char* fn, cublasHandle_t h, cublasOperation_t transa,
                    cublasOperation_t transb, int m, int n, int k, const T* alpha, const T* A,
                    int lda, const T* B, int ldb, const T* beta, T* C, int ldc) {
  if (!registered(h))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, fn,
                  "the handle was not created by cublasCreate or was destroyed");
  if (stale(h))
    return refuse(CUBLAS_STATUS_EXECUTION_FAILED, fn, kStaleHandle);
  // The documented CUBLAS_STATUS_INVALID_VALUE cases, in that order.
  if (m < 0 || n < 0 || k < 0)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fn,
                  strf("m = %d, n = %d, k = %d: negative size", m, n, k));
  if (!gemm_op_ok(transa) || !gemm_op_ok(transb))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fn,
                  strf("transa = %d, transb = %d: not CUBLAS_OP_N, CUBLAS_OP_T or CUBLAS_OP_C",
                       int(transa), int(transb)));
  const bool at = transa != CUBLAS_OP_N, bt = transb != CUBLAS_OP_N;
  const int a_rows = at ? k : m, b_rows = bt ? n : k;
  if (lda < imax(1, a_rows))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fn,
                  strf("lda = %d < max(1, %s = %d) for transa = %s", lda, at ? "k" : "m", a_rows,
                       op_name(transa)));
  if (ldb < imax(1, b_rows))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fn,
                  strf("ldb = %d < max(1, %s = %d) for transb = %s", ldb, bt ? "n" : "k", b_rows,
                       op_name(transb)));
  if (ldc < imax(1, m))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, strf("ldc = %d < max(1, m = %d)", ldc, m));
  if (!alpha || !beta) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "alpha or beta is NULL");
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;  // nothing to compute, nothing read

  Gemm<T> g{fn, at, bt, m, n, k, h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE, T(0), T(0),
            nullptr, nullptr, A, lda, B, ldb, C, ldc, false};
  if (g.device_scalars) {
    g.dalpha = alpha;
    g.dbeta = beta;
  } else {  // host pointer mode: the values count as of the call
    g.alpha = *alpha;
    g.beta = *beta;
    if ((k == 0 || g.alpha == T(0)) && g.beta == T(1)) return CUBLAS_STATUS_SUCCESS;  // C stays
  }
  if (!C) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "C is NULL but must be written");
  if constexpr (std::is_same_v<T, float>)
    g.tf32 = (h->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH && !tf32_overridden_off();

  // Launching the GEMM's kernel: as a kernel launch would fail, so does the call.
  if (sticky_error() != cudaSuccess)
    return refuse(CUBLAS_STATUS_EXECUTION_FAILED, fn, "a previous fault left a sticky CUDA error");
  if (!stream_valid(h->stream)) {
    set_error(cudaErrorInvalidResourceHandle);
    return refuse(CUBLAS_STATUS_EXECUTION_FAILED, fn, "the handle's stream is not a valid stream");
  }
  switch (capture_node(h->stream, g)) {
    case CaptureVerdict::Captured:
    case CaptureVerdict::Deferred: return CUBLAS_STATUS_SUCCESS;
    case CaptureVerdict::Refused:
      return refuse(CUBLAS_STATUS_EXECUTION_FAILED, fn, "the stream capture refused the launch");
    case CaptureVerdict::Run: break;
  }
  // A fault while it runs is asynchronous on a GPU: the call succeeded, the sticky error
  // (cudaErrorIllegalAddress) is what later CUDA calls return.
  g();
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace
}  // namespace sim::detail

using namespace sim::detail;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (!handle) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate", "handle is NULL");
  if (sticky_error() != cudaSuccess) {
    *handle = nullptr;
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate",
                  "the CUDA context has a sticky error");
  }
  auto* h = new cublasContext();
  {
    std::lock_guard<std::mutex> lk(handles_mutex());
    handles().insert(h);
  }
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  {
    std::lock_guard<std::mutex> lk(handles_mutex());
    if (!handle || !handles().erase(handle))
      return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy",
                    "the handle was not created by cublasCreate or was already destroyed");
  }
  delete handle;  // queued GEMMs hold copies of what they need, never the handle
  // cublasDestroy synchronises the device (documented): queued work runs now.
  if (lazy_streams() && !in_replay()) lazy_drain_all();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  if (!live(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream", bad_handle_why(handle));
  handle->stream = streamId;
  handle->workspace = nullptr;  // documented: setting the stream resets the workspace
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
  if (!live(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStream", bad_handle_why(handle));
  if (!streamId) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream", "streamId is NULL");
  *streamId = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS documents a 256-byte aligned workspace but does not check it: cuBLAS 13.0 on an H200
// accepted one 16 bytes off (tests/sim/test_sim_cublas_args.cu), and so does this.
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                     size_t workspaceSizeInBytes) {
  if (!live(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetWorkspace", bad_handle_why(handle));
  handle->workspace = workspace;
  handle->workspace_bytes = workspaceSizeInBytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!live(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetPointerMode", bad_handle_why(handle));
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasSetPointerMode",
                  strf("mode = %d is not a cublasPointerMode_t", int(mode)));
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  if (!live(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetPointerMode", bad_handle_why(handle));
  if (!mode) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasGetPointerMode", "mode is NULL");
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!live(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode", bad_handle_why(handle));
  // Any combination of cuBLAS 13's five mode bits (1, 2, 4, 8, 16) is accepted and kept, as
  // cuBLAS 13.0 on an H200 did (5 accepted, 32 refused; tests/sim/test_sim_cublas_args.cu).
  // The BF16x9 and fixed-point emulations aim at full FP32/FP64 accuracy: every
  // mode is computed as the default.
  if (static_cast<unsigned>(mode) & ~31u)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode",
                  strf("mode = %d is not a cublasMath_t", int(mode)));
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!live(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetMathMode", bad_handle_why(handle));
  if (!mode) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasGetMathMode", "mode is NULL");
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) { return status_name(status); }

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized (bad handle)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "a resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was passed as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the device lacks a required feature";
    case CUBLAS_STATUS_MAPPING_ERROR: return "access to GPU memory failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "license error";
  }
  return "unknown cuBLAS status";
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  return gemm<float>("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta,
                     C, ldc);
}

cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const double* alpha,
                              const double* A, int lda, const double* B, int ldb,
                              const double* beta, double* C, int ldc) {
  return gemm<double>("cublasDgemm", handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta,
                      C, ldc);
}

}  // extern "C"
