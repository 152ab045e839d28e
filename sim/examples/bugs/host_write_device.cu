// expect: host code wrote device memory
// Bug: the host initialises a cudaMalloc buffer in a loop instead of cudaMemcpy.
#include <cstdio>

__global__ void sum(const int* v, int n, int* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    int s = 0;
    for (int i = 0; i < n; ++i) s += v[i];
    *out = s;
  }
}

int main() {
  const int n = 100;
  int *d = nullptr, *d_out = nullptr;
  cudaMalloc(&d, n * sizeof(int));
  cudaMalloc(&d_out, sizeof(int));
  for (int i = 0; i < n; ++i) d[i] = i;  // BUG: host writes device memory
  sum<<<1, 32>>>(d, n, d_out);
  int s = 0;
  cudaMemcpy(&s, d_out, sizeof s, cudaMemcpyDeviceToHost);
  printf("sum = %d\n", s);
  return s == 4950 ? 0 : 1;
}
