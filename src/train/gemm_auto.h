// --gemm auto and the measured part of --persistent auto: choices read from the table of
// measurements (kernels/gemm/auto_table.h), by the GPU's class (compute capability) and the
// run's shape, never from timing, so the same command on the same kind of GPU picks the same.
// Tested by tests/train/test_gemm_auto.cpp (the rules, the emulator's choice, resuming).
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "gemm/auto_table.h"
#include "gemm/variants.h"
#include "train/config.h"

namespace nn::train {

using gemm_auto::AutoRow;

// The variant auto falls back to where nothing measured applies (the registry's default).
constexpr int kGemmAutoFallback = NN_GEMM_DEFAULT_VARIANT;

// What a rank computes on, as far as the table goes. measured_class: a real GPU, whose class
// the table's rows may hold; false for the SIMT emulator and GPGPU-Sim (they report a compute
// capability, 9.0 and 7.0, but their speed is not a GPU's).
struct GpuClass {
  int major = 0, minor = 0;
  bool measured_class = false;
  std::string name;
};

// The table's row for this class whose (H, B) is nearest (distance in log H and log B) among
// those within a factor of 2 of H and of B; nullptr when none.
const AutoRow* nearest_row(const GpuClass& gpu, int hidden, std::size_t batch);
// The row measured at exactly this class and shape; nullptr when none.
const AutoRow* exact_row(const GpuClass& gpu, int hidden, std::size_t batch);

struct GemmPick {
  int gemm = kGemmAutoFallback;
  std::string why;  // for the header line and --report: "auto: ..."
};

// --gemm auto on one rank: hidden units and images a step of this rank (its batch part; the
// table was measured at one rank). --exact on keeps the fallback (its weights must not depend on
// the rank count, and the shape a rank sees does); double keeps it (variant 5 is float only), as
// does a class below compute capability 8.0 (no TF32 tensor cores).
GemmPick pick_gemm(const GpuClass& gpu, int hidden, std::size_t batch, bool is_double, bool exact);

// This rank's GPU: the device it will select (the node-local rank modulo the node's devices);
// a default GpuClass where none is visible. Under the emulator measured_class is false.
GpuClass this_rank_gpu();

// --gemm auto for the run, on every rank (collective): with --resume and an existing --save
// file whose run was on the GPU, that run's variant (a resumed run keeps its GEMM); else each
// rank's pick_gemm, and where the ranks' picks differ, the fallback. Sets cfg.gemm and
// cfg.gemm_why. Does nothing unless cfg.gemm_auto and --device gpu.
void resolve_gemm_auto(Config& cfg, bool is_double);

// --persistent auto where the table measured this GPU's class at exactly this shape (one rank,
// the batch B): whether the persistent step was faster there; nullopt elsewhere (the caller then
// asks the plan's model). Queries the current device.
std::optional<bool> measured_persistent(int hidden, std::size_t batch);

}  // namespace nn::train
