// Finds the saved fuzzer inputs, tests/fuzz/regressions/<target>/*, for the gtests that replay
// them in `make test` (tests/io/test_idx_parsers.cpp, tests/io/test_checkpoint.cpp). Looked up
// from the working directory (make runs tests from the repository root), then from the test binary up.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace nn::test {

// The directory, or "" when neither the working directory nor any parent of the test
// binary's directory holds tests/fuzz/regressions/<target>.
inline std::string regression_dir(const std::string& target) {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path("tests") / "fuzz" / "regressions" / target;
  std::error_code ec;  // a missing candidate sets it; each check starts afresh
  if (fs::is_directory(rel, ec)) return rel.string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path p = exe.parent_path(); !p.empty(); p = p.parent_path()) {
    if (fs::is_directory(p / rel, ec)) return (p / rel).string();
    if (p == p.root_path()) break;
  }
  return "";
}

// Every regular file in the directory, sorted, so failures name the same file on every rank.
inline std::vector<std::string> regression_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace nn::test
