#include "proxy/admin/admin_server.h"

#include <unistd.h>

#include <cassert>
#include <charconv>
#include <span>
#include <string_view>

#include "proxy/admin/metrics.h"
#include "proxy/http/request_parser.h"
#include "proxy/io/tcp_stream.h"
#include "proxy/io/timer.h"

namespace sluice::proxy::admin {

namespace {

// A scraper connects once per interval; more than this queued at once is not a scraper.
constexpr int kBacklog = 64;
// The routes need no header at all; a few dozen leave room for any real client.
constexpr std::size_t kMaxFields = 64;

constexpr std::string_view kTextType = "text/plain; charset=utf-8";

struct Answer {
  int status = 400;
  std::string_view status_text = "Bad Request";
  std::string_view content_type = kTextType;
  std::string body;
  bool allow = false;  // 405: say which methods are
};

Answer plain(int status, std::string_view status_text, std::string_view body) {
  return Answer{status, status_text, kTextType, std::string(body), false};
}

// The answer to a parsed head. Handlers run here, on the loop thread.
Answer route(const http::RequestHead& head, const AdminServer::Handlers& handlers) {
  if (head.method != "GET" && head.method != "HEAD") {
    Answer a = plain(405, "Method Not Allowed", "method not allowed\n");
    a.allow = true;
    return a;
  }
  // origin_target is the path and query of origin- and absolute-form alike; the other forms
  // ("*", which the parser takes only with OPTIONS, and CONNECT's authority) ended above.
  std::string_view path = head.origin_target;
  path = path.substr(0, path.find('?'));
  if (path == "/metrics") {
    return Answer{200, "OK", kPrometheusContentType,
                  handlers.metrics ? handlers.metrics() : std::string(), false};
  }
  if (path == "/healthz") {
    std::string problems = handlers.problems ? handlers.problems() : std::string();
    if (problems.empty()) {
      return plain(200, "OK", "ok\n");
    }
    return plain(503, "Service Unavailable", problems);
  }
  return plain(404, "Not Found", "not found\n");
}

std::string serialize(const Answer& a, bool head_only) {
  std::string out;
  out.reserve(160 + (head_only ? 0 : a.body.size()));
  char number[24];
  out += "HTTP/1.1 ";
  out.append(number, std::to_chars(number, number + sizeof(number), a.status).ptr);
  out += ' ';
  out += a.status_text;
  out += "\r\nContent-Type: ";
  out += a.content_type;
  // HEAD gets the length GET would have (RFC 9110 §8.6), and no body.
  out += "\r\nContent-Length: ";
  out.append(number, std::to_chars(number, number + sizeof(number), a.body.size()).ptr);
  if (a.allow) {
    out += "\r\nAllow: GET, HEAD";
  }
  out += "\r\nConnection: close\r\n\r\n";
  if (!head_only) {
    out += a.body;
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// One admin connection: read one head, answer it, FIN, drain until the client closes or the
// deadline passes. Owned by the server's map; deleted when its last handle has closed.

class AdminServer::Connection final : public io::TcpStream::Handler, http::RequestBodySink {
 public:
  Connection(AdminServer& server, uv_loop_t* loop)
      : server_(server), stream_(loop, this), timer_(loop), parser_(kMaxHeadBytes, kMaxFields) {}

  void start(int fd) {
    if (stream_.adopt(fd) != 0) {
      ::close(fd);  // adopt() leaves the fd to the caller when it fails
      close();
      return;
    }
    timer_.start(kDeadline, [this] { close(); });
    stream_.startReading();
  }

  // Idempotent; the server hears of it from the last close callback.
  void close() {
    if (closing_) {
      return;
    }
    closing_ = true;
    stream_.close();
    timer_.close([this] { handleClosed(); });
  }

 private:
  void onRead(io::TcpStream&, std::span<const char> data) override {
    if (answered_ || closing_) {
      return;  // lingering: input is read only so that closing sends no RST
    }
    const http::ParseEvent event = parser_.feed(data, *this);
    switch (event.kind) {
      case http::EventKind::NeedMore:
        return;
      case http::EventKind::HeadComplete:
      case http::EventKind::ConnectHead:  // 405, by its method
        answer(parser_.head());
        return;
      case http::EventKind::Error:
        if (event.error == http::ParseError::HeaderTooLarge) {
          answerWith(plain(431, "Request Header Fields Too Large", "header too large\n"), false);
        } else {
          answerWith(plain(400, "Bad Request", "bad request\n"), false);
        }
        return;
      case http::EventKind::MessageComplete:
      case http::EventKind::InterimHead:
        break;  // never before HeadComplete, which ends parsing here
    }
    answerWith(plain(400, "Bad Request", "bad request\n"), false);
  }

  void answer(const http::RequestHead& head) {
    Answer a;
    // A handler that throws must not unwind through libuv: no exception crosses a C library.
    try {
      a = route(head, server_.handlers_);
    } catch (...) {
      a = plain(500, "Internal Server Error", "internal error\n");
    }
    answerWith(a, head.method == "HEAD");
  }

  void answerWith(const Answer& a, bool head_only) {
    answered_ = true;
    const std::string bytes = serialize(a, head_only);
    stream_.write(std::string_view(bytes));
    stream_.shutdownWrite();  // FIN once the answer is written
    timer_.start(kDeadline, [this] { close(); });
  }

  void onEof(io::TcpStream&) override {
    // Before an answer: the client gave up mid-head. After: it has read the answer, unless
    // some is still queued here (a client that half-closed early), which the deadline ends:
    // TcpStream reports no write completion to wait for.
    if (!answered_ || stream_.backlog() == 0) {
      close();
    }
  }
  void onError(io::TcpStream&, int) override { close(); }
  void onDrained(io::TcpStream&) override {}
  void onConnected(io::TcpStream&, int) override {}
  void onClosed(io::TcpStream&) override { handleClosed(); }

  // The parser is never fed past the head, so no body byte arrives.
  void onRequestBody(std::span<const char>) override {}

  void handleClosed() {
    if (--open_handles_ == 0) {
      server_.connectionClosed(this);  // deletes this: nothing may follow
    }
  }

  AdminServer& server_;
  io::TcpStream stream_;
  io::Timer timer_;
  http::RequestParser parser_;
  int open_handles_ = 2;  // stream_ and timer_
  bool answered_ = false;
  bool closing_ = false;
};

// ---------------------------------------------------------------------------------------------
// The server

Result<std::unique_ptr<AdminServer>, std::string> AdminServer::bind(
    const policy::Endpoint& endpoint) {
  auto socket = net::BoundSocket::bind(endpoint, kBacklog);
  if (!socket) {
    return Err{"admin.listen " + socket.error()};
  }
  policy::Endpoint bound = socket->endpoint();  // with port 0, the kernel's choice
  return std::unique_ptr<AdminServer>(new AdminServer(std::move(socket).value(), bound));
}

AdminServer::AdminServer(net::BoundSocket socket, policy::Endpoint endpoint)
    : socket_(std::move(socket)), endpoint_(endpoint) {}

AdminServer::~AdminServer() {
  // Started: every handle must have closed (close()'s callback ran) before the memory goes.
  assert(!listener_ || closed_);
}

Result<Ok, std::string> AdminServer::start(uv_loop_t* loop, Handlers handlers) {
  assert(!listener_ && !closing_ && socket_);
  loop_ = loop;
  handlers_ = std::move(handlers);
  listener_ = std::make_unique<io::TcpListener>(loop, [this](int fd) { onAccepted(fd); });
  auto started = listener_->start(*socket_);
  if (!started) {
    return Err{"admin.listen " + started.error()};
  }
  return Ok{};
}

void AdminServer::onAccepted(int fd) {
  if (closing_ || connections_.size() >= kMaxConnections) {
    ::close(fd);  // at once: a surplus connection gets no timer, buffer or parser
    return;
  }
  auto owned = std::make_unique<Connection>(*this, loop_);
  Connection* connection = owned.get();
  connections_.emplace(connection, std::move(owned));
  connection->start(fd);
}

void AdminServer::close(std::function<void()> on_closed) {
  if (closing_) {
    return;
  }
  closing_ = true;
  on_closed_ = std::move(on_closed);
  socket_.reset();  // the listener's dup() is the last reference to the port
  if (!listener_) {
    closed_ = true;
    if (on_closed_) {
      auto done = std::move(on_closed_);
      done();
    }
    return;
  }
  listener_->close([this] {
    listener_closed_ = true;
    maybeFinishClose();
  });
  for (auto& entry : connections_) {
    entry.first->close();  // callbacks come later, from the loop: the map stays intact here
  }
}

void AdminServer::connectionClosed(Connection* connection) {
  connections_.erase(connection);
  maybeFinishClose();
}

void AdminServer::maybeFinishClose() {
  if (!closing_ || closed_ || !listener_closed_ || !connections_.empty()) {
    return;
  }
  closed_ = true;
  if (on_closed_) {
    // The owner may destroy this server from its callback: touch nothing after it.
    auto done = std::move(on_closed_);
    done();
  }
}

}  // namespace sluice::proxy::admin
