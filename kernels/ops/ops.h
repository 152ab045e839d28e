// Launchers for the network's elementwise and reduction kernels (kernels/ops/ops.cu): batch
// gathering, softmax / cross-entropy, bias-gradient row sums, sigmoid, SGD, norms.
// Column-major throughout (kernels/common/nn_real.h); tested by tests/kernels/test_ops.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace nn {

// All pointers are device pointers. Every launcher is asynchronous on stream `s`, does
// nothing (no launch) when its size is 0, and throws nn::InternalError on a launch error.
// Accumulating outputs (loss_sum, correct, sum_squares' out) are added to, never reset:
// the caller zeroes them.

// uint8 images resident on the device as a D x N column-major matrix, gathered into a
// D x b batch: X(:, j) = images(:, idx[j]) / 255, a true division, so the values equal the
// CPU reference's static_cast<T>(v) / T(255) bit for bit. idx[j] < N is the caller's duty.
template <class T>
void gather_normalize(const std::uint8_t* images, int D, const std::uint32_t* idx, int b, T* X,
                      cudaStream_t s = 0);

// out[j] = labels[idx[j]] for j < b. T plays no part (the labels are bytes whatever the
// scalar type); it keeps the call spelled like its neighbours, and defaults to void.
template <class T = void>
void gather_labels(const std::uint8_t* labels, const std::uint32_t* idx, int b, std::uint8_t* out,
                   cudaStream_t s = 0);

// Column softmax of a C x b matrix, max-subtracted (no overflow for any finite input).
// Y may equal Z (in place).
template <class T>
void softmax_columns(const T* Z, int C, int b, T* Y, cudaStream_t s = 0);

// Fused softmax + cross-entropy + output gradient, labels[j] < C:
//   yhat = softmax(Z) per column; dZ2 = (yhat - onehot(label)) * inv_B (inv_B = 1 / GLOBAL B);
//   loss_sum[0] += sum over columns of max + log(sum exp(z - max)) - z[label] (double);
//   correct[0]  += number of columns whose argmax (lowest index on ties) == label.
// Any of yhat / dZ2 / loss_sum / correct may be null to skip that output; yhat or dZ2 may
// equal Z (in place).
template <class T>
void softmax_xent(const T* Z, const std::uint8_t* labels, int C, int b, T inv_B, T* yhat, T* dZ2,
                  double* loss_sum, unsigned* correct, cudaStream_t s = 0);

// Row sums of an M x n matrix with leading dimension lda >= M (bias gradients: the sum
// over the batch columns): out[i] = beta * out[i] + sum_j A(i, j). With beta == 0, out is
// only written (it may hold garbage). Deterministic: no atomics, fixed summation order.
template <class T>
void row_sums(const T* A, int M, int n, int lda, T* out, T beta = 0, cudaStream_t s = 0);

// dZ1 = dA1 o a1 o (1 - a1) over n entries; dZ1 may equal dA1 (in place).
template <class T>
void sigmoid_backward(const T* dA1, const T* a1, std::size_t n, T* dZ1, cudaStream_t s = 0);

// A = 1 / (1 + exp(-Z)) elementwise, in the overflow-free form the CPU reference uses.
// A may equal Z (in place).
template <class T>
void sigmoid(const T* Z, std::size_t n, T* A, cudaStream_t s = 0);

// SGD with L2: p -= lr * (g + reg * p) over n entries (biases: reg = 0).
template <class T>
void sgd_update(T* p, const T* g, std::size_t n, T lr, T reg, cudaStream_t s = 0);

// out[0] += sum of p[i]^2, squared and accumulated in double.
template <class T>
void sum_squares(const T* p, std::size_t n, double* out, cudaStream_t s = 0);

// correct[0] += number of columns of the C x b score matrix whose argmax (lowest index on
// ties) equals the label.
template <class T>
void count_correct(const T* scores, const std::uint8_t* labels, int C, int b, unsigned* correct,
                   cudaStream_t s = 0);

// Grid sizes: every launcher caps its grid and strides over the rest. The CUDA build always
// uses the GPU caps (2048 blocks, 1024 for the atomic reductions, gridDim.y up to 65535). The
// emulator build caps at 8 (each CUDA thread is a fiber) unless use_gpu_grids(true): then it
// launches the CUDA build's grids, so tests run the many-block paths at GPU sizes (make
// test-gpu-grid). Switch between launches, not while another thread launches these kernels.
void use_gpu_grids(bool on);  // no effect in the CUDA build
bool gpu_grids();             // always true in the CUDA build

}  // namespace nn
