// The GEMM variant registry: the one list of nn::gemm's numbered variants. Everything else
// comes from it: kGemmVariants, gemm_variant_name / _available, the dispatcher's launcher
// table (gemm.cu), the launchers' declarations (gemm.h), nn_train's --gemm help
// (gemm_variants_help), and through those the tests and benches that loop over
// 0..kGemmVariants-1. How to add one: kernels/gemm/README.md ("Adding variant N");
// tests/build/check_gemm_registry.py checks this list against --help, the README and the bench.
//
// One row per variant, in number order:  X(NUMBER, NAME, STATE, "HELP")
//   NUMBER  permanent: checkpoint fingerprints, --gemm N command lines and scripts store it.
//           Never renumber, never reuse a number.
//   NAME    the launcher is nn::gemm_detail::gemm_NAME<T>(const GemmArgs<T>&, cudaStream_t),
//           defined in kernels/gemm/NUMBER_NAME.cu; also gemm_variant_name(NUMBER) and the
//           test/bench row names.
//   STATE   live, or retired: a retired variant keeps its row (number and name), has no
//           launcher, and gemm_variant_available() is false for it.
//   HELP    what nn_train --help shows for it after the number.
#pragma once

// clang-format off
#define NN_GEMM_VARIANTS(X)                                    \
  X(0, cublas,   live, "cuBLAS (emulator: on OpenBLAS)")       \
  X(1, naive,    live, "naive")                                \
  X(2, tiled,    live, "tiled")                                \
  X(3, regblock, live, "regblock")                             \
  X(4, warptile, live, "warptile")                             \
  X(5, tf32x3,   live, "tf32x3 (tensor cores, 3xTF32; float)")  \
  /* new rows go above this line */
// clang-format on
