#include "bench/loadgen/target.h"

namespace sluice::loadgen {

Target makeTarget(const Options& options, SSL_CTX* tls_context) {
  Target t;
  t.mode = options.mode;
  t.proto = options.proto;
  t.streams = options.streams;
  t.authority = options.host_field;
  t.path = options.target;
  t.dial = options.dial();
  t.host = options.host;
  t.tls_context = tls_context;
  if (options.proxy) {
    t.connect_request = "CONNECT " + options.authority + " HTTP/1.1\r\nHost: " + options.authority +
                        "\r\nUser-Agent: sluice-loadgen\r\n\r\n";
  }
  // The smallest request a real client sends; one connection option, written by mode.
  t.request = "GET " + options.target + " HTTP/1.1\r\nHost: " + options.host_field +
              "\r\nUser-Agent: sluice-loadgen\r\nAccept: */*\r\n";
  if (options.mode == Mode::NewConn) {
    t.request += "Connection: close\r\n";
  }
  t.request += "\r\n";
  return t;
}

const char* toString(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Connect:
      return "connect";
    case ErrorKind::Proxy:
      return "proxy";
    case ErrorKind::Tls:
      return "tls";
    case ErrorKind::Http:
      return "http";
    case ErrorKind::Status:
      return "status";
    case ErrorKind::Closed:
      return "closed";
    case ErrorKind::Timeout:
      return "timeout";
    case ErrorKind::Dropped:
      return "dropped";
    case ErrorKind::H2:
      return "h2";
  }
  return "error";
}

}  // namespace sluice::loadgen
