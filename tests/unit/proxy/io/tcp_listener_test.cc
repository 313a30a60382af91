// The listener when accept() keeps failing: out of descriptors (EMFILE), or a listening socket
// that no longer listens. A pending connection keeps the socket readable, so a listener that
// polled on would run the loop flat out and starve every connection it already has; it must
// pause instead, and take the connection once it can.
#include "proxy/io/tcp_listener.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/loop_driver.h"
#include "tests/support/loopback_tcp_client.h"

namespace sluice::proxy::io {
namespace {

using namespace std::chrono_literals;
using test_support::LoopbackTcpClient;
using test_support::runLoopUntil;

class TcpListenerTest : public ::testing::Test {
 protected:
  TcpListenerTest() {
    uv_loop_init(&loop_);
    // Counts the loop's iterations: a spinning loop makes thousands a second.
    uv_check_init(&loop_, &iterations_);
    iterations_.data = &count_;
    uv_check_start(&iterations_,
                   [](uv_check_t* check) { ++*static_cast<std::uint64_t*>(check->data); });
    uv_unref(reinterpret_cast<uv_handle_t*>(&iterations_));
    auto bound =
        net::BoundSocket::bind(policy::Endpoint{policy::IpAddress::fromV4(0x7f000001), 0}, 64);
    EXPECT_TRUE(bound) << bound.error();
    socket_.emplace(std::move(bound).value());
    listener_ = std::make_unique<TcpListener>(&loop_, [this](int fd) { accepted_.push_back(fd); });
    auto started = listener_->start(*socket_);
    EXPECT_TRUE(started) << started.error();
  }

  ~TcpListenerTest() override {
    bool closed = false;
    listener_->close([&] { closed = true; });
    uv_close(reinterpret_cast<uv_handle_t*>(&iterations_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
    for (int fd : accepted_) {
      ::close(fd);
    }
  }

  std::uint16_t port() const { return socket_->endpoint().port; }

  // Loop iterations while the loop runs for `how_long`.
  std::uint64_t iterationsDuring(std::chrono::milliseconds how_long) {
    std::uint64_t before = count_;
    runLoopUntil(
        &loop_, [] { return false; }, how_long);
    return count_ - before;
  }

  uv_loop_t loop_{};
  uv_check_t iterations_{};
  std::uint64_t count_ = 0;
  std::optional<net::BoundSocket> socket_;
  std::unique_ptr<TcpListener> listener_;
  std::vector<int> accepted_;
};

// Every free descriptor taken (with the limit lowered to a little above what is open, so that
// this takes a few), for as long as the object lives.
class Exhausted {
 public:
  Exhausted() {
    ::getrlimit(RLIMIT_NOFILE, &old_);
    std::size_t open_now = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      ++open_now;
    }
    rlimit low = old_;
    low.rlim_cur = std::min<rlim_t>(old_.rlim_cur, open_now + 16);
    ::setrlimit(RLIMIT_NOFILE, &low);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
      fillers_.push_back(fd);
    }
  }
  ~Exhausted() {
    for (int fd : fillers_) {
      ::close(fd);
    }
    ::setrlimit(RLIMIT_NOFILE, &old_);
  }

 private:
  rlimit old_{};
  std::vector<int> fillers_;
};

TEST_F(TcpListenerTest, OutOfDescriptorsPausesAcceptingThenTakesTheConnection) {
  // A quiet loop for comparison: how many iterations its timers and polls cost.
  std::uint64_t quiet = iterationsDuring(300ms);
  LoopbackTcpClient client(port());
  ASSERT_TRUE(client.connected());  // queued by the kernel, waiting for accept()
  {
    Exhausted exhausted;
    std::uint64_t out_of_descriptors = iterationsDuring(300ms);
    // Paused for 100 ms at a time: a few wake-ups, not a loop spinning on a readable socket.
    EXPECT_LE(out_of_descriptors, quiet + 20)
        << "the loop spun " << out_of_descriptors << " times in 300 ms";
    EXPECT_TRUE(accepted_.empty());
  }
  // Descriptors again: the listener is still there and takes the waiting connection.
  EXPECT_TRUE(runLoopUntil(
      &loop_, [&] { return accepted_.size() == 1; }, 2000ms));
  LoopbackTcpClient another(port());
  ASSERT_TRUE(another.connected());
  EXPECT_TRUE(runLoopUntil(
      &loop_, [&] { return accepted_.size() == 2; }, 2000ms));
}

TEST_F(TcpListenerTest, ASocketThatStoppedListeningDoesNotSpinTheLoop) {
  std::uint64_t quiet = iterationsDuring(300ms);
  // A listening socket shut down (by anyone holding a descriptor of it) is readable for ever,
  // and every accept() on it fails with EINVAL.
  ASSERT_EQ(::shutdown(socket_->fd(), SHUT_RDWR), 0);
  std::uint64_t after = iterationsDuring(300ms);
  EXPECT_LE(after, quiet + 20) << "the loop spun " << after << " times in 300 ms";
  EXPECT_TRUE(accepted_.empty());
}

}  // namespace
}  // namespace sluice::proxy::io
