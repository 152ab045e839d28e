// How the host-staged exchange (host_staged.h) cuts layer 1's gradient into pieces.
#pragma once
#include <algorithm>
#include <cstddef>

namespace nn::exchange {

// Pieces of layer 1 at most (each takes one of the model's copy tickets, model/model.h).
inline constexpr std::size_t kMaxPieces = 32;

// Layer 1's values a piece for pieces of `bytes` bytes (0: one piece), at most kMaxPieces.
inline std::size_t piece_values(std::size_t bytes, std::size_t layer1, std::size_t value_size) {
  if (bytes == 0 || layer1 == 0) return layer1 ? layer1 : 1;
  const std::size_t piece = std::max<std::size_t>(1, bytes / value_size);
  return std::max(piece, (layer1 + kMaxPieces - 1) / kMaxPieces);
}

}  // namespace nn::exchange
