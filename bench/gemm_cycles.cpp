// One nn::gemm call at a given shape, for cycle models: under tests/gpgpusim/run.sh --model
// qv100|rtx3070 the simulator's cycle count of the process is the call's (its only kernels).
// Driven by bench/gpgpusim_cycles.sh (make bench-gpgpusim); in the emulator build it runs too,
// which only shows that the call is valid.
//   gemm_cycles VARIANT M N K OPA OPB EPILOGUE     e.g. gemm_cycles 4 256 50 784 N N biassigmoid
//   gemm_cycles --list      the available variants, one "NUMBER NAME" a line (no CUDA call)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/check.h"
#include "common/device_buffer.h"
#include "gemm/gemm.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (int v = 0; v < nn::kGemmVariants; ++v)
      if (nn::gemm_variant_available(v)) std::printf("%d %s\n", v, nn::gemm_variant_name(v));
    return 0;
  }
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s VARIANT M N K N|T N|T none|bias|biassigmoid\n       %s --list\n",
                 argv[0], argv[0]);
    return 2;
  }
  const int v = std::atoi(argv[1]), M = std::atoi(argv[2]), N = std::atoi(argv[3]), K = std::atoi(argv[4]);
  const std::string ep = argv[7];
  if (!nn::gemm_variant_available(v) || M < 1 || N < 1 || K < 1 || (ep != "none" && ep != "bias" && ep != "biassigmoid")) {
    std::fprintf(stderr, "error: bad arguments (variant 0-%d, sizes >= 1, epilogue none|bias|biassigmoid)\n",
                 nn::kGemmVariants - 1);
    return 2;
  }
  nn::GemmArgs<float> a;
  a.opA = std::strcmp(argv[5], "T") == 0 ? nn::Op::T : nn::Op::N;
  a.opB = std::strcmp(argv[6], "T") == 0 ? nn::Op::T : nn::Op::N;
  a.M = M, a.N = N, a.K = K;
  a.lda = a.opA == nn::Op::N ? M : K;
  a.ldb = a.opB == nn::Op::N ? K : N;
  a.ldd = M;
  nn::DeviceBuffer<float> A(std::size_t(M) * K), B(std::size_t(K) * N), D(std::size_t(M) * N), bias(M);
  A.zero();
  B.zero();
  bias.zero();
  a.A = A.get(), a.B = B.get(), a.D = D.get(), a.bias = bias.get();
  a.epilogue = ep == "none" ? nn::Epilogue::None : ep == "bias" ? nn::Epilogue::Bias : nn::Epilogue::BiasSigmoid;
  nn::gemm(v, a);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("gemm_cycles: variant %d (%s) %dx%dx%d op%s%s %s done\n", v, nn::gemm_variant_name(v), M, N, K,
              argv[5], argv[6], ep.c_str());
  return 0;
}
