#include "proxy/runtime/published_generation.h"

#include "proxy/runtime/generation.h"

namespace sluice::proxy {

void PublishedGeneration::publish(std::shared_ptr<const Generation> generation) {
  const std::uint64_t number = generation->number;
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = std::move(generation);
  // Stored after current_ is set: a thread that sees the number finds its generation.
  number_.store(number, std::memory_order_seq_cst);
}

void PublishedGeneration::refresh(std::shared_ptr<const Generation>& held) const {
  if (held != nullptr && number_.load(std::memory_order_seq_cst) == held->number) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (current_ != nullptr) {
    held = current_;
  }
}

}  // namespace sluice::proxy
