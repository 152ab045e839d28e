// expect: uninitialised shared memory read
// Bug: the 1-D stencil with a wrong right-halo index: the left halo's RADIUS is added twice, so
// the right halo cells land at temp[count + 2 * RADIUS ...], past the end of the
// BLOCK_SIZE + 2 * RADIUS shared array in a full block (compute-sanitizer: "Invalid __shared__
// write"). In the last, partial block they land inside the array, and the real halo cells are
// never written: the emulator runs that block first (random block order, seed 1) and reports
// the stencil's read of one (SIM_ORDER=forward reports the out-of-bounds write of block 0).
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t err_ = (call);                                                         \
    if (err_ != cudaSuccess) {                                                         \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));    \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

#define RADIUS 3
#define BLOCK_SIZE 128

// in points at element 0 of the padded input: in[-RADIUS] .. in[n - 1 + RADIUS] are valid.
__global__ void stencil_1d(const int* in, int* out, int n) {
  __shared__ int temp[BLOCK_SIZE + 2 * RADIUS];
  int tid = threadIdx.x;  // int: block_start - RADIUS + tid must not wrap around as unsigned
  int block_start = blockIdx.x * blockDim.x;
  int count = min(n - block_start, BLOCK_SIZE);  // elements of this block (the last is partial)
  int gindex = block_start + tid;
  int lindex = tid + RADIUS;
  if (gindex < n) temp[lindex] = in[gindex];
  if (tid < RADIUS) {
    temp[tid] = in[block_start - RADIUS + tid];                  // left halo
    temp[lindex + count + RADIUS] = in[block_start + count + tid];  // BUG: right halo
  }
  __syncthreads();
  if (gindex < n) {
    int result = 0;
    for (int offset = -RADIUS; offset <= RADIUS; ++offset) result += temp[lindex + offset];
    out[gindex] = result;
  }
}

int main() {
  const int n = 1000;  // the last block is partial
  std::vector<int> h(n + 2 * RADIUS, 0), out(n);
  for (int i = 0; i < n; ++i) h[i + RADIUS] = (i * 37) % 101 - 50;
  int *d_in = nullptr, *d_out = nullptr;
  CHECK(cudaMalloc(&d_in, (n + 2 * RADIUS) * sizeof(int)));
  CHECK(cudaMalloc(&d_out, n * sizeof(int)));
  CHECK(cudaMemcpy(d_in, h.data(), (n + 2 * RADIUS) * sizeof(int), cudaMemcpyHostToDevice));
  stencil_1d<<<(n + BLOCK_SIZE - 1) / BLOCK_SIZE, BLOCK_SIZE>>>(d_in + RADIUS, d_out, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out.data(), d_out, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_out));
  for (int i = 0; i < n; ++i) {
    int want = 0;
    for (int k = -RADIUS; k <= RADIUS; ++k) want += h[i + RADIUS + k];
    if (out[i] != want) {
      printf("stencil: WRONG at %d: %d, expected %d\n", i, out[i], want);
      return 1;
    }
  }
  printf("stencil: %d outputs of radius %d correct, out[0] = %d, out[%d] = %d\n", n, RADIUS, out[0],
         n - 1, out[n - 1]);
  return 0;
}
