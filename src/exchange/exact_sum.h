// The sum behind rank-count-independent training: the chunks' gradients of one global batch
// (src/schedule/exact_plan.h cuts every batch into chunks whose size depends on the batch alone;
// a rank computes whole chunks) summed over every chunk of every rank with a result that does not
// depend on which rank computed which chunk, or in what order. The trainer does not use it yet.
//
// One batch, in three collective steps (every rank calls each, also a rank with no chunk):
//   note(g)    for each of this rank's chunks: the largest binary exponent of each segment
//              (a tensor: W1, b1, W2, b2) so far;
//   agree()    the segments' exponents, max over the ranks (comm::max_each: MPI_MAX), then each
//              segment's format (fixed_point.h) from that exponent and the batch's chunk count:
//              a function of every chunk, never of one rank's part;
//   add(g)     for each chunk again: its values rounded into the words (wrapping integer adds);
//   finish(out) the words summed over the ranks (comm::Reduction<uint64_t>: MPI_Allreduce or the
//              parameter server, both exact on integers) and rounded once into out.
// note_all / add_all do the same for several chunks at once. With set_threads(t), every pass over
// the values is cut into t ranges done by t threads (per-value work: the same words and bits at
// any t). A NaN or Inf in any chunk makes every rank's agree() throw the same error (the max
// carries it to all), and a sum beyond T's range every rank's finish(): no rank waits for another
// in a collective that will not come. Tested by tests/exchange/test_exact_sum.cpp at 1-4 ranks.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "exchange/fixed_point.h"

namespace nn::exchange {

// A tensor of the gradient: values [begin, begin + count), one scale.
struct ExactSegment {
  std::size_t begin = 0, count = 0;
};

template <class T>
class ExactSum {
 public:
  using Segment = ExactSegment;
  static constexpr int kWords = fixed::Format<T>::words;

  // segments: consecutive tensors of the gradient; chunks: the batch's chunk count (every rank's
  // chunks together), which sets the headroom. reduce: how the words are summed over the ranks.
  ExactSum(std::vector<Segment> segments, std::uint64_t chunks, comm::Reduction<std::uint64_t> reduce)
      : seg_(std::move(segments)), reduce_(reduce), chunks_(chunks) {
    for (const Segment& s : seg_) n_ = std::max(n_, s.begin + s.count);
    words_.assign(n_ * kWords, 0);
    clear();
  }

  std::size_t values() const { return n_; }
  // Bytes one rank sends in finish(): the exchange's size on the wire.
  std::size_t wire_bytes() const { return words_.size() * sizeof(std::uint64_t); }

  // A new batch (chunks: its chunk count, which may be fewer for a partial last batch).
  void clear(std::uint64_t chunks = 0) {
    if (chunks) chunks_ = chunks;
    exp_.assign(seg_.size(), fixed::kAllZero);
    fmt_.clear();
    std::fill(words_.begin(), words_.end(), 0);
  }

  // Threads each pass over the values uses (1: the caller's alone).
  void set_threads(int t) { threads_ = t < 1 ? 1 : t; }

  void note(const T* g) { note_all({g}); }
  void note_all(const std::vector<const T*>& gs) {
    std::vector<std::vector<int>> part(threads_, std::vector<int>(seg_.size(), fixed::kAllZero));
    in_parallel([&](int t, std::size_t s, std::size_t lo, std::size_t n) {
      for (const T* g : gs) part[t][s] = std::max(part[t][s], fixed::max_exponent(g + lo, n));
    });
    for (const auto& p : part)
      for (std::size_t s = 0; s < seg_.size(); ++s) exp_[s] = std::max(exp_[s], p[s]);
  }

  void agree() {
    comm::max_each(exp_);
    fmt_.clear();
    for (std::size_t s = 0; s < seg_.size(); ++s) {
      if (exp_[s] == fixed::kNonFinite)
        throw std::runtime_error("--exact: the gradient of segment " + std::to_string(s) +
                                 " holds a NaN or an infinity in some chunk");
      fmt_.push_back(fixed::make_format<T>(exp_[s], chunks_));
    }
  }

  void add(const T* g) { add_all({g}); }
  void add_all(const std::vector<const T*>& gs) {
    if (fmt_.size() != seg_.size()) throw std::logic_error("ExactSum::add before agree()");
    std::vector<std::size_t> refused(threads_, 0);
    in_parallel([&](int t, std::size_t s, std::size_t lo, std::size_t n) {
      for (const T* g : gs) refused[t] += fixed::accumulate(g + lo, n, fmt_[s], words_.data() + lo * kWords);
    });
    for (const std::size_t r : refused)
      if (r)  // cannot happen after note() saw the same values; a wrong caller, not bad data
        throw std::logic_error("ExactSum::add: a value beyond the agreed format (was it noted?)");
  }

  void finish(T* out) {
    if (fmt_.size() != seg_.size()) throw std::logic_error("ExactSum::finish before agree()");
    reduce_.now(words_.data(), words_.size()).wait();
    std::vector<std::size_t> overflow(threads_, 0);
    in_parallel([&](int t, std::size_t s, std::size_t lo, std::size_t n) {
      overflow[t] += fixed::round_back(words_.data() + lo * kWords, n, fmt_[s], out + lo);
    });
    std::size_t total = 0;
    for (const std::size_t o : overflow) total += o;
    if (total)
      throw std::runtime_error("--exact: " + std::to_string(total) +
                               " summed gradient values exceed the floating-point range");
  }

 private:
  // fn(thread, segment, begin, count) over every segment's values, the values [0, n) cut into
  // threads_ contiguous ranges (thread t: [t n / T, (t + 1) n / T)), each split at the segments.
  template <class F>
  void in_parallel(F&& fn) {
    const auto range = [&](int t) {
      const std::size_t a = n_ * std::size_t(t) / std::size_t(threads_), b = n_ * std::size_t(t + 1) / std::size_t(threads_);
      for (std::size_t s = 0; s < seg_.size(); ++s) {
        const std::size_t lo = std::max(a, seg_[s].begin), hi = std::min(b, seg_[s].begin + seg_[s].count);
        if (lo < hi) fn(t, s, lo, hi - lo);
      }
    };
    std::vector<std::thread> team;
    for (int t = 1; t < threads_; ++t) team.emplace_back(range, t);
    range(0);
    for (std::thread& th : team) th.join();
  }

  std::vector<Segment> seg_;
  comm::Reduction<std::uint64_t> reduce_;
  std::uint64_t chunks_ = 1;
  std::size_t n_ = 0;
  std::vector<int> exp_;
  std::vector<fixed::Format<T>> fmt_;
  std::vector<std::uint64_t> words_;
  int threads_ = 1;
};

}  // namespace nn::exchange
