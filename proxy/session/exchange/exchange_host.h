#pragma once
// An exchange's host: its client side (client_side.h), and who hears that the exchange is over.
// A codec is the host of its exchanges: the HTTP/1.1 codec of its one exchange, each HTTP/2
// stream of its own. CodecExchangeHost is the base both build on: the connection's client side
// for everything, the codec's own say in what it overrides (the end of an exchange always; an
// HTTP/2 stream also its closing and its upstreams).

#include <memory>
#include <string_view>

#include "proxy/session/context/client_side.h"
#include "proxy/session/exchange/exchange_state.h"

namespace sluice::proxy::session {

class ExchangeHost : public ClientSide {
 public:
  // The exchange is over: its record is written (Complete, Denied or Failed).
  virtual void onExchangeOver(ExchangeState outcome) = 0;

 protected:
  ~ExchangeHost() = default;
};

// The connection's client side, forwarded; a codec overrides what is its own.
class CodecExchangeHost : public ExchangeHost {
 public:
  explicit CodecExchangeHost(ClientSide& connection) : connection_(connection) {}

  WorkerContext& context() override { return connection_.context(); }
  const ConnectionFacts& facts() const override { return connection_.facts(); }
  const Generation& generation() const override { return connection_.generation(); }
  const SandboxView& sandboxView() const override { return connection_.sandboxView(); }
  SandboxRuntime& runtime() const override { return connection_.runtime(); }
  void cork() override { connection_.cork(); }
  void uncork() override { connection_.uncork(); }
  bool corked() const override { return connection_.corked(); }
  void flushCorked() override { connection_.flushCorked(); }
  void noteAudited() override { connection_.noteAudited(); }
  ConnectionBudget& budget() override { return connection_.budget(); }
  void updateReading() override { connection_.updateReading(); }
  void noteProgress() override { connection_.noteProgress(); }
  void armTimer() override { connection_.armTimer(); }
  void onPeerDrained() override { connection_.onPeerDrained(); }
  bool closing() const override { return connection_.closing(); }
  void close(std::string_view why) override { connection_.close(why); }
  std::unique_ptr<UpstreamConnection> takeParked(const UpstreamKey& key) override {
    return connection_.takeParked(key);
  }
  void park(std::unique_ptr<UpstreamConnection> connection) override {
    connection_.park(std::move(connection));
  }
  void unpark() override { connection_.unpark(); }
  void retire(std::unique_ptr<UpstreamConnection> connection) override {
    connection_.retire(std::move(connection));
  }
  bool keepsUpstreams() const override { return connection_.keepsUpstreams(); }

 protected:
  ~CodecExchangeHost() = default;
  ClientSide& connection_;
};

}  // namespace sluice::proxy::session
