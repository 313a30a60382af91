#include "proxy/session/client_transport.h"

namespace sluice::proxy::session {

namespace {

// While corked, pieces that fit together in this many bytes are gathered into one TLS record;
// larger ones are encrypted as they come.
constexpr std::size_t kGatherLimit = 4 * 1024;
// Encrypted records waiting for the end of a corked callback are written once they reach this.
constexpr std::size_t kWriteBatch = 64 * 1024;

}  // namespace

ClientTransport::ClientTransport(uv_loop_t* loop, io::TcpStream::Handler* handler,
                                 TransportOwner& owner)
    : owner_(owner), stream_(loop, handler) {}

void ClientTransport::send(std::string_view bytes) {
  if (cork_depth_ > 0 && !bytes.empty()) {
    if (out_.size() + bytes.size() <= kGatherLimit) {
      out_.append(bytes);
      return;
    }
    if (!out_.empty()) {
      owner_.flushRecords();  // what is gathered may end a response (sendFinal): its record first
      seal(out_);
      out_.clear();
    }
    seal(bytes);
    if (tls_ && tls_->pendingCiphertext() >= kWriteBatch) {
      push();
    }
    return;
  }
  if (!out_.empty()) {
    owner_.flushCorked();
  }
  writeNow(bytes);
}

void ClientTransport::sendFinal(std::string_view bytes) {
  if (cork_depth_ > 0) {
    out_.append(bytes);  // at most one read's worth: the uncork sends it, records first
    return;
  }
  send(bytes);  // (every callback that can end a response is corked)
}

void ClientTransport::flush() {
  if (!out_.empty()) {
    seal(out_);
    out_.clear();
  }
  push();
}

void ClientTransport::writeNow(std::string_view bytes) {
  seal(bytes);
  push();
}

void ClientTransport::seal(std::string_view bytes) {
  if (bytes.empty() || owner_.closing()) {
    return;
  }
  if (!tls_) {
    stream_.write(bytes);
    return;
  }
  if (!tls_->write(std::span<const char>(bytes.data(), bytes.size()))) {
    owner_.onTransportFailed("tls write to client failed");
  }
}

void ClientTransport::push() {
  if (!tls_ || owner_.closing()) {
    return;
  }
  std::span<const char> out = tls_->peekCiphertext();
  if (!out.empty()) {
    stream_.write(out);
    tls_->consumeCiphertext(out.size());
  }
}

void ClientTransport::releaseBuffers() {
  out_ = std::string();
  if (tls_) {
    tls_->releaseBuffers();
  }
  stream_.releaseBuffers();
}

}  // namespace sluice::proxy::session
