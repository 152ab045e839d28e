// Atomic adds on GPGPU-Sim, on global and shared memory: unsigned, unsigned long long, float and
// double (the unpatched simulator aborted on atom.add.f64), with the returned old values used and unused
// (nvcc 13 emits atom.* for both; red.* is not used). Summands are small integers, so every sum is exact in any order.
// Built by make test-gpgpusim with the CUDA build's flags; run: tests/gpgpusim/run.sh PROGRAM
#include <cstdio>
#include <cuda_runtime.h>

struct Sums { unsigned u; unsigned long long ull; float f; double d; double d_shared; unsigned olds; };

__global__ void add_kernel(Sums* s, int n) {
  __shared__ double block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const int k = i % 7 + 1;
    atomicAdd(&s->u, unsigned(k));
    atomicAdd(&s->ull, (unsigned long long)k << 33);
    atomicAdd(&s->f, float(k));
    const double old = atomicAdd(&s->d, double(k));  // value used: atom, not red
    if (old < 0) s->olds = 0xdead;                    // never true; keeps `old` alive
    atomicAdd(&block_sum, 0.5 * k);
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(&s->d_shared, block_sum);
}

int main() {
  const int n = 1000, threads = 128, blocks = (n + threads - 1) / threads;
  Sums* d;
  cudaMalloc(&d, sizeof(Sums));
  cudaMemset(d, 0, sizeof(Sums));
  add_kernel<<<blocks, threads>>>(d, n);
  Sums r;
  cudaMemcpy(&r, d, sizeof r, cudaMemcpyDeviceToHost);
  unsigned long long k_sum = 0;
  for (int i = 0; i < n; ++i) k_sum += i % 7 + 1;
  int bad = 0;
  auto expect = [&](const char* what, double got, double want) {
    const bool ok = got == want;
    printf("%-24s %.17g (want %.17g) %s\n", what, got, want, ok ? "ok" : "FAIL");
    bad += !ok;
  };
  expect("atomicAdd unsigned", r.u, double(k_sum));
  expect("atomicAdd ull (<<33)", double(r.ull), double(k_sum << 33));
  expect("atomicAdd float", r.f, double(k_sum));
  expect("atomicAdd double", r.d, double(k_sum));
  expect("atomicAdd double shared", r.d_shared, 0.5 * double(k_sum));
  expect("old values", r.olds, 0);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) printf("FAIL CUDA error: %s\n", cudaGetErrorString(e));
  bad += e != cudaSuccess;
  printf("atomics: %s\n", bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
