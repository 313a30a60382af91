// The drawings of the session's state machines in ARCHITECTURE.md are the tables the code obeys
// (connection_state.h, exchange_state.h, connector_state.h, http2/http2_state.h,
// upstream/http2_upstream_state.h), drawn again here and compared line by line: a move added to
// a table without its drawing (or drawn and not in the table) fails.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "proxy/session/connection_state.h"
#include "proxy/session/exchange/connector_state.h"
#include "proxy/session/exchange/exchange_state.h"
#include "proxy/session/http2/http2_state.h"
#include "proxy/session/upstream/http2_upstream_state.h"

namespace sluice::proxy::session {
namespace {

// Each state with the moves out of it, in the table's order:
//
//   Sniffing
//     ├─> ReadingClientHello   a TLS handshake record (0x16): H is the SNI
//     └─> Closing              EOF, a read error, handshake_timeout, a connection limit
template <typename State, std::size_t kStates, std::size_t kEdges>
std::string draw(const std::array<std::string_view, kStates>& names,
                 const std::array<Transition<State>, kEdges>& edges) {
  std::size_t width = 0;
  for (std::string_view name : names) {
    width = std::max(width, name.size());
  }
  std::string out;
  for (std::size_t from = 0; from < kStates; ++from) {
    out += names[from];
    out += '\n';
    std::size_t left = 0;
    for (const auto& edge : edges) {
      left += static_cast<std::size_t>(edge.from) == from ? 1 : 0;
    }
    for (const auto& edge : edges) {
      if (static_cast<std::size_t>(edge.from) != from) {
        continue;
      }
      std::string_view to = names[static_cast<std::size_t>(edge.to)];
      out += --left == 0 ? "  └─> " : "  ├─> ";
      out += to;
      out += std::string(width - to.size() + 2, ' ');
      out += edge.why;
      out += '\n';
    }
  }
  return out;
}

template <typename Table>
std::string draw(const Table& table) {
  return draw(table.names(), table.edges());
}

// The block of ARCHITECTURE.md between "<!-- machine: NAME -->" and "<!-- /machine -->", less
// its ```text fence.
std::string drawnIn(std::string_view architecture, std::string_view machine) {
  const std::string open = "<!-- machine: " + std::string(machine) + " -->\n";
  std::size_t begin = architecture.find(open);
  if (begin == std::string_view::npos) {
    return "(no block " + open + ")";
  }
  begin += open.size();
  std::size_t end = architecture.find("<!-- /machine -->", begin);
  if (end == std::string_view::npos) {
    return "(no end to the block of " + std::string(machine) + ")";
  }
  std::string_view block = architecture.substr(begin, end - begin);
  constexpr std::string_view kFence = "```text\n";
  constexpr std::string_view kClose = "```\n";
  if (!block.starts_with(kFence) || !block.ends_with(kClose)) {
    return "(the block of " + std::string(machine) + " is not one ```text fence)";
  }
  block.remove_prefix(kFence.size());
  block.remove_suffix(kClose.size());
  return std::string(block);
}

std::string architecture() {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/ARCHITECTURE.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

template <typename Table>
void expectDrawn(const Table& table) {
  const std::string expected = draw(table);
  EXPECT_EQ(drawnIn(architecture(), table.machine()), expected)
      << "ARCHITECTURE.md must draw the " << table.machine() << " machine as its table is; "
      << "the block between <!-- machine: " << table.machine()
      << " --> and <!-- /machine --> should read:\n```text\n"
      << expected << "```\n";
}

TEST(StateDiagram, ConnectionMachineIsDrawnAsItsTable) { expectDrawn(kConnectionMachine); }

TEST(StateDiagram, ExchangeMachineIsDrawnAsItsTable) { expectDrawn(kExchangeMachine); }

TEST(StateDiagram, ConnectorMachineIsDrawnAsItsTable) { expectDrawn(kConnectorMachine); }

TEST(StateDiagram, Http2MachinesAreDrawnAsTheirTables) {
  expectDrawn(kHttp2ConnectionMachine);
  expectDrawn(kHttp2RequestMachine);
  expectDrawn(kHttp2ResponseMachine);
  expectDrawn(kHttp2StreamMachine);
}

TEST(StateDiagram, OriginMachinesAreDrawnAsTheirTables) {
  expectDrawn(kOriginSessionMachine);
  expectDrawn(kOriginRequestMachine);
  expectDrawn(kOriginResponseMachine);
}

// The comparison can fail: a table with one move more than the drawing (the move Closing ->
// Serving, which no code makes) is not what ARCHITECTURE.md draws.
TEST(StateDiagram, AMoveAddedToATableAloneIsCaught) {
  std::array<Transition<ConnectionState>, kConnectionMachine.edges().size() + 1> more{};
  std::copy(kConnectionMachine.edges().begin(), kConnectionMachine.edges().end(), more.begin());
  more.back() = {ConnectionState::Closing, ConnectionState::Serving, "never"};
  EXPECT_NE(drawnIn(architecture(), "connection"), draw(kConnectionMachine.names(), more));
  EXPECT_EQ(drawnIn(architecture(), "connection"), draw(kConnectionMachine));
}

// Every state but the first ones can be reached, and every state but the last can be left: a
// state nothing leads to (or that nothing leaves) is a table that lost a move.
template <typename Table, typename State>
void expectConnected(const Table& table, std::initializer_list<State> first,
                     std::initializer_list<State> last) {
  const auto& names = table.names();
  for (std::size_t s = 0; s < names.size(); ++s) {
    bool in = false;
    bool out = false;
    for (const auto& edge : table.edges()) {
      in |= static_cast<std::size_t>(edge.to) == s;
      out |= static_cast<std::size_t>(edge.from) == s;
    }
    bool is_first = false;
    bool is_last = false;
    for (State f : first) {
      is_first |= static_cast<std::size_t>(f) == s;
    }
    for (State l : last) {
      is_last |= static_cast<std::size_t>(l) == s;
    }
    EXPECT_TRUE(in || is_first) << table.machine() << ": nothing leads to " << names[s];
    EXPECT_TRUE(out || is_last) << table.machine() << ": nothing leaves " << names[s];
  }
}

TEST(StateDiagram, EveryStateIsReachedAndLeft) {
  expectConnected(kConnectionMachine,
                  {ConnectionState::Sniffing, ConnectionState::ReadingProxyHead},
                  {ConnectionState::Closed});
  expectConnected(kExchangeMachine, {ExchangeState::Idle},
                  {ExchangeState::Denied, ExchangeState::Failed});
  expectConnected(kConnectorMachine, {ConnectorState::Idle},
                  std::initializer_list<ConnectorState>{});
  expectConnected(kHttp2ConnectionMachine, {Http2CodecPhase::Open}, {Http2CodecPhase::Done});
  // (a stream closed before its head was whole never leaves HeadPending)
  expectConnected(kHttp2RequestMachine, {Http2RequestSide::HeadPending},
                  {Http2RequestSide::Delivered, Http2RequestSide::Discarding});
  expectConnected(kHttp2ResponseMachine, {Http2ResponseSide::NotBegun},
                  {Http2ResponseSide::Complete});
  expectConnected(kHttp2StreamMachine, {Http2StreamLife::Open}, {Http2StreamLife::Closed});
  expectConnected(kOriginSessionMachine, {OriginSessionPhase::Open}, {OriginSessionPhase::Ended});
  expectConnected(kOriginRequestMachine, {OriginRequest::Head}, {OriginRequest::Sent});
  expectConnected(kOriginResponseMachine, {OriginResponse::AwaitingHead},
                  {OriginResponse::Complete, OriginResponse::Failed});
}

TEST(StateTable, AllowsExactlyTheListedMoves) {
  EXPECT_TRUE(kConnectionMachine.allows(ConnectionState::Serving, ConnectionState::Lingering));
  EXPECT_FALSE(kConnectionMachine.allows(ConnectionState::Lingering, ConnectionState::Serving));
  EXPECT_FALSE(kConnectionMachine.allows(ConnectionState::Closed, ConnectionState::Closing));
  EXPECT_TRUE(
      kExchangeMachine.allows(ExchangeState::AwaitingResponse, ExchangeState::AwaitingUpstream));
  EXPECT_FALSE(kExchangeMachine.allows(ExchangeState::Responding, ExchangeState::AwaitingUpstream));
  EXPECT_EQ(kExchangeMachine.name(ExchangeState::FinishingRequest), "FinishingRequest");
  std::size_t allowed = 0;
  for (std::size_t from = 0; from < kExchangeMachine.names().size(); ++from) {
    for (std::size_t to = 0; to < kExchangeMachine.names().size(); ++to) {
      allowed +=
          kExchangeMachine.allows(static_cast<ExchangeState>(from), static_cast<ExchangeState>(to))
              ? 1
              : 0;
    }
  }
  EXPECT_EQ(allowed, kExchangeMachine.edges().size());
}

}  // namespace
}  // namespace sluice::proxy::session
