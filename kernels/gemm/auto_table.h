// What `--gemm auto` and `--persistent auto` choose on a measured GPU class: one row per
// (compute capability, H, B) measured, with the medians the choice came from. The rows are
// derived from the committed --metrics CSVs by bench/auto_table.py, and
// `python3 bench/auto_table.py --check` (run by make test-build) fails when this table and
// those files disagree, so an entry cannot drift from its measurement.
//
// Provenance: NVIDIA H200 (compute capability 9.0, 132 SMs), 2026-11-28, kit `8f70bad`,
// bench/results/h200-2026-11-28c/ (session/, sweep/, check/); one rank, Fashion-MNIST, each
// median of epochs 2-4 in ms an epoch. Per configuration the fastest of its runs:
//   gemm4_ms       the fused step, --gemm 4, PDL off (pdl_off_*, sweep_pdl0_*, sweep_gemm4_*)
//   gemm5_ms       the fused step, --gemm 5 on its default mma.sync plan (sweep_gemm5_*,
//                  gemm5w_mma_*; the opt-in NN_TF32_WGMMA=1 runs are left out)
//   persistent_ms  the persistent step, any tile (persist2_train_*, peer_ours_persistent_*,
//                  sweep_tile_*, check_tile_*); 0: not measured (not admitted at that shape)
// gemm: the faster fused-step variant. persistent: the persistent step beat that fused step.
// The persistent step's own kernel computes no GEMM of ours: the variant then serves the
// validation and test passes and the checkpoint's fingerprint.
// Host-only C++ (no CUDA): the trainer's src/train/gemm_auto.cpp and its tests read it.
#pragma once

namespace nn::gemm_auto {

struct AutoRow {
  int cc_major, cc_minor;  // the GPU class the row was measured on
  int hidden, batch;       // H and the one rank's batch B
  int gemm;                // the fused step's faster variant
  bool persistent;         // the persistent step was faster than that
  double gemm4_ms, gemm5_ms, persistent_ms;
};

// The GPU the rows were measured on, for the header line and --report.
inline constexpr const char* kMeasuredOn = "NVIDIA H200";

// clang-format off
// bench/auto_table.py rows (keep one row a line: the check reads them).
inline constexpr AutoRow kAutoTable[] = {
  {9, 0, 256, 100, 5, true, 21.1, 18.3, 10.3},
  {9, 0, 512, 800, 5, false, 6.8, 6.6, 12.8},
  {9, 0, 1024, 1000, 5, false, 9.7, 8.8, 0},
  {9, 0, 1024, 3000, 5, false, 7.4, 6.6, 0},
};
// clang-format on

}  // namespace nn::gemm_auto
