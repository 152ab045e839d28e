// The --device cpu model's GEMM libraries (cpu_gemm.h).
#include "model/cpu_gemm.h"

#include <cblas.h>
#ifdef NN_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>
#endif

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace nn::model {

const char* cpu_gemm_name(CpuGemm g) {
  return g == CpuGemm::OneDNN ? "onednn" : g == CpuGemm::OpenBLAS ? "openblas" : "auto";
}

CpuGemm resolved_cpu_gemm(CpuGemm asked, bool is_double) {
  if (asked != CpuGemm::Auto) return asked;
  return !is_double && cpu_gemm_available(CpuGemm::OneDNN) ? CpuGemm::OneDNN : CpuGemm::OpenBLAS;
}

bool cpu_gemm_available([[maybe_unused]] CpuGemm g) {
#ifdef NN_HAVE_DNNL
  return true;
#else
  return g != CpuGemm::OneDNN;
#endif
}

std::string cpu_gemm_version(CpuGemm g) {
  if (g == CpuGemm::OneDNN) {
#ifdef NN_HAVE_DNNL
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
#else
    return "oneDNN (not in this build: make DNNL=0)";
#endif
  }
  // openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": its first two words.
  std::string c = openblas_get_config();
  std::size_t end = c.find(' ');
  if (end != std::string::npos) end = c.find(' ', end + 1);
  return c.substr(0, end);
}

void cpu_sgemm(CpuGemm lib, bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
               const float* B, int ldb, float beta, float* C, int ldc) {
  if (lib == CpuGemm::OneDNN) {
#ifdef NN_HAVE_DNNL
    // oneDNN is row-major: the column-major C = op(A) op(B) is the row-major C^T = op(B)^T op(A)^T.
    const dnnl_status_t s = dnnl_sgemm(tb ? 'T' : 'N', ta ? 'T' : 'N', N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
    if (s != dnnl_success) throw std::runtime_error("dnnl_sgemm failed with status " + std::to_string(int(s)));
    return;
#else
    throw std::invalid_argument("cpu_sgemm: this build has no oneDNN (make DNNL=0)");
#endif
  }
  cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
              B, ldb, beta, C, ldc);
}

void cpu_dgemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda, const double* B,
               int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
              B, ldb, beta, C, ldc);
}

void set_gemm_threads(int n) {
  n = std::max(1, n);
  openblas_set_num_threads(n);
#ifdef NN_HAVE_DNNL
  omp_set_num_threads(n);
#endif
}

}  // namespace nn::model
