// Warp shuffles on GPGPU-Sim: __shfl_sync, _up, _down, _xor at widths 32..2, on 32-bit int,
// float and 64-bit double values, with a partial last warp and a divergent branch. Every lane's
// result is compared with the value the CUDA programming guide defines for it.
// Built by make test-gpgpusim with the CUDA build's flags; run: tests/gpgpusim/run.sh PROGRAM
#include <cstdio>
#include <cuda_runtime.h>

enum Mode { IDX, UP, DOWN, XOR };
constexpr int kThreads = 80;  // two full warps and a partial one of 16 lanes

template <typename T>
__global__ void shuffle_kernel(const T* in, T* out, int mode, int arg, int width) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kThreads) return;
  // Lanes of the partial warp that exist: 16; the mask names exactly them.
  const unsigned mask = (i / 32 == kThreads / 32) ? (1u << (kThreads % 32)) - 1 : 0xffffffffu;
  const T v = in[i];
  T r;
  switch (mode) {
    case IDX: r = __shfl_sync(mask, v, arg, width); break;
    case UP: r = __shfl_up_sync(mask, v, arg, width); break;
    case DOWN: r = __shfl_down_sync(mask, v, arg, width); break;
    default: r = __shfl_xor_sync(mask, v, arg, width); break;
  }
  out[i] = r;
}

// Odd lanes only: the shuffle runs with half of the warp inactive (mask of the odd lanes).
__global__ void divergent_kernel(const int* in, int* out) {
  const int lane = threadIdx.x % 32;
  out[threadIdx.x] = -1;
  if (lane % 2 == 1) out[threadIdx.x] = __shfl_xor_sync(0xaaaaaaaau, in[threadIdx.x], 2);
}

// The guide's definition, per lane (the partial warp has 16 lanes, all sources inside it).
int expected_lane(int i, int mode, int arg, int width) {
  const int lane = i % 32, base = i - lane, seg = lane / width * width, l = lane % width;
  int src = lane;
  switch (mode) {
    case IDX: src = seg + (arg % width); break;
    case UP: src = l - arg >= 0 ? lane - arg : lane; break;
    case DOWN: src = l + arg < width ? lane + arg : lane; break;
    default: src = (l ^ arg) < width ? seg + (l ^ arg) : lane; break;
  }
  return base + src;
}

template <typename T>
int check(const char* type, T scale) {
  T h[kThreads], r[kThreads];
  for (int i = 0; i < kThreads; ++i) h[i] = T(1000 + 7 * i) * scale;
  T *d_in, *d_out;
  cudaMalloc(&d_in, sizeof h);
  cudaMalloc(&d_out, sizeof h);
  cudaMemcpy(d_in, h, sizeof h, cudaMemcpyHostToDevice);
  int bad = 0, cases = 0;
  const char* names[] = {"shfl", "shfl_up", "shfl_down", "shfl_xor"};
  for (int mode = IDX; mode <= XOR; ++mode)
    for (int width = 32; width >= 2; width /= 2)
      for (int arg : {1, 3, width / 2, width - 1}) {
        if (arg >= width) continue;
        shuffle_kernel<<<1, 96>>>(d_in, d_out, mode, arg, width);
        cudaMemcpy(r, d_out, sizeof r, cudaMemcpyDeviceToHost);
        ++cases;
        for (int i = 0; i < kThreads; ++i) {
          const int want = expected_lane(i, mode, arg, width);
          if (want >= kThreads) continue;  // outside the partial warp: undefined
          if (r[i] != h[want]) {
            if (bad++ < 5)
              printf("FAIL %s %s width %d arg %d lane %d: got %g, want %g (lane %d)\n", names[mode], type,
                     width, arg, i, double(r[i]), double(h[want]), want);
          }
        }
      }
  cudaFree(d_in);
  cudaFree(d_out);
  printf("%-6s %3d cases: %s\n", type, cases, bad ? "FAIL" : "ok");
  return bad;
}

int main() {
  int bad = check<int>("int", 1) + check<float>("float", 0.25f) + check<double>("double", 1.0 + 1e-12);
  int h[64], r[64], *d_in, *d_out;
  for (int i = 0; i < 64; ++i) h[i] = 3 * i + 1;
  cudaMalloc(&d_in, sizeof h);
  cudaMalloc(&d_out, sizeof h);
  cudaMemcpy(d_in, h, sizeof h, cudaMemcpyHostToDevice);
  divergent_kernel<<<1, 64>>>(d_in, d_out);
  cudaMemcpy(r, d_out, sizeof r, cudaMemcpyDeviceToHost);
  int dbad = 0;
  for (int i = 0; i < 64; ++i) {
    const int want = (i % 2 == 1) ? h[i ^ 2] : -1;
    if (r[i] != want && dbad++ < 5) printf("FAIL divergent lane %d: got %d, want %d\n", i, r[i], want);
  }
  printf("divergent odd lanes: %s\n", dbad ? "FAIL" : "ok");
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) printf("FAIL CUDA error: %s\n", cudaGetErrorString(e));
  bad += dbad + (e != cudaSuccess);
  printf("shfl: %s\n", bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
