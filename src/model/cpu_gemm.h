// The GEMM library of the --device cpu model (cpu_model.h): OpenBLAS's cblas_?gemm, or
// oneDNN's dnnl_sgemm (--cpu-gemm onednn; float only). Which is faster depends on the shape and
// the threads: `make cpu-gemm-lab` measures them (docs/performance.md, "CPU GEMMs"). One
// library per process: the two keep thread pools of their own (OpenBLAS's pthreads, oneDNN's
// OpenMP threads) that spin after a call, and used in turn they take the cores from each
// other. Tested by tests/model/test_cpu_model_gemm.cpp.
#pragma once
#include <string>

namespace nn::model {

// Auto: the default, resolved once per run by resolved_cpu_gemm (below).
enum class CpuGemm { Auto, OpenBLAS, OneDNN };
const char* cpu_gemm_name(CpuGemm g);  // "auto", "openblas", "onednn" (the --cpu-gemm values)
bool cpu_gemm_available(CpuGemm g);     // oneDNN: not in a `make DNNL=0` build
std::string cpu_gemm_version(CpuGemm g);  // e.g. "OpenBLAS 0.3.21", "oneDNN 2.6.3"

// The library a run uses for `asked`: Auto is oneDNN for float where the build has it (it was
// as fast as OpenBLAS or faster at every shape and thread count measured: docs/performance.md,
// "CPU GEMMs" and "make peer"), else OpenBLAS (double, `make DNNL=0`); the others stay as asked.
CpuGemm resolved_cpu_gemm(CpuGemm asked, bool is_double);

// Column-major C = alpha op(A) op(B) + beta C, with the library `lib`. dgemm is OpenBLAS's
// whatever `lib` says (oneDNN has no double GEMM; the trainer refuses that combination).
void cpu_sgemm(CpuGemm lib, bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
               const float* B, int ldb, float beta, float* C, int ldc);
void cpu_dgemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda, const double* B,
               int ldb, double beta, double* C, int ldc);
// The same as one name for both precisions (CpuModel<T>).
inline void cpu_gemm(CpuGemm lib, bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                     const float* B, int ldb, float beta, float* C, int ldc) {
  cpu_sgemm(lib, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void cpu_gemm(CpuGemm, bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda,
                     const double* B, int ldb, double beta, double* C, int ldc) {
  cpu_dgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Threads for both libraries' pools (openblas_set_num_threads, and omp_set_num_threads for
// oneDNN's OpenMP runtime).
void set_gemm_threads(int n);

}  // namespace nn::model
