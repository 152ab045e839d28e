// MNIST-style IDX loader: images (u8, count x rows x cols) and labels (u8, 0..9), raw or gzip.
// Every malformed input ends in one IdxError whose what() is "<path>: <problem>" on one line.
// Tested by tests/io/test_idx.cpp, fuzzed by tests/fuzz/targets/fuzz_idx.cpp (`make fuzz`); speed
// compared with zcat by bench/idx_load_vs_zcat.sh.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace nn::io {

struct IdxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Image i occupies pixels[i*dim() .. (i+1)*dim()), so the buffer is already the
// column-major dim() x count matrix the trainer feeds to the GPU.
struct Images {
  std::size_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;
  std::size_t dim() const { return rows * cols; }
};

// expected_dim == 0 accepts any image size.
Images load_images(const std::string& path, std::size_t expected_dim);
std::vector<std::uint8_t> load_labels(const std::string& path);

// The same parsers on bytes already in memory (raw or gzip, decided by content as for a
// file); `name` stands in for the path in error messages (a name ending in ".gz" must hold
// gzip data, as for a file). The loaders above are these plus file I/O, so the fuzz targets
// (tests/fuzz/) exercise the code the trainer runs.
Images parse_images(const std::uint8_t* data, std::size_t n, const std::string& name,
                    std::size_t expected_dim);
std::vector<std::uint8_t> parse_labels(const std::uint8_t* data, std::size_t n, const std::string& name);

struct Dataset {
  Images images;
  std::vector<std::uint8_t> labels;
  std::string images_path, labels_path;
  std::size_t size() const { return images.count; }
};

// Loads both files and checks that they describe the same number of examples.
Dataset load_dataset(const std::string& images_path, const std::string& labels_path,
                     std::size_t expected_dim);

// "<dir>/<stem>" if it exists, else "<dir>/<stem>.gz"; IdxError if neither does.
std::string find_idx_file(const std::string& dir, const std::string& stem);

// split is the file-name prefix: "train" or "t10k" in the MNIST distributions.
Dataset load_split(const std::string& dir, const std::string& split,
                   std::size_t expected_dim = 784);

// A true division (not a multiply by 1/255) so that every value is exactly the
// correctly rounded x / 255 in T, and 255 maps to exactly 1.
template <class T>
void normalize(const std::uint8_t* src, std::size_t n, T* dst) {
  static_assert(std::is_floating_point_v<T>, "normalize targets float or double");
  for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]) / static_cast<T>(255);
}

}  // namespace nn::io
