// PublishedGeneration: a worker's held generation is replaced by the published one as soon as
// the main thread publishes, whichever worker asks, and is left alone (no lock, same pointer)
// while nothing new was published.
#include "proxy/runtime/published_generation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "proxy/runtime/generation.h"

namespace sluice::proxy {
namespace {

std::shared_ptr<const Generation> generationNumbered(std::uint64_t number) {
  auto generation = std::make_shared<Generation>();
  generation->number = number;
  return generation;
}

TEST(PublishedGeneration, NothingHeldTakesThePublishedOne) {
  PublishedGeneration published;
  auto first = generationNumbered(1);
  published.publish(first);
  std::shared_ptr<const Generation> held;
  published.refresh(held);
  EXPECT_EQ(held, first);
}

TEST(PublishedGeneration, TheHeldOneStaysUntilAnotherIsPublished) {
  PublishedGeneration published;
  auto first = generationNumbered(1);
  auto second = generationNumbered(2);
  published.publish(first);
  std::shared_ptr<const Generation> held = first;
  published.refresh(held);
  EXPECT_EQ(held, first);
  published.publish(second);
  published.refresh(held);
  EXPECT_EQ(held, second);
}

TEST(PublishedGeneration, AWorkerBehindItsOwnHandOverStillMovesForward) {
  // The worker's loop applied generation 2 after the main thread had published 3: the next
  // refresh takes 3, never leaves it at 2.
  PublishedGeneration published;
  published.publish(generationNumbered(2));
  auto third = generationNumbered(3);
  published.publish(third);
  std::shared_ptr<const Generation> held = generationNumbered(2);
  published.refresh(held);
  EXPECT_EQ(held, third);
}

TEST(PublishedGeneration, EveryThreadSeesEachPublicationInOrder) {
  // Readers on other threads (under the sanitizers, a torn pointer or a generation older than
  // one already seen would show): numbers never go back, and the last one is reached.
  PublishedGeneration published;
  published.publish(generationNumbered(1));
  constexpr std::uint64_t kLast = 2000;
  std::atomic<bool> failed{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      std::shared_ptr<const Generation> held;
      std::uint64_t seen = 0;
      while (seen < kLast) {
        published.refresh(held);
        if (held == nullptr || held->number < seen) {
          failed = true;
          return;
        }
        seen = held->number;
      }
    });
  }
  for (std::uint64_t n = 2; n <= kLast; ++n) {
    published.publish(generationNumbered(n));
  }
  for (std::thread& reader : readers) {
    reader.join();
  }
  EXPECT_FALSE(failed.load());
}

}  // namespace
}  // namespace sluice::proxy
