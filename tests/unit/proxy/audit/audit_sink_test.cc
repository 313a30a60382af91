// The audit sink against a file that does not take its bytes: partial writes, interrupted
// writes, a full disk, a device that takes nothing. No line is lost or reordered, the chain of
// the file as finally written verifies from its first line, the sink says it is unavailable
// while it keeps lines, logs one error when it starts failing and one warning when it recovers,
// and refuses new connections only past its limit. The write(2) under the sink is a stand-in
// here (WriteFunction), except against /dev/full and a real file.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "proxy/audit/audit_log.h"
#include "proxy/audit/chain_verify.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy::audit {
namespace {

// The file behind a stand-in write(2): what it took, and how it behaves on the next calls.
struct FakeFile {
  std::string taken;
  std::size_t max_per_call = SIZE_MAX;  // a partial write takes at most this much
  std::size_t room = SIZE_MAX;          // bytes it takes before it is full
  int fail_with = 0;                    // errno of every call while set
  bool interrupt_every_other = false;
  bool take_nothing = false;  // returns 0
  int calls = 0;

  WriteFunction function() {
    return [this](int, const char* data, std::size_t size) -> ssize_t {
      ++calls;
      if (interrupt_every_other && calls % 2 == 1) {
        errno = EINTR;
        return -1;
      }
      if (fail_with != 0) {
        errno = fail_with;
        return -1;
      }
      if (take_nothing) {
        return 0;
      }
      std::size_t n = std::min({size, max_per_call, room});
      if (n == 0) {
        errno = ENOSPC;
        return -1;
      }
      taken.append(data, n);
      room -= room == SIZE_MAX ? 0 : n;
      return static_cast<ssize_t>(n);
    };
  }
};

std::unique_ptr<AuditSink> sinkOn(FakeFile& file, std::size_t limit = kPendingLimit) {
  AuditSinkOptions options;
  options.pending_limit = limit;
  options.write = file.function();
  return AuditSink::onDescriptor("fake.jsonl", -1, false, std::string(kGenesisChain),
                                 std::move(options));
}

AuditRecord record(int n) {
  AuditRecord r;
  r.ts = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764607425000 + n));
  r.sandbox = "sbx1";
  r.conn = static_cast<std::uint64_t>(n);
  r.client = *policy::Endpoint::parse("127.0.0.1:40000");
  static thread_local std::string url;
  url = "http://allowed.test/record-" + std::to_string(n);
  r.url = url;
  r.method = "GET";
  r.decision = policy::Verdict::Allow;
  r.status = 200;
  return r;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  EXPECT_EQ(start, text.size()) << "a partial last line: " << text.substr(start);
  return lines;
}

// The file holds records 0..n-1, in order, chained from its first line.
void expectWholeChainedLog(const std::string& text, int n) {
  std::vector<std::string> lines = linesOf(text);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(n));
  ChainVerifier verifier;
  for (int i = 0; i < n; ++i) {
    EXPECT_NE(lines[i].find("/record-" + std::to_string(i) + "\""), std::string::npos)
        << "line " << i << ": " << lines[i];
    EXPECT_TRUE(verifier.feed(lines[i])) << verifier.error();
  }
}

TEST(AuditSink, PartialWritesGoOnWhereTheyStopped) {
  FakeFile file;
  file.max_per_call = 7;
  auto sink = sinkOn(file);
  for (int i = 0; i < 5; ++i) {
    sink->write(record(i));
  }
  sink->flush();
  EXPECT_TRUE(sink->available());
  expectWholeChainedLog(file.taken, 5);
  EXPECT_EQ(sink->status().pending_bytes, 0u);
  EXPECT_EQ(sink->status().write_failures, 0u);
}

TEST(AuditSink, InterruptedWritesAreRetriedNotFailures) {
  FakeFile file;
  file.interrupt_every_other = true;
  file.max_per_call = 100;
  auto sink = sinkOn(file);
  for (int i = 0; i < 4; ++i) {
    sink->write(record(i));
    sink->flush();
  }
  EXPECT_TRUE(sink->available());
  EXPECT_EQ(sink->status().write_failures, 0u);
  expectWholeChainedLog(file.taken, 4);
}

