#pragma once
// The generation in force for the whole process. The main thread publishes a reload's
// generation here before it tells the workers; whatever starts a request, a connection or a
// query to a sandbox's resolver, on any worker, compares one atomic number with the generation
// it holds and takes the published one up at once.
//
// Without it each worker switched when its own loop got round to the hand-over: for that
// moment a request on one worker was forwarded under the old policy after a request on another
// had already been refused under the new one. Now a reload is one instant for all of them.
// (Listeners, resolvers and the draining of removed sandboxes still follow on each worker's
// loop: they change what is served, never how a request is judged.)

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace sluice::proxy {

struct Generation;

class PublishedGeneration {
 public:
  // Main thread.
  void publish(std::shared_ptr<const Generation> generation);

  // Any thread: `held` replaced by the generation in force if that is another one. The common
  // case, nothing published since, costs one atomic load and no lock.
  void refresh(std::shared_ptr<const Generation>& held) const;

 private:
  std::atomic<std::uint64_t> number_{0};
  mutable std::mutex mutex_;
  std::shared_ptr<const Generation> current_;  // guarded by mutex_
};

}  // namespace sluice::proxy
