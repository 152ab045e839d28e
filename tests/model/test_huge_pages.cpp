// HugePageAllocator (src/model/huge_pages.h): values and alignment as promised, and where the
// kernel offers transparent huge pages, the big block really sits in them.
#include "model/huge_pages.h"

#include <gtest/gtest.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace nn::model {
namespace {

// "always [madvise] never" -> "madvise" (of /sys/kernel/mm/transparent_hugepage/<file>); ""
// when the file is missing (not Linux, no THP).
std::string thp_mode(const std::string& file = "enabled") {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/" + file);
  std::string line;
  std::getline(f, line);
  const auto a = line.find('['), b = line.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : line.substr(a + 1, b - a - 1);
}

// AnonHugePages (kB) of the mapping in /proc/self/smaps that contains p; -1 when none does.
long huge_kb_of(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= addr && addr < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

TEST(HugePages, SmallBlocksAreOrdinaryAndKeepTheirValues) {
  std::vector<int, HugePageAllocator<int>> v(1000);
  std::iota(v.begin(), v.end(), 0);
  v.push_back(1000);
  for (int i = 0; i <= 1000; ++i) ASSERT_EQ(v[std::size_t(i)], i);
  std::vector<char, HugePageAllocator<char>> empty;
  EXPECT_TRUE(empty.empty());
}

TEST(HugePages, BigBlocksAre2MiBAlignedAndBackedByHugePagesWhereTheKernelOffersThem) {
  // Big blocks malloc'd, touched and freed first, as a process does before it loads the
  // images: the allocator must not be handed their pages, already in 4 KiB pages, again.
  for (int i = 0; i < 3; ++i) {
    std::vector<std::uint8_t> before(8 * kHugePage, std::uint8_t(i));
    ASSERT_EQ(before[12345], std::uint8_t(i));
  }
  const std::size_t n = 3 * kHugePage + 12345;  // not a whole number of pages
  std::vector<std::uint8_t, HugePageAllocator<std::uint8_t>> v(n);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % kHugePage, 0u);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::uint8_t(i * 7);
  for (std::size_t i = 0; i < n; i += 4099) ASSERT_EQ(v[i], std::uint8_t(i * 7)) << i;
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator places the block";
#endif
  const std::string mode = thp_mode(), defrag = thp_mode("defrag");
  if (mode != "madvise" && mode != "always") GTEST_SKIP() << "transparent huge pages: '" << mode << "'";
#if defined(PR_GET_THP_DISABLE)
  if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1) GTEST_SKIP() << "huge pages disabled for this process (prctl)";
#endif
  // The first touch after madvise() faults in whole 2 MiB pages: at least the first three. A
  // kernel that may not compact memory for them (defrag "never") falls back to small pages
  // when no free 2 MiB block is at hand: then a shortfall is the machine's, not ours.
  const long kb = huge_kb_of(v.data());
  if (kb < 3 * long(kHugePage >> 10) && defrag == "never")
    GTEST_SKIP() << "THP defrag 'never' and no free 2 MiB blocks (" << kb << " kB in huge pages)";
  EXPECT_GE(kb, 3 * long(kHugePage >> 10)) << "THP mode " << mode << ", defrag " << defrag;
}

}  // namespace
}  // namespace nn::model
