#include "bench/loadgen/histogram.h"

#include <cmath>

namespace sluice::loadgen {

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < kBuckets; ++i) {
    counts_[i] += other.counts_[i];
  }
  total_ += other.total_;
}

std::uint64_t LatencyHistogram::lowerBound(std::size_t index) {
  if (index < kSubBuckets) {
    return index;
  }
  std::uint64_t shift = index / kSubBuckets - 1;
  std::uint64_t sub = index % kSubBuckets;
  return (kSubBuckets + sub) << shift;
}

std::uint64_t LatencyHistogram::width(std::size_t index) {
  return index < kSubBuckets ? 1 : std::uint64_t{1} << (index / kSubBuckets - 1);
}

std::uint64_t LatencyHistogram::percentile(double p) const {
  if (total_ == 0) {
    return 0;
  }
  // The rank of the sample at fraction p, counting from 1 (p50 of 2 samples is the first).
  auto rank = static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(total_)));
  rank = rank < 1 ? 1 : rank > total_ ? total_ : rank;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      return lowerBound(i) + width(i) / 2;
    }
  }
  return lowerBound(kBuckets - 1);
}

}  // namespace sluice::loadgen
