// The packed parameters [W1 | b1 | W2 | b2] (model/param_layout.h) to and from the four
// tensors of a checkpoint or an initialisation. Internal to src/train.
#pragma once
#include <cstddef>
#include <type_traits>
#include <vector>

#include "train/result.h"
#include "model/param_layout.h"

namespace nn::train {

// [W1 | b1 | W2 | b2] <-> the four tensors of a checkpoint / initialisation.
inline std::vector<double> pack(const std::vector<double>& W1, const std::vector<double>& b1,
                         const std::vector<double>& W2, const std::vector<double>& b2) {
  std::vector<double> out;
  out.reserve(W1.size() + b1.size() + W2.size() + b2.size());
  for (const auto* v : {&W1, &b1, &W2, &b2}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

template <class T>
Checkpoint unpack(const std::vector<T>& p, const model::ParamLayout& L) {
  Checkpoint ck;
  ck.D = L.D; ck.H = L.H; ck.C = L.C;
  ck.is_double = std::is_same_v<T, double>;
  auto take = [&](std::size_t at, std::size_t n) { return std::vector<double>(p.begin() + at, p.begin() + at + n); };
  ck.W1 = take(L.W1(), std::size_t(L.H) * L.D);
  ck.b1 = take(L.b1(), L.H);
  ck.W2 = take(L.W2(), std::size_t(L.C) * L.H);
  ck.b2 = take(L.b2(), L.C);
  return ck;
}

}  // namespace nn::train
