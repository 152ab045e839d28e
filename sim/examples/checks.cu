// Self-checking tour of the emulator's semantics and strictness (record-mode faults,
// schedule orders, warp intrinsics, error codes). Valid CUDA: under nvcc the
// emulator-only checks are compiled out. Build:
//   sim/simcc -O2 sim/examples/checks.cu -o checks && ./checks
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <cuda_runtime.h>

static int g_failed = 0;
#define EXPECT(cond)                                                          \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::printf("  FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);         \
      ++g_failed;                                                             \
    }                                                                         \
  } while (0)

constexpr int T = 16;

template <bool kFirstSync, bool kSecondSync>
__global__ void gemm(int n, const float* A, const float* B, float* C) {
  __shared__ float As[T][T], Bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.0f;
  for (int t = 0; t < n; t += T) {
    As[ty][tx] = A[row * n + t + tx];
    Bs[ty][tx] = B[(t + ty) * n + col];
    if (kFirstSync) __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
    if (kSecondSync) __syncthreads();
  }
  C[row * n + col] = acc;
}

// Block-wide sum: shared-memory tree, then the last warp through volatile shared
// memory with (kSyncwarp) or without __syncwarp between the steps.
template <bool kSyncwarp>
__global__ void block_sum(const unsigned* in, unsigned* out) {
  __shared__ unsigned s[128];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * 128 + t];
  __syncthreads();
  if (t < 64) s[t] += s[t + 64];
  __syncthreads();
  if (t < 32) {
    volatile unsigned* v = s;
    for (int off = 32; off > 0; off >>= 1) {
      unsigned x = v[t] + v[t + off];
      if (kSyncwarp) __syncwarp();
      v[t] = x;
      if (kSyncwarp) __syncwarp();
    }
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

__global__ void early_return(float* p) {
  __shared__ float s[64];
  if (threadIdx.x == 5) return;
  s[threadIdx.x] = 1.0f;
  __syncthreads();
  p[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

__global__ void two_barriers(int* p) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  p[threadIdx.x] = 1;
}

__global__ void write_one(float* p) { p[threadIdx.x] = 1.0f; }
__global__ void noop(float* p) { (void)p; }

__global__ void shuffles(int* out, double* dout, long long* lout) {
  const int lane = threadIdx.x % 32;
  const unsigned full = 0xffffffffu;
  int* o = out + (threadIdx.x / 32) * 32 * 16 + lane;
  o[0 * 32] = __shfl_sync(full, lane * 10, 3);
  o[1 * 32] = __shfl_sync(full, lane * 10, 9, 8);
  o[2 * 32] = __shfl_up_sync(full, lane * 10, 1);
  o[3 * 32] = __shfl_up_sync(full, lane * 10, 3, 8);
  o[4 * 32] = __shfl_down_sync(full, lane * 10, 2);
  o[5 * 32] = __shfl_down_sync(full, lane * 10, 2, 16);
  o[6 * 32] = __shfl_xor_sync(full, lane * 10, 1);
  o[7 * 32] = __shfl_xor_sync(full, lane * 10, 16, 16);
  o[8 * 32] = int(__ballot_sync(full, lane % 3 == 0));
  o[9 * 32] = __any_sync(full, lane == 17);
  o[10 * 32] = __all_sync(full, lane < 31);
  o[11 * 32] = __shfl_sync(full, lane * 10, -1);
  int v = lane + 1;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(full, v, off);
  o[12 * 32] = v;  // lane 0: 528
  o[13 * 32] = __shfl_up_sync(full, lane * 10, 32);  // delta uses 5 bits: own value
  o[14 * 32] = int(__activemask());
  o[15 * 32] = __popc(__ballot_sync(full, 1));
  dout[threadIdx.x] = __shfl_xor_sync(full, 0.5 + lane, 1);
  lout[threadIdx.x] = __shfl_sync(full, (long long)lane << 40, 31 - lane);
}

__global__ void counts(int* out) {
  int a = __syncthreads_count(threadIdx.x % 4 == 0);
  int b = __syncthreads_and(threadIdx.x < 1000);
  int c = __syncthreads_or(threadIdx.x == 77);
  int d = __syncthreads_and(threadIdx.x != 3);
  if (threadIdx.x == 0) {
    out[0] = a;
    out[1] = b;
    out[2] = c;
    out[3] = d;
  }
}

__global__ void dyn_shared(float* out, int n) {
  extern __shared__ float4 buf[];
  float* f = reinterpret_cast<float*>(buf);
  for (int i = threadIdx.x; i < n; i += blockDim.x) f[i] = float(i);
  __syncthreads();
  out[threadIdx.x] = f[n - 1 - threadIdx.x];
}

template <int kVariant>
__global__ void static_plus_dynamic(float* out, int ndyn) {
  __shared__ float fixed[4096];  // 16 KiB static
  extern __shared__ float dyn[];
  fixed[threadIdx.x] = 1.0f;
  for (int i = threadIdx.x; i < ndyn; i += blockDim.x) dyn[i] = 2.0f;
  __syncthreads();
  out[threadIdx.x] = fixed[threadIdx.x] + dyn[ndyn - 1 - threadIdx.x] + kVariant;
}

__global__ void bad_mask(int* out) {
  int lane = threadIdx.x % 32;
  if (lane < 16) out[lane] = __shfl_sync(0xffffffffu, lane, 0);  // lanes 16..31 never come
}

__global__ void warp_vs_barrier(int* out) {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
  }
}

__global__ void partial_warp(int* out) {
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, int(threadIdx.x), 1);  // block of 40 threads
}

