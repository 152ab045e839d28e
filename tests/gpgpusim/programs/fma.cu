// Fused multiply-add on GPGPU-Sim: fma.rn/.rz/.rm/.rp in float and double round once, as the
// hardware does. The unpatched simulator computed a*b+c with two roundings (so expf/exp lost
// the low bits of their range reduction and the sigmoid test missed its 4-ulp bound) and
// ignored (.f32) or refused (.f64) the directed roundings.
// Built by make test-gpgpusim with the CUDA build's flags; run: tests/gpgpusim/run.sh PROGRAM
#include <cmath>
#include <cstdio>
#include <cuda_runtime.h>

struct Out { float f[5]; double d[5]; };

__global__ void fma_kernel(float a, float b, float c, double x, double y, double z, Out* o) {
  o->f[0] = __fmaf_rn(a, b, c);
  o->f[1] = __fmaf_rz(a, b, c);
  o->f[2] = __fmaf_rd(a, b, c);
  o->f[3] = __fmaf_ru(a, b, c);
  o->f[4] = fmaf(a, b, 1.0f);
  o->d[0] = __fma_rn(x, y, z);
  o->d[1] = __fma_rz(x, y, z);
  o->d[2] = __fma_rd(x, y, z);
  o->d[3] = __fma_ru(x, y, z);
  o->d[4] = fma(x, y, 1.0);
}

int main() {
  // a*b = 1 + 2^-11 + 2^-24 needs 25 bits: one rounding keeps the 2^-24 after adding
  // -(1 + 2^-11); two roundings give 0.
  const float a = 1.0f + 0x1p-12f, b = a, c = -(1.0f + 0x1p-11f);
  const double x = 1.0 + 0x1p-27, y = x, z = -(1.0 + 0x1p-26);
  Out* d;
  cudaMalloc(&d, sizeof(Out));
  fma_kernel<<<1, 1>>>(a, b, c, x, y, z, d);
  Out r;
  cudaMemcpy(&r, d, sizeof r, cudaMemcpyDeviceToHost);
  int bad = 0;
  auto expect = [&](const char* what, double got, double want) {
    const bool ok = got == want;
    printf("%-26s %-24a want %-24a %s\n", what, got, want, ok ? "ok" : "FAIL");
    bad += !ok;
  };
  expect("fmaf rn (exact 2^-24)", r.f[0], 0x1p-24);
  expect("fmaf rz", r.f[1], 0x1p-24);
  expect("fmaf rd", r.f[2], 0x1p-24);
  expect("fmaf ru", r.f[3], 0x1p-24);
  expect("fmaf(a, b, 1) rn", r.f[4], 2.0 + 0x1p-11);  // the 2^-24 is below half an ulp of 2
  expect("fma rn (exact 2^-54)", r.d[0], 0x1p-54);
  expect("fma rz", r.d[1], 0x1p-54);
  expect("fma rd", r.d[2], 0x1p-54);
  expect("fma ru", r.d[3], 0x1p-54);
  expect("fma(x, y, 1) rn", r.d[4], 2.0 + 0x1p-26);
  // Directed rounding where the result is inexact: 3 * (1 + 2^-23) + 2^-30 in float.
  Out* e;
  cudaMalloc(&e, sizeof(Out));
  fma_kernel<<<1, 1>>>(3.0f, 1.0f + 0x1p-23f, 0x1p-30f, 3.0, 1.0 + 0x1p-52, 0x1p-60, e);
  cudaMemcpy(&r, e, sizeof r, cudaMemcpyDeviceToHost);
  const float lo = 3.0f + 0x1p-22f, hi = std::nextafter(lo, 4.0f);  // exact value lies between
  expect("fmaf rd inexact", r.f[2], lo);
  expect("fmaf ru inexact", r.f[3], hi);
  expect("fmaf rz inexact", r.f[1], lo);
  const double dlo = 3.0 + 0x1p-51, dhi = std::nextafter(dlo, 4.0);
  expect("fma rd inexact", r.d[2], dlo);
  expect("fma ru inexact", r.d[3], dhi);
  expect("fma rz inexact", r.d[1], dlo);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) printf("FAIL CUDA error: %s\n", cudaGetErrorString(err));
  bad += err != cudaSuccess;
  printf("fma: %s\n", bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
