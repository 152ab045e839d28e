// Times nn::io::load_images (or load_labels, chosen by the file's IDX magic) on one raw or gzip file.
// Run: idx_load_bench FILE [repeats]  -> one line per run, then "best_s=<seconds>".
// bench/idx_load_vs_zcat.sh builds it and compares the best time with zcat's.
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/idx.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s FILE [repeats]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int repeats = argc == 3 ? std::atoi(argv[2]) : 5;
  if (repeats < 1) {
    std::fprintf(stderr, "repeats must be >= 1\n");
    return 2;
  }
  // gzread passes raw files through unchanged, so this peeks at the IDX magic either way.
  unsigned char m[4] = {0, 0, 0, 0};
  if (gzFile g = gzopen(path.c_str(), "rb")) {
    gzread(g, m, 4);
    gzclose(g);
  }
  const bool labels = m[2] == 0x08 && m[3] == 0x01;

  double best = 1e300;
  try {
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      std::size_t items = 0, bytes = 0;
      unsigned checksum = 0;  // touches the result so the load cannot be optimised away
      if (labels) {
        auto l = nn::io::load_labels(path);
        items = l.size(), bytes = l.size(), checksum = l.back();
      } else {
        auto im = nn::io::load_images(path, 0);
        items = im.count, bytes = im.pixels.size(), checksum = im.pixels[bytes / 2];
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = s < best ? s : best;
      std::printf("run %d: %s %zu items, %zu bytes, %.4f s (check %u)\n", r + 1, labels ? "labels" : "images",
                  items, bytes, s, checksum);
    }
  } catch (const nn::io::IdxError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("best_s=%.6f\n", best);
  return 0;
}