TEST(AuditSink, AFailedWriteKeepsTheLinesInOrderAndEveryLaterFlushRetries) {
  FakeFile file;
  auto sink = sinkOn(file);
  sink->write(record(0));
  sink->flush();
  file.fail_with = ENOSPC;
  sink->write(record(1));
  sink->write(record(2));
  sink->flush();
  EXPECT_FALSE(sink->available());
  AuditSink::Status s = sink->status();
  EXPECT_TRUE(s.failing);
  EXPECT_EQ(s.error, ENOSPC);
  EXPECT_EQ(s.pending_records, 2u);
  EXPECT_EQ(s.write_failures, 1u);
  EXPECT_GT(s.failing_since_ms, 0);
  // A record written meanwhile joins the others, after them; each flush tries again.
  sink->write(record(3));
  sink->flush();
  sink->flush();
  s = sink->status();
  EXPECT_EQ(s.pending_records, 3u);
  EXPECT_EQ(s.write_failures, 3u);
  EXPECT_EQ(linesOf(file.taken).size(), 1u);

  file.fail_with = 0;
  sink->flush();
  EXPECT_TRUE(sink->available());
  s = sink->status();
  EXPECT_FALSE(s.failing);
  EXPECT_EQ(s.error, 0);
  EXPECT_EQ(s.pending_records, 0u);
  EXPECT_EQ(s.pending_bytes, 0u);
  EXPECT_EQ(s.failing_since_ms, 0);
  sink->write(record(4));
  sink->flush();
  expectWholeChainedLog(file.taken, 5);
}

// A disk that fills in the middle of a line: the line's start is in the file, its end waits;
// once there is room the rest follows byte for byte, and the file verifies as one chain.
TEST(AuditSink, ALineCutByAFullDiskIsFinishedLater) {
  FakeFile file;
  file.room = 150;
  auto sink = sinkOn(file);
  for (int i = 0; i < 3; ++i) {
    sink->write(record(i));
  }
  sink->flush();
  EXPECT_FALSE(sink->available());
  EXPECT_EQ(file.taken.size(), 150u);
  EXPECT_EQ(file.taken.find('\n'), std::string::npos);  // inside the first line
  EXPECT_EQ(sink->status().pending_records, 3u);        // the cut line still counts
  file.room = 10;
  sink->flush();  // a little room: a little progress, still failing
  EXPECT_EQ(file.taken.size(), 160u);
  EXPECT_FALSE(sink->available());
  file.room = SIZE_MAX;
  sink->flush();
  EXPECT_TRUE(sink->available());
  expectWholeChainedLog(file.taken, 3);
}

TEST(AuditSink, ADeviceThatTakesNothingIsAFailure) {
  FakeFile file;
  file.take_nothing = true;
  auto sink = sinkOn(file);
  sink->write(record(0));
  sink->flush();
  EXPECT_FALSE(sink->available());
  EXPECT_EQ(sink->status().error, EIO);
}

TEST(AuditSink, PastItsLimitAnUnavailableSinkTakesNoNewConnection) {
  FakeFile file;
  auto sink = sinkOn(file, 1000);
  sink->write(record(0));
  sink->flush();
  EXPECT_FALSE(sink->overPendingLimit());  // healthy: nothing kept
  file.fail_with = EIO;
  int n = 1;
  while (sink->status().pending_bytes <= 1000) {
    EXPECT_FALSE(sink->overPendingLimit());
    sink->write(record(n++));
    sink->flush();
  }
  EXPECT_TRUE(sink->overPendingLimit());
  sink->countRefusedConnection();
  EXPECT_EQ(sink->status().refused_connections, 1u);
  file.fail_with = 0;
  sink->flush();
  EXPECT_FALSE(sink->overPendingLimit());
  expectWholeChainedLog(file.taken, n);
}

// One error line when the file starts failing, one warning when it recovers: never one per
// record or per retry, which a sandbox could otherwise turn into a flood of its own.
TEST(AuditSink, LogsOnceWhenItFailsAndOnceWhenItRecovers) {
  auto ring = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", ring));
  {
    FakeFile file;
    auto sink = sinkOn(file);
    file.fail_with = EDQUOT;
    for (int i = 0; i < 20; ++i) {
      sink->write(record(i));
      sink->flush();
    }
    file.fail_with = 0;
    sink->flush();
    sink->flush();
  }
  spdlog::set_default_logger(previous);
  std::vector<std::string> logged = ring->last_formatted();
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_NE(logged[0].find("[error]"), std::string::npos) << logged[0];
  EXPECT_NE(logged[0].find("fake.jsonl: cannot write: " + std::string(std::strerror(EDQUOT))),
            std::string::npos)
      << logged[0];
  EXPECT_NE(logged[1].find("[warning]"), std::string::npos) << logged[1];
  EXPECT_NE(logged[1].find("fake.jsonl: written again"), std::string::npos) << logged[1];
}

