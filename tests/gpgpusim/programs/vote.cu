// Warp votes on GPGPU-Sim: __ballot_sync, __any_sync, __all_sync and __activemask, in full
// warps, in a partial warp, and under a branch that leaves only some lanes active (where the
// unpatched simulator's vote never completed when the warp's last lane was inactive).
// Built by make test-gpgpusim with the CUDA build's flags; run: tests/gpgpusim/run.sh PROGRAM
#include <cstdio>
#include <cuda_runtime.h>

constexpr int kThreads = 80;  // warps 0 and 1 full, warp 2 with 16 lanes

struct Votes { unsigned ballot, any, all, active; };

__global__ void vote_kernel(const int* in, Votes* out, int divergent) {
  const int i = threadIdx.x;
  if (i >= kThreads) return;
  const bool p = in[i] > 0;
  if (divergent && (i % 32) % 3 == 2) return;  // these lanes, the last of each warp among them, leave
  const unsigned mask = __activemask();
  Votes v;
  v.ballot = __ballot_sync(mask, p);
  v.any = __any_sync(mask, p);
  v.all = __all_sync(mask, p);
  v.active = mask;
  out[i] = v;
}

int main() {
  int h[kThreads];
  // Warp 0: a pattern; warp 1: all positive; warp 2: none positive.
  for (int i = 0; i < kThreads; ++i) h[i] = i < 32 ? ((i * 7) % 5 == 0 ? 1 : -1) : (i < 64 ? 1 : -1);
  int* d_in;
  Votes* d_out;
  cudaMalloc(&d_in, sizeof h);
  cudaMalloc(&d_out, kThreads * sizeof(Votes));
  cudaMemcpy(d_in, h, sizeof h, cudaMemcpyHostToDevice);
  int bad = 0;
  for (int divergent = 0; divergent < 2; ++divergent) {
    cudaMemset(d_out, 0xff, kThreads * sizeof(Votes));
    vote_kernel<<<1, 96>>>(d_in, d_out, divergent);
    Votes r[kThreads];
    cudaMemcpy(r, d_out, sizeof r, cudaMemcpyDeviceToHost);
    for (int i = 0; i < kThreads; ++i) {
      const int base = i / 32 * 32;
      if (divergent && (i % 32) % 3 == 2) continue;
      unsigned active = 0, ballot = 0;
      for (int l = 0; l < 32 && base + l < kThreads; ++l) {
        if (divergent && l % 3 == 2) continue;
        active |= 1u << l;
        if (h[base + l] > 0) ballot |= 1u << l;
      }
      const Votes want{ballot, ballot != 0, ballot == active, active};
      const Votes& got = r[i];
      if ((got.ballot != want.ballot || (got.any != 0) != (want.any != 0) ||
           (got.all != 0) != (want.all != 0) || got.active != want.active) && bad++ < 5)
        printf("FAIL divergent=%d lane %d: ballot %08x/%08x any %u/%u all %u/%u activemask %08x/%08x (got/want)\n",
               divergent, i, got.ballot, want.ballot, got.any, want.any, got.all, want.all, got.active, want.active);
    }
    printf("%s warps: %s\n", divergent ? "divergent" : "converged", bad ? "FAIL" : "ok");
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) printf("FAIL CUDA error: %s\n", cudaGetErrorString(e));
  bad += e != cudaSuccess;
  printf("vote: %s\n", bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
