#pragma once
// The upstream connections a client connection holds outside its exchanges: the one parked
// between its requests, and those being closed, kept until their close callback.
//
// The parked upstream is the last exchange's, kept for a keep-alive client's next request: it
// is nearly always for the same (H, port), and taking it back from here costs no pool lookup
// and no re-arming of its reads. It is still re-checked for every request, like a pooled one,
// and goes to the pool when the client idles, leaves or asks for another key. While parked or
// closing, a connection's stream reports to `handler` (the client connection).

#include <cstddef>
#include <memory>
#include <vector>

#include "proxy/io/tcp_stream.h"
#include "proxy/session/pool/upstream_pool.h"

namespace sluice::proxy::session {

class ClientUpstreams {
 public:
  explicit ClientUpstreams(io::TcpStream::Handler& handler) : handler_(handler) {}
  ClientUpstreams(const ClientUpstreams&) = delete;
  ClientUpstreams& operator=(const ClientUpstreams&) = delete;

  bool hasParked() const { return parked_ != nullptr; }
  bool isParked(const io::TcpStream& stream) const {
    return parked_ && &parked_->stream == &stream;
  }
  // The parked connection if it is for `key`; nullptr otherwise (it stays parked).
  std::unique_ptr<UpstreamConnection> takeParked(const UpstreamKey& key);
  // Parks `connection` (the caller has let the last one go) and reads it: EOF or stray bytes
  // from an idle upstream retire it here instead of failing the next request.
  void park(std::unique_ptr<UpstreamConnection> connection);
  // The parked connection, handed to the caller (for the pool).
  std::unique_ptr<UpstreamConnection> unpark() { return std::move(parked_); }
  // Closes `connection`, kept until its close callback.
  void retire(std::unique_ptr<UpstreamConnection> connection);
  void retireParked();
  // A close callback: frees the connection if it is one of those closing (true).
  bool onClosed(const io::TcpStream& stream);
  std::size_t closing() const { return closing_.size(); }

 private:
  io::TcpStream::Handler& handler_;
  std::unique_ptr<UpstreamConnection> parked_;
  std::vector<std::unique_ptr<UpstreamConnection>> closing_;
};

}  // namespace sluice::proxy::session