TEST(AuditSink, LinesStillKeptAtTheEndAreReportedLost) {
  auto ring = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", ring));
  {
    FakeFile file;
    file.fail_with = EIO;
    auto sink = sinkOn(file);
    sink->write(record(0));
    sink->write(record(1));
    sink->flush();
  }
  spdlog::set_default_logger(previous);
  std::vector<std::string> logged = ring->last_formatted();
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_NE(logged[1].find("fake.jsonl: 2 records"), std::string::npos) << logged[1];
  EXPECT_NE(logged[1].find("lost"), std::string::npos) << logged[1];
}

TEST(AuditSink, DevFullIsUnavailableAndSaysWhy) {
  auto opened = AuditSink::open("/dev/full");
  ASSERT_TRUE(opened.ok()) << opened.error();
  auto sink = std::move(opened).value();
  EXPECT_TRUE(sink->available());  // nothing tried yet
  EXPECT_EQ(sink->describeFailure(), "");
  sink->write(record(0));
  sink->flush();
  EXPECT_FALSE(sink->available());
  EXPECT_EQ(sink->status().error, ENOSPC);
  std::string why = sink->describeFailure();
  EXPECT_EQ(why.rfind("audit log /dev/full: cannot write: No space left on device since ", 0), 0u)
      << why;
  EXPECT_NE(why.find("; 1 records ("), std::string::npos) << why;
}

// The real write(2) on a real file, and a second sink on it (a restart) continuing the chain.
TEST(AuditSink, ARealFileIsWrittenAndItsChainContinuedAfterAReopen) {
  test_support::TempDir dir;
  std::string path = dir.file("audit.jsonl");
  {
    auto sink = std::move(AuditSink::open(path)).value();
    sink->write(record(0));
    sink->write(record(1));
    sink->flush();
    EXPECT_TRUE(sink->available());
  }
  {
    auto sink = std::move(AuditSink::open(path)).value();
    sink->write(record(2));
    sink->flush();
  }
  expectWholeChainedLog(test_support::readFile(path), 3);
}

// A flush cut by a crash leaves a torn last line; the restarted sink sets it aside in
// PATH.torn and continues the chain from the last complete line, on a line of its own.
TEST(AuditSink, ATornLastLineIsSetAsideAndTheChainContinues) {
  test_support::TempDir dir;
  std::string path = dir.file("audit.jsonl");
  {
    auto sink = std::move(AuditSink::open(path)).value();
    sink->write(record(0));
    sink->write(record(1));
    sink->flush();
  }
  const std::string fragment = R"({"ts":"2026-12-01T16:)";
  test_support::writeFile(path, test_support::readFile(path) + fragment);
  {
    auto sink = std::move(AuditSink::open(path)).value();
    sink->write(record(2));
    sink->flush();
  }
  expectWholeChainedLog(test_support::readFile(path), 3);
  EXPECT_EQ(test_support::readFile(path + ".torn"), fragment + "\n");
}

// A file that is one torn line and nothing else starts over from the genesis value.
TEST(AuditSink, AFileOfOnlyATornLineStartsTheChainAfresh) {
  test_support::TempDir dir;
  std::string path = dir.file("audit.jsonl");
  test_support::writeFile(path, R"({"ts":"2026)");
  {
    auto sink = std::move(AuditSink::open(path)).value();
    sink->write(record(0));
    sink->flush();
  }
  expectWholeChainedLog(test_support::readFile(path), 1);
}

TEST(AuditLog, RetryTriesUnavailableSinksAgain) {
  AuditLog log;
  auto full = std::move(log.sink("/dev/full")).value();
  full->write(record(0));
  full->flush();
  ASSERT_FALSE(full->available());
  EXPECT_EQ(full->status().write_failures, 1u);
  log.retry();
  EXPECT_EQ(full->status().write_failures, 2u);
  EXPECT_EQ(log.sinks().size(), 1u);
}

// A reload that moves every sandbox off a full disk must not drop the records kept for it: the
// sink stays open, and retried, until they are written; a healthy unused one closes.
TEST(AuditLog, AFileThatKeepsRecordsIsNotClosedWhenNoSandboxUsesIt) {
  test_support::TempDir dir;
  AuditLog log;
  {
    auto full = std::move(log.sink("/dev/full")).value();
    full->write(record(0));
    full->flush();
    auto healthy = std::move(log.sink(dir.file("a.jsonl"))).value();
    healthy->write(record(0));
    healthy->flush();
  }
  log.closeUnused();
  std::vector<std::shared_ptr<AuditSink>> open = log.sinks();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0]->path(), "/dev/full");
  EXPECT_EQ(open[0]->status().pending_records, 1u);
}

}  // namespace
}  // namespace sluice::proxy::audit
