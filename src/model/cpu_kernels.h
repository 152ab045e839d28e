// The CPU model's elementwise passes (cpu_model.cpp), each one loop over its data, built for
// several x86-64 levels (AVX-512, AVX2, baseline) and chosen at load time, so one binary
// uses the vector units of the machine it runs on. Float uses a vectorisable exp (exp_nonpos
// below); double keeps std::exp. Tested by tests/model/test_cpu_kernels.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nn::model::cpu {

// exp(x) for x <= 0, to about 2 ulp (float), written so that a compiler can vectorise it:
// Cody-Waite reduction x = n ln2 + r, a degree-6 polynomial for e^r, 2^n from the exponent
// bits. Below -87 the result is clamped to e^-87 (1.6e-38) instead of going subnormal.
float exp_nonpos(float x);

// X(:, j) = images(:, idx[j]) / 255 (the division rounded as the reference's), j < b;
// idx == nullptr: the first b columns.
void gather_normalize(const std::uint8_t* images, const std::uint32_t* idx, int b, int D, float* X);
void gather_normalize(const std::uint8_t* images, const std::uint32_t* idx, int b, int D, double* X);

// A(:, j) = sigmoid(A(:, j) + bias) for the H x b matrix A (the reference's overflow-free form).
void bias_sigmoid(float* A, const float* bias, int H, int b);
void bias_sigmoid(double* A, const double* bias, int H, int b);

// dZ = dA o a o (1 - a) in place over dA (H x b), and db = its row sums. The ld forms work on
// `rows` rows of matrices with leading dimension ld (a band of rows: each row's sum is added
// in the same column order as over the whole matrix, so a split by rows changes no bit).
void sigmoid_backward_rowsum(float* dA, const float* A, int H, int b, float* db);
void sigmoid_backward_rowsum(double* dA, const double* A, int H, int b, double* db);
void sigmoid_backward_rowsum(float* dA, const float* A, int rows, int ld, int b, float* db);
void sigmoid_backward_rowsum(double* dA, const double* A, int rows, int ld, int b, double* db);

// The form the model calls: dZ = dA o a o (1 - a) in place over blocks [k0, k1) of
// kColumnBlock columns of the H x b matrices (block k: columns k kColumnBlock .. min(b, ...)),
// each block's row sums (in column order) into partial[k H .. k H + H). sum_blocks then adds
// the blocks' sums in block order: db[h] = ((partial_0 + partial_1) + partial_2) + ... So db
// depends on the blocking, which is fixed, and not on how the blocks are shared out among
// threads: each thread takes whole columns, which it reads and writes in order (a split by
// rows took 1.7 ms at H = 1024, B = 3000 on 2 threads, against 0.5 ms by columns).
constexpr int kColumnBlock = 64;
void sigmoid_backward_blocks(float* dA, const float* A, int H, int b, int k0, int k1, float* partial);
void sigmoid_backward_blocks(double* dA, const double* A, int H, int b, int k0, int k1, double* partial);
void sum_blocks(const float* partial, int nblocks, int H, float* db);
void sum_blocks(const double* partial, int nblocks, int H, double* db);

// p -= lr * g over n entries.
void sgd(float* p, const float* g, std::size_t n, float lr);
void sgd(double* p, const double* g, std::size_t n, double lr);
// p <- p - lr (g + reg p): the step with the L2 term added to the gradient here.
void sgd_decay(float* p, const float* g, std::size_t n, float lr, float reg);
void sgd_decay(double* p, const double* g, std::size_t n, double lr, double reg);

// Per column of the C x b scores Z (+ b2 when b2 != nullptr): the max-shifted softmax, the
// cross-entropy added to *loss, the lowest-index argmax compared with y (hits), and
// Z = (softmax - onehot(y)) * inv_B in place.
void softmax_xent(float* Z, const float* b2, const std::uint8_t* y, int C, int b, float inv_B, double* loss,
                  std::uint64_t* hits);
void softmax_xent(double* Z, const double* b2, const std::uint8_t* y, int C, int b, double inv_B, double* loss,
                  std::uint64_t* hits);

// The data-parallel step between its two large GEMMs, fused, on one block of n <= kColumnBlock
// columns (column j of each matrix at j times its height), so the block stays in cache:
//   A = sigmoid(A + b1)                  (H x n, in place; A holds W1 X on entry)
//   Z = W2 A (+ b2) -> softmax, cross-entropy into *loss, hits, dZ2 = (softmax - onehot(y)) inv_B
//                                        (C x n, in place)
//   dW2p = dZ2 A^T                       (C x H, row c at c H: this block's part, transposed)
//   dZ1 = (W2^T dZ2) o A o (1 - A)       (H x n; may be A itself), db1p = its row sums in
//                                        column order
// Preconditions (std::invalid_argument otherwise): 1 <= C <= kClassChunk, 1 <= n <= kColumnBlock.
// W2t is W2 transposed, kClassChunk rows of H, rows C.. zero. *loss and *hits are added to;
// every other output is overwritten. The three C-row products are our own loops with every
// class at once (in registers on AVX-512), each sum in a fixed order, so the bits depend on
// no thread count and no instruction set.
constexpr int kClassChunk = 10;
void layer2_block(float* A, const float* b1, const float* W2t, const float* b2, const std::uint8_t* y, int H, int C,
                  int n, float inv_B, float* Z, float* dZ1, float* dW2p, float* db1p, double* loss,
                  std::uint64_t* hits);
void layer2_block(double* A, const double* b1, const double* W2t, const double* b2, const std::uint8_t* y, int H,
                  int C, int n, double inv_B, double* Z, double* dZ1, double* dW2p, double* db1p, double* loss,
                  std::uint64_t* hits);

}  // namespace nn::model::cpu
