#pragma once
// Latency percentiles in fixed memory, HDR-histogram style: values below 64 ns are counted
// exactly; above, each power of two is split into 64 linear buckets, so a percentile is off by
// at most 1/128 of its value (half a bucket: the midpoint is reported). Recording is a few
// instructions and never allocates; the array (18 KiB) covers up to 2^41 ns (about 36 min);
// longer values land in the last bucket.
//
// One histogram per generator thread (no sharing, no atomics); merge() adds them up at the end.

#include <array>
#include <bit>
#include <cstdint>

namespace sluice::loadgen {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;
  static constexpr std::uint64_t kSubBuckets = std::uint64_t{1} << kSubBits;  // 64
  static constexpr int kMaxExponent = 40;  // the top octave is [2^40, 2^41)

  void record(std::uint64_t ns) {
    ++counts_[indexOf(ns)];
    ++total_;
  }
  void merge(const LatencyHistogram& other);

  std::uint64_t count() const { return total_; }
  // The value (ns) at or below which a fraction `p` (0 < p <= 1) of the samples lie: the
  // midpoint of the bucket holding that rank. 0 when there are no samples.
  std::uint64_t percentile(double p) const;

  static std::size_t indexOf(std::uint64_t ns) {
    if (ns < kSubBuckets) {
      return static_cast<std::size_t>(ns);
    }
    auto exponent = static_cast<int>(std::bit_width(ns)) - 1;  // >= kSubBits
    if (exponent > kMaxExponent) {
      return kBuckets - 1;
    }
    int shift = exponent - kSubBits;
    std::uint64_t sub = (ns >> shift) - kSubBuckets;  // the 6 bits below the leading one
    return static_cast<std::size_t>(kSubBuckets * static_cast<std::uint64_t>(shift + 1) + sub);
  }
  // The smallest value of bucket `index`, and how many values it spans.
  static std::uint64_t lowerBound(std::size_t index);
  static std::uint64_t width(std::size_t index);

  static constexpr std::size_t kBuckets =
      static_cast<std::size_t>(kSubBuckets * (kMaxExponent - kSubBits + 2));

 private:
  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t total_ = 0;
};

}  // namespace sluice::loadgen