__global__ void atomics(int* hist, float* fsum, unsigned* mx, unsigned long long* cas_count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&hist[i % 8], 1);
  atomicAdd(fsum, 0.5f);
  atomicMax(mx, unsigned(i));
  unsigned long long old = *cas_count, seen;
  do {
    seen = old;
    old = atomicCAS(cas_count, seen, seen + 1);
  } while (old != seen);
}

template <class T>
__global__ void fill(T* p, T v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

#ifdef SIM_EMULATOR
static bool gemm_ok(int n, const std::vector<float>& C, const std::vector<float>& A,
                    const std::vector<float>& B) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      float r = 0;
      for (int k = 0; k < n; ++k) r += A[i * n + k] * B[k * n + j];
      if (!(std::fabs(r - C[i * n + j]) <= 1e-3f * (1 + std::fabs(r)))) return false;
    }
  return true;
}

template <bool S1, bool S2>
static bool run_gemm(int n, sim::Order o, unsigned long long seed) {
  sim::set_order(o, seed);
  std::vector<float> hA(n * n), hB(n * n), hC(n * n);
  for (int i = 0; i < n * n; ++i) {
    hA[i] = float(i % 7) - 3;
    hB[i] = float(i % 5) - 2;
  }
  float *A, *B, *C;
  cudaMalloc(&A, n * n * 4);
  cudaMalloc(&B, n * n * 4);
  cudaMalloc(&C, n * n * 4);
  cudaMemcpy(A, hA.data(), n * n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(B, hB.data(), n * n * 4, cudaMemcpyHostToDevice);
  gemm<S1, S2><<<dim3(n / T, n / T), dim3(T, T)>>>(n, A, B, C);
  cudaMemcpy(hC.data(), C, n * n * 4, cudaMemcpyDeviceToHost);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  return gemm_ok(n, hC, hA, hB);
}

template <bool SW>
static bool run_sum(sim::Order o, unsigned long long seed) {
  sim::set_order(o, seed);
  const int blocks = 4;
  std::vector<unsigned> h(blocks * 128);
  for (size_t i = 0; i < h.size(); ++i) h[i] = unsigned(i % 17);
  unsigned *in, *out;
  cudaMalloc(&in, h.size() * 4);
  cudaMalloc(&out, blocks * 4);
  cudaMemcpy(in, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
  block_sum<SW><<<blocks, 128>>>(in, out);
  unsigned r[blocks];
  cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
  cudaFree(in);
  cudaFree(out);
  for (int b = 0; b < blocks; ++b) {
    unsigned ref = 0;
    for (int i = 0; i < 128; ++i) ref += h[b * 128 + i];
    if (r[b] != ref) return false;
  }
  return true;
}

static const sim::Order kOrders[] = {sim::Order::Forward, sim::Order::Reverse, sim::Order::Random};

static bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

static void section(const char* name) { std::printf("%s\n", name); }

int main() {
  sim::set_fault_mode(sim::FaultMode::Record);
  for (int workers : {1, 2}) {
    sim::set_workers(workers);
    std::printf("== workers=%d\n", workers);

    section("correct kernels are right in every order");
    for (auto o : kOrders)
      for (unsigned long long seed : {1ull, 2ull, 3ull}) {
        EXPECT((run_gemm<true, true>(64, o, seed)));
        EXPECT(run_sum<true>(o, seed));
      }

    section("a missing __syncthreads is wrong in some order");
    int wrong1 = 0, wrong2 = 0, wrong3 = 0;
    for (auto o : kOrders) {
      wrong1 += !run_gemm<false, true>(64, o, 1);
      wrong2 += !run_gemm<true, false>(64, o, 1);
      wrong3 += !run_sum<false>(o, 1);
    }
    std::printf("  orders giving a wrong answer: no 1st sync %d/3, no 2nd sync %d/3, no __syncwarp %d/3\n",
                wrong1, wrong2, wrong3);
    EXPECT(wrong1 > 0);
    EXPECT(wrong2 > 0);
    EXPECT(wrong3 > 0);
    EXPECT(cudaGetLastError() == cudaSuccess);
  }
  sim::set_workers(1);
  sim::set_order(sim::Order::Random, 1);

  section("fresh device memory is 0xFF (NaN)");
  {
    float* p;
    cudaMalloc(&p, 16);
    float h[4];
    cudaMemcpy(h, p, 16, cudaMemcpyDeviceToHost);
    EXPECT(std::isnan(h[0]) && std::isnan(h[3]));
    cudaFree(p);
  }

  section("barrier divergence: early return");
  {
    float* p;
    cudaMalloc(&p, 64 * 4);
    early_return<<<1, 64>>>(p);
    std::string f = sim::last_fault();
    std::printf("  %s\n", f.c_str());
    EXPECT(contains(f, "barrier divergence in kernel 'early_return'"));
    EXPECT(contains(f, "63 threads wait here, 1 thread exited"));
    EXPECT(contains(f, "checks.cu:"));
    EXPECT(cudaGetLastError() == cudaErrorLaunchFailure);
    EXPECT(cudaGetLastError() == cudaErrorLaunchFailure);  // sticky
    float* q;
    EXPECT(cudaMalloc(&q, 4) == cudaErrorLaunchFailure);
    EXPECT(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    sim::reset();
    EXPECT(sim::last_fault().empty());
    EXPECT(cudaGetLastError() == cudaSuccess);
    EXPECT(cudaMalloc(&q, 4) == cudaSuccess);
    cudaFree(q);
  }

  section("barrier divergence: two different __syncthreads");
  {
    int* p;
    cudaMalloc(&p, 64 * 4);
    two_barriers<<<1, 64>>>(p);
    std::printf("  %s\n", sim::last_fault().c_str());
    EXPECT(contains(sim::last_fault(), "32 threads wait at"));
    sim::reset();
  }

  section("host pointer as a kernel argument");
  {
    std::vector<float> host(32);
    write_one<<<1, 32>>>(host.data());
    std::printf("  %s\n", sim::last_fault().c_str());
    EXPECT(contains(sim::last_fault(), "argument 1 (float*)"));
    EXPECT(contains(sim::last_fault(), "is not a device pointer"));
    EXPECT(cudaGetLastError() == cudaErrorIllegalAddress);
    EXPECT(host[0] == 0.0f);  // did not run
    sim::reset();
    float* pinned;
    cudaMallocHost(&pinned, 32 * 4);  // pinned host memory is accessible (UVA)
    write_one<<<1, 32>>>(pinned);
    EXPECT(cudaGetLastError() == cudaSuccess && pinned[31] == 1.0f);
    cudaFreeHost(pinned);
    float* d;
    cudaMalloc(&d, 32 * 4);
    noop<<<1, 1>>>(d + 32);  // one past the end is a legal argument
    EXPECT(cudaGetLastError() == cudaSuccess);
    noop<<<1, 1>>>(d + 33);
    EXPECT(cudaGetLastError() == cudaErrorIllegalAddress);
    sim::reset();
  }

  section("warp intrinsics give CUDA's results");
  {
    int* out;
    double* dout;
    long long* lout;
    cudaMalloc(&out, 2 * 32 * 16 * 4);
    cudaMalloc(&dout, 64 * 8);
    cudaMalloc(&lout, 64 * 8);
    shuffles<<<1, 64>>>(out, dout, lout);
    EXPECT(cudaGetLastError() == cudaSuccess);
    std::vector<int> h(2 * 32 * 16);
    std::vector<double> hd(64);
    std::vector<long long> hl(64);
    cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(hd.data(), dout, 64 * 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(hl.data(), lout, 64 * 8, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int w = 0; w < 2; ++w)
      for (int l = 0; l < 32; ++l) {
        auto at = [&](int k) { return h[w * 512 + k * 32 + l]; };
        int up8 = (l % 8) >= 3 ? (l - 3) * 10 : l * 10;
        int down16 = (l % 16) + 2 < 16 ? (l + 2) * 10 : l * 10;
        int xor16w16 = (l ^ 16) <= ((l & 16) | 15) ? (l ^ 16) * 10 : l * 10;  // lanes 16..31 read 0..15
        unsigned ballot = 0;
        for (int k = 0; k < 32; k += 3) ballot |= 1u << k;
        int expect[16] = {30, ((l / 8) * 8 + 1) * 10, l >= 1 ? (l - 1) * 10 : 0, up8,
                          l + 2 < 32 ? (l + 2) * 10 : l * 10, down16, (l ^ 1) * 10, xor16w16,
                          int(ballot), 1, 0, 310, -1, l * 10, -1, 32};
        for (int k = 0; k < 16; ++k) {
          if (k == 12 && l != 0) continue;  // only lane 0 holds the full sum
          if (k == 12) expect[12] = 528;
          if (at(k) != expect[k]) {
            if (bad < 8) std::printf("  warp %d lane %d case %d: got %d want %d\n", w, l, k, at(k), expect[k]);
            ++bad;
          }
        }
        if (hd[w * 32 + l] != 0.5 + (l ^ 1)) ++bad;
        if (hl[w * 32 + l] != (long long)(31 - l) << 40) ++bad;
      }
    EXPECT(bad == 0);
    cudaFree(out);
    cudaFree(dout);
    cudaFree(lout);
  }

  section("__syncthreads_count/_and/_or");
  {
    int* out;
    cudaMalloc(&out, 16);
    counts<<<1, 256>>>(out);
    int h[4];
    cudaMemcpy(h, out, 16, cudaMemcpyDeviceToHost);
    EXPECT(h[0] == 64 && h[1] == 1 && h[2] == 1 && h[3] == 0);
    cudaFree(out);
  }

  section("warp-op faults");
  {
    int* out;
    cudaMalloc(&out, 64 * 4);
    bad_mask<<<1, 32>>>(out);
    std::printf("  %s\n", sim::last_fault().c_str());
    EXPECT(contains(sim::last_fault(), "exited"));
    sim::reset();
    cudaMalloc(&out, 64 * 4);
    warp_vs_barrier<<<1, 32>>>(out);
    std::printf("  %s\n", sim::last_fault().c_str());
    EXPECT(contains(sim::last_fault(), "is at __syncthreads"));
    sim::reset();
    cudaMalloc(&out, 64 * 4);
    partial_warp<<<1, 40>>>(out);
    std::printf("  %s\n", sim::last_fault().c_str());
    EXPECT(contains(sim::last_fault(), "do not exist"));
    sim::reset();
  }

  section("launch configuration and API errors");
  {
    float* d;
    cudaMalloc(&d, 1024 * 4);
    write_one<<<1, 1025>>>(d);  // CUDA 13.0 on an H200: cudaErrorInvalidValue (sim/README.md)
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
    EXPECT(cudaGetLastError() == cudaSuccess);
    write_one<<<dim3(1, 65536), 1>>>(d);
    EXPECT(cudaPeekAtLastError() == cudaErrorInvalidValue);
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
    dyn_shared<<<1, 64, 64 * 1024>>>(d, 64);
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
    EXPECT(cudaFuncSetAttribute(dyn_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) ==
           cudaSuccess);
    EXPECT(cudaFuncSetAttribute(dyn_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 300000) ==
           cudaErrorInvalidValue);
    cudaGetLastError();
    dyn_shared<<<1, 64, 64 * 1024>>>(d, 16 * 1024);
    EXPECT(cudaGetLastError() == cudaSuccess);
    float h[64];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    EXPECT(h[0] == 16383.0f && h[63] == 16320.0f);
    std::vector<float> host(1024);
    EXPECT(cudaMemcpy(host.data(), d, 4096, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    EXPECT(cudaMemcpy(d, host.data(), 4096, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    EXPECT(cudaMemcpy(d, host.data(), 4100, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    EXPECT(cudaMemcpy(host.data(), d, 4096, cudaMemcpyDefault) == cudaSuccess);
    EXPECT(cudaFree(host.data()) == cudaErrorInvalidValue);
    EXPECT(cudaFree(d + 1) == cudaErrorInvalidValue);
    int ndev = 0;
    EXPECT(cudaGetDeviceCount(&ndev) == cudaSuccess && ndev >= 1);  // SIM_DEVICES (default 1)
    EXPECT(cudaSetDevice(ndev) == cudaErrorInvalidDevice);
    EXPECT(cudaGetLastError() == cudaErrorInvalidDevice);
    EXPECT(std::string(cudaGetErrorName(cudaErrorLaunchFailure)) == "cudaErrorLaunchFailure");
    EXPECT(cudaErrorLaunchFailure == 719 && cudaErrorIllegalAddress == 700 &&
           cudaErrorInvalidConfiguration == 9);
    cudaFree(d);
  }

  section("atomics with 1 and 2 workers");
  for (int w : {1, 2}) {
    sim::set_workers(w);
    int* hist;
    float* fsum;
    unsigned* mx;
    unsigned long long* cc;
    cudaMalloc(&hist, 8 * 4);
    cudaMalloc(&fsum, 4);
    cudaMalloc(&mx, 4);
    cudaMalloc(&cc, 8);
    cudaMemset(hist, 0, 32);
    cudaMemset(fsum, 0, 4);
    cudaMemset(mx, 0, 4);
    cudaMemset(cc, 0, 8);
    atomics<<<64, 128>>>(hist, fsum, mx, cc);
    int hh[8];
    float hf;
    unsigned hm;
    unsigned long long hc;
    cudaMemcpy(hh, hist, 32, cudaMemcpyDeviceToHost);
    cudaMemcpy(&hf, fsum, 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(&hm, mx, 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(&hc, cc, 8, cudaMemcpyDeviceToHost);
    EXPECT(hh[0] == 1024 && hh[7] == 1024 && hf == 4096.0f && hm == 8191 && hc == 8192);
    cudaFree(hist);
    cudaFree(fsum);
    cudaFree(mx);
    cudaFree(cc);
  }
  sim::set_workers(1);

  section("static + dynamic shared memory over 48 KiB");
  {
    float* d;
    cudaMalloc(&d, 64 * 4);
    cudaMemset(d, 0, 64 * 4);
    for (int rep = 0; rep < 2; ++rep) {  // refused while running, then up front
      static_plus_dynamic<0><<<1, 64, 40 * 1024>>>(d, 10 * 1024);
      EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
      EXPECT(cudaGetLastError() == cudaSuccess);  // not sticky
      EXPECT(sim::last_fault().empty());
    }
    EXPECT(cudaFuncSetAttribute(static_plus_dynamic<1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                40 * 1024) == cudaSuccess);
    static_plus_dynamic<1><<<1, 64, 40 * 1024>>>(d, 10 * 1024);
    EXPECT(cudaGetLastError() == cudaSuccess);
    float h[64];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    EXPECT(h[0] == 4.0f && h[63] == 4.0f);
    cudaFree(d);
  }

  section("templated kernels: deduced and explicit");
  {
    int* p;
    cudaMalloc(&p, 100 * 4);
    fill<<<1, 128>>>(p, 7, 100);
    fill<int><<<1, 128>>>(p, 9, 50);
    int h[100];
    cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost);
    EXPECT(h[0] == 9 && h[49] == 9 && h[50] == 7 && h[99] == 7);
    cudaFree(p);
  }

  section("stats");
  {
    sim::Stats s = sim::stats();
    std::printf("  launches=%llu blocks=%llu threads=%llu barriers=%llu switches=%llu\n", s.launches,
                s.blocks, s.threads, s.barriers, s.fiber_switches);
    EXPECT(s.launches > 10 && s.barriers > 0 && s.fiber_switches > s.threads);
    std::printf("  %s\n", sim::describe_schedule().c_str());
  }
  std::printf(g_failed ? "checks: %d FAILED\n" : "checks: all passed\n", g_failed);
  return g_failed ? 1 : 0;
}
#else
int main() { return 0; }
#endif
