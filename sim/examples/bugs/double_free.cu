// expect: cudaFree
// Bug: an error path frees the buffer and then the common cleanup frees it again. CUDA returns
// cudaErrorInvalidValue for the second free (compute-sanitizer reports an invalid free); the
// program checks the code, reports it and exits 1.
#include <cstdio>

int main() {
  float* buf = nullptr;
  if (cudaMalloc(&buf, 1024 * sizeof(float)) != cudaSuccess) return 2;
  bool early_out = true;  // say, a validation step failed
  if (early_out) cudaFree(buf);  // the error path's free ...
  cudaError_t e = cudaFree(buf);  // BUG: ... and the cleanup's free of the same pointer
  if (e != cudaSuccess) {
    printf("second free of the buffer failed: %s\n", cudaGetErrorString(e));
    return 1;
  }
  printf("ok\n");
  return 0;
}
