// The fourth persistent kernel's plan (persistent_step.h: persistent_plan_v4): the cluster size,
// the hidden units a cluster and the shared memory from the device's compute capability, SMs,
// shared memory and resident clusters (8 blocks a cluster and the fewest units that give one
// block an SM, else that are resident at all); where nothing fits, one line saying why. No model: variant 4 is
// run only on request (NN_PERSISTENT_VARIANT=4). Host code (nvcc or simcc). Tested by
// tests/kernels/test_persistent_cluster.cpp.
#include <string>

#include "ops/persistent_step.h"
#include "ops/persistent_step4.h"

namespace nn {

namespace {

PersistentPlan refuse(std::string* why, const std::string& line) {
  if (why) *why = "NN_PERSISTENT_VARIANT=4 (thread block clusters): " + line;
  return {};
}

template <class T>
bool fill_v4(PersistentPlan& p, int D, int H, int B, int cl, int units, std::size_t smem_max, int device) {
  const int td = (D + cl - 1) / cl, jsplit = persist4::jsplit_of(td, units);
  const persist4::Layout L = persist4::layout<T>(td, units, B, jsplit);
  const int nc = H / units;
  if (L.total > smem_max || nc > persist4::max_clusters<T>(cl, L.total, device)) return false;
  p.variant = 4;
  p.cluster = cl, p.units = units;
  p.tile_d = td, p.tile_h = units, p.slices = cl;
  p.tiles = p.blocks = nc * cl;
  p.tiles_per_block = 1, p.jsplit = jsplit;
  p.smem = L.total;
  p.scratch = std::size_t(2) * nc * B * persist4::kMaxC;  // the clusters' partial scores, by step parity
  return true;
}

}  // namespace

template <class T>
PersistentPlan persistent_plan_v4(int D, int H, int B, int cluster, int units, int device, std::string* why) {
  if (D < 1 || H < 1 || B < 1) return refuse(why, "needs D, H and B >= 1");
  int major = 0, minor = 0, coop = 0, sms = 0, optin = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return refuse(why, "the device's attributes cannot be read");
  }
  if (major < 9)
    return refuse(why, "needs compute capability 9.0 or later; device " + std::to_string(device) + " has " +
                           std::to_string(major) + "." + std::to_string(minor));
  if (!coop) return refuse(why, "the device has no cooperative launch");
  if (cluster < 0 || cluster > persist4::kMaxCluster || units < 0 || (units > 0 && (units % 4 || H % units)))
    return refuse(why, "a cluster of 1 to 8 blocks and units a multiple of 4 that divides H");
  // First one block an SM (the grid barrier's cost grows with the blocks), else as many as are
  // resident at once.
  for (const bool one_an_sm : {true, false})
    for (int cl = cluster > 0 ? cluster : persist4::kMaxCluster; cl >= (cluster > 0 ? cluster : 2); cl /= 2)
      for (int u = 4; u <= H; u += 4) {
        if (H % u || (units > 0 && u != units) || (one_an_sm && H / u * cl > sms)) continue;
        PersistentPlan p;
        if (fill_v4<T>(p, D, H, B, cl, u, std::size_t(optin), device)) return p;
      }
  return refuse(why, "no cut fits H = " + std::to_string(H) + ", B = " + std::to_string(B) +
                         ": it needs hidden units a cluster (a multiple of 4) dividing H, H / units clusters of " +
                         (cluster > 0 ? std::to_string(cluster) : std::string("8, 4 or 2")) +
                         " blocks resident at once (" + std::to_string(sms) +
                         " SMs), and a block's W1 tile, inputs and batch columns within " +
                         std::to_string(optin / 1024) + " KiB of shared memory");
}

#define NN_PLAN4_INSTANTIATE(T) \
  template PersistentPlan persistent_plan_v4<T>(int, int, int, int, int, int, std::string*);
NN_PLAN4_INSTANTIATE(float)
NN_PLAN4_INSTANTIATE(double)
#undef NN_PLAN4_INSTANTIATE

}  // namespace nn
