// Slicing the packed parameters by hidden unit and putting them back together
// (model_parallel.h). Column-major throughout: W1 is H x D, W2 is C x H.
#include "train/model_parallel.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

#include "model/device_model.h"

namespace nn::train {

HiddenSlice hidden_slice(int H, int p, int r) {
  if (H < 1 || p < 1 || r < 0 || r >= p) throw std::invalid_argument("hidden_slice: bad arguments");
  const int base = H / p, rem = H % p;
  return {r * base + std::min(r, rem), base + (r < rem ? 1 : 0)};
}

std::vector<double> slice_params(const std::vector<double>& full, int D, int H, int C, HiddenSlice s) {
  const model::ParamLayout F{D, H, C}, L{D, s.H, C};
  if (full.size() != F.total() || s.h0 < 0 || s.H < 0 || s.h0 + s.H > H)
    throw std::invalid_argument("slice_params: sizes do not match");
  std::vector<double> out(L.total());
  for (int j = 0; j < D; ++j)
    for (int i = 0; i < s.H; ++i)
      out[L.W1() + std::size_t(j) * s.H + i] = full[F.W1() + std::size_t(j) * H + s.h0 + i];
  for (int i = 0; i < s.H; ++i) out[L.b1() + i] = full[F.b1() + s.h0 + i];
  std::copy_n(full.begin() + std::ptrdiff_t(F.W2() + std::size_t(s.h0) * C), std::size_t(s.H) * C,
              out.begin() + std::ptrdiff_t(L.W2()));
  std::copy_n(full.begin() + std::ptrdiff_t(F.b2()), C, out.begin() + std::ptrdiff_t(L.b2()));
  return out;
}

std::vector<double> assemble_params(const std::vector<double>& slices, int D, int H, int C, int p) {
  const model::ParamLayout F{D, H, C};
  std::vector<double> full(F.total());
  std::size_t at = 0;
  for (int r = 0; r < p; ++r) {
    const HiddenSlice s = hidden_slice(H, p, r);
    const model::ParamLayout L{D, s.H, C};
    if (at + L.total() > slices.size()) throw std::invalid_argument("assemble_params: too few values");
    const double* in = slices.data() + at;
    for (int j = 0; j < D; ++j)
      for (int i = 0; i < s.H; ++i)
        full[F.W1() + std::size_t(j) * H + s.h0 + i] = in[L.W1() + std::size_t(j) * s.H + i];
    for (int i = 0; i < s.H; ++i) full[F.b1() + s.h0 + i] = in[L.b1() + i];
    std::copy_n(in + L.W2(), std::size_t(s.H) * C, full.begin() + std::ptrdiff_t(F.W2() + std::size_t(s.h0) * C));
    if (r == 0) std::copy_n(in + L.b2(), C, full.begin() + std::ptrdiff_t(F.b2()));
    at += L.total();
  }
  if (at != slices.size()) throw std::invalid_argument("assemble_params: too many values");
  return full;
}

}  // namespace nn::train
