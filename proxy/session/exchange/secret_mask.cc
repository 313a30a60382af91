#include "proxy/session/exchange/secret_mask.h"

#include <algorithm>
#include <cassert>

namespace sluice::proxy::session {

void SecretMask::reset(const SecretPatterns* patterns) {
  patterns_ = (patterns != nullptr && !patterns->empty()) ? patterns : nullptr;
  restart();
}

void SecretMask::restart() {
  state_ = patterns_ != nullptr ? patterns_->start() : 0;
  pending_.clear();
  runs_.clear();
  after_ = ByteSet();
  after_pending_ = false;
}

void SecretMask::feed(std::span<const char> in, std::string& out) {
  if (patterns_ == nullptr) {
    out.append(in.data(), in.size());
    return;
  }
  const std::size_t from = pending_.size();
  pending_.append(in.data(), in.size());
  scan(from);
  // A later occurrence can only begin in the last hold() bytes (they are the start of a
  // pattern), or one byte earlier if that byte is a base64 character a pattern shares with
  // what precedes it.
  std::size_t hold = std::min<std::size_t>(patterns_->hold(state_), pending_.size());
  if (hold < pending_.size() && patterns_->anyBefore().contains(static_cast<unsigned char>(
                                    pending_[pending_.size() - 1 - hold]))) {
    ++hold;
  }
  emit(pending_.size() - hold, out);
}

void SecretMask::finish(std::string& out) {
  if (patterns_ != nullptr) {
    emit(pending_.size(), out);
  }
  restart();
}

void SecretMask::scan(std::size_t from) {
  const SecretPatterns& patterns = *patterns_;
  SecretPatterns::State state = state_;
  // addRun() writes runs_ only: these stay valid through the loop.
  const auto* bytes = reinterpret_cast<const unsigned char*>(pending_.data());
  const std::size_t end = pending_.size();
  for (std::size_t i = from; i < end; ++i) {
    const unsigned char c = bytes[i];
    if (after_pending_) {
      if (after_.contains(c)) {
        addRun(i, i + 1);
      }
      after_ = ByteSet();
      after_pending_ = false;
    }
    state = patterns.next(state, c);
    if (!SecretPatterns::hasOutput(state)) {
      continue;
    }
    const SecretPatterns::Output& output = patterns.output(state);
    // Held back until now, so all of it is still in pending_ (see feed()).
    assert(i + 1 >= output.mask_length);
    std::size_t begin = i + 1 - output.mask_length;
    if (output.before_set != SecretPatterns::kNone && begin > 0 &&
        patterns.set(output.before_set).contains(bytes[begin - 1])) {
      --begin;
    }
    addRun(begin, i + 1);
    if (output.after_set != SecretPatterns::kNone) {
      after_ |= patterns.set(output.after_set);
      after_pending_ = true;
    }
  }
  state_ = state;
}

// Runs arrive with non-decreasing ends: one that reaches back over the last ones swallows them.
void SecretMask::addRun(std::size_t begin, std::size_t end) {
  while (!runs_.empty() && runs_.back().end >= begin) {
    begin = std::min(begin, runs_.back().begin);
    end = std::max(end, runs_.back().end);
    runs_.pop_back();
  }
  runs_.push_back({begin, end});
}

void SecretMask::emit(std::size_t count, std::string& out) {
  if (count == 0) {
    return;
  }
  std::size_t done = 0;  // runs wholly inside what goes now
  for (const Run& run : runs_) {
    if (run.begin >= count) {
      break;
    }
    // The original bytes are overwritten here, before they are passed on.
    std::fill(pending_.begin() + static_cast<std::ptrdiff_t>(run.begin),
              pending_.begin() + static_cast<std::ptrdiff_t>(std::min(run.end, count)), '*');
    if (run.end > count) {
      break;
    }
    ++done;
  }
  if (!runs_.empty()) {
    runs_.erase(runs_.begin(), runs_.begin() + static_cast<std::ptrdiff_t>(done));
    for (Run& run : runs_) {
      run.begin = run.begin > count ? run.begin - count : 0;
      run.end -= count;
    }
  }
  out.append(pending_.data(), count);
  pending_.erase(0, count);
}

}  // namespace sluice::proxy::session
