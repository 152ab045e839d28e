// The GEMM variant registry: the one list of nn::gemm's numbered variants, which of them can
// run the fused step, and the default. Everything else comes from it: kGemmVariants,
// gemm_variant_name / _available, gemm_default_variant, gemm_has_fused_extras, the
// dispatcher's launcher table (gemm.cu), the launchers' declarations (gemm.h), nn_train's
// --gemm help (gemm_variants_help), and through those the tests and benches that loop over
// 0..kGemmVariants-1. How to add one: kernels/gemm/README.md ("Adding variant N");
// tests/build/check_gemm_registry.py checks this list against --help, the README and the bench.
//
// One row per variant, in number order:  X(NUMBER, NAME, STEP, "HELP")
//   NUMBER  permanent: checkpoint fingerprints, --gemm N command lines and scripts store it.
//           Never renumber, never reuse a number.
//   NAME    the launcher is nn::gemm_detail::gemm_NAME<T>(const GemmArgs<T>&, cudaStream_t),
//           defined in kernels/gemm/NUMBER_NAME.cu; also gemm_variant_name(NUMBER) and the
//           test/bench row names.
//   STEP    fused: the variant also has the fused training step's epilogue (Epilogue::Step,
//           the SGD update applied by the dW1 GEMM), so --fused can use it; plain: it has not.
//   HELP    what nn_train --help shows for it after the number.
#pragma once

// clang-format off
#define NN_GEMM_VARIANTS(X)                                    \
  X(0, cublas,   plain, "cuBLAS (emulator: on OpenBLAS)")       \
  X(1, naive,    plain, "naive")                                \
  X(2, tiled,    plain, "tiled")                                \
  X(3, regblock, plain, "regblock")                             \
  X(4, warptile, fused, "warptile")                             \
  X(5, tf32x3,   fused, "tf32x3 (tensor cores, 3xTF32; float)")  \
  /* new rows go above this line */
// clang-format on

// --gemm's default: the fastest of ours at FP32 accuracy in both precisions (variant 5 is
// float only). It must be a fused row.
#define NN_GEMM_DEFAULT_VARIANT 4
