// expect: ok
// Not a bug: the same transpose with an unpadded 32x32 tile. The column-wise read
// tile[threadIdx.x][...] then has 32-way shared-memory bank conflicts, which makes it slower
// on a GPU, but the result is the same and nothing is out of bounds or racy.
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

constexpr int TILE_DIM = 32;
constexpr int BLOCK_ROWS = 8;

// in: rows x cols, out: cols x rows
__global__ void transpose(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE_DIM][TILE_DIM];  // no padding: bank conflicts only
  int x = blockIdx.x * TILE_DIM + threadIdx.x;  // column in `in`
  int y = blockIdx.y * TILE_DIM + threadIdx.y;  // row in `in`
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE_DIM + threadIdx.x;  // column in `out`
  y = blockIdx.x * TILE_DIM + threadIdx.y;  // row in `out`
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main() {
  const int rows = 100, cols = 70;
  std::vector<float> h(rows * cols), t(rows * cols);
  for (int i = 0; i < rows * cols; ++i) h[i] = float(i);
  float *d_in = nullptr, *d_out = nullptr;
  CHECK(cudaMalloc(&d_in, rows * cols * sizeof(float)));
  CHECK(cudaMalloc(&d_out, rows * cols * sizeof(float)));
  CHECK(cudaMemcpy(d_in, h.data(), rows * cols * sizeof(float), cudaMemcpyHostToDevice));
  dim3 block(TILE_DIM, BLOCK_ROWS);
  dim3 grid((cols + TILE_DIM - 1) / TILE_DIM, (rows + TILE_DIM - 1) / TILE_DIM);
  transpose<<<grid, block>>>(d_in, d_out, rows, cols);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(t.data(), d_out, rows * cols * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_out));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      if (t[c * rows + r] != h[r * cols + c]) {
        printf("transpose_nopad: WRONG at (%d, %d): %g, expected %g\n", c, r, t[c * rows + r], h[r * cols + c]);
        return 1;
      }
  printf("transpose_nopad: %dx%d -> %dx%d correct\n", rows, cols, cols, rows);
  return 0;
}
