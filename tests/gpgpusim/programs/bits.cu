// Bit intrinsics on GPGPU-Sim: __ffs/__ffsll, __clz/__clzll, __popc/__popcll, __brev, on zero,
// one, negative and wide values. __ffs compiles to bfind.shiftamt, which the unpatched
// simulator did not parse, and its bfind looped forever on zero and shifted 64-bit values in 32 bits.
// Built by make test-gpgpusim with the CUDA build's flags; run: tests/gpgpusim/run.sh PROGRAM
#include <cstdio>
#include <cuda_runtime.h>

struct Bits { int ffs, clz, popc, ffsll, clzll, popcll; unsigned brev; };

__global__ void bits_kernel(const long long* in, Bits* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long v = in[i];
  const int w = int(v);
  out[i] = Bits{__ffs(w), __clz(w), __popc(unsigned(w)), __ffsll(v), __clzll(v), __popcll((unsigned long long)v),
                __brev(unsigned(w))};
}

int ffs_ref(unsigned long long v, int bits) {
  for (int b = 0; b < bits; ++b) if ((v >> b) & 1) return b + 1;
  return 0;
}
int clz_ref(unsigned long long v, int bits) {
  for (int b = bits - 1; b >= 0; --b) if ((v >> b) & 1) return bits - 1 - b;
  return bits;
}
int popc_ref(unsigned long long v) { int c = 0; for (; v; v &= v - 1) ++c; return c; }
unsigned brev_ref(unsigned v) { unsigned r = 0; for (int b = 0; b < 32; ++b) if ((v >> b) & 1) r |= 1u << (31 - b); return r; }

int main() {
  const long long vals[] = {0, 1, 2, 3, -1, -2, 0x80000000LL, 0x7fffffffLL, 0x100000000LL, (long long)0x8000000000000000ULL,
                            0x0000f00000000000LL, 12345678901234LL, -12345678901234LL, 96, 1 << 20, 0x40000000LL};
  const int n = sizeof vals / sizeof vals[0];
  long long* d_in;
  Bits* d_out;
  cudaMalloc(&d_in, sizeof vals);
  cudaMalloc(&d_out, n * sizeof(Bits));
  cudaMemcpy(d_in, vals, sizeof vals, cudaMemcpyHostToDevice);
  bits_kernel<<<1, 32>>>(d_in, d_out, n);
  Bits r[n];
  cudaMemcpy(r, d_out, sizeof r, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    const unsigned long long v = vals[i];
    const unsigned w = unsigned(v);
    const Bits want{ffs_ref(w, 32), clz_ref(w, 32), popc_ref(w), ffs_ref(v, 64), clz_ref(v, 64), popc_ref(v), brev_ref(w)};
    const Bits& g = r[i];
    if (g.ffs != want.ffs || g.clz != want.clz || g.popc != want.popc || g.ffsll != want.ffsll ||
        g.clzll != want.clzll || g.popcll != want.popcll || g.brev != want.brev) {
      ++bad;
      printf("FAIL %#llx: ffs %d/%d clz %d/%d popc %d/%d ffsll %d/%d clzll %d/%d popcll %d/%d brev %08x/%08x (got/want)\n",
             v, g.ffs, want.ffs, g.clz, want.clz, g.popc, want.popc, g.ffsll, want.ffsll, g.clzll, want.clzll,
             g.popcll, want.popcll, g.brev, want.brev);
    }
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) printf("FAIL CUDA error: %s\n", cudaGetErrorString(e));
  bad += e != cudaSuccess;
  printf("%d values checked\n", n);
  printf("bits: %s\n", bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
