#include "proxy/tls/tls_session.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <new>
#include <optional>
#include <utility>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "certs/openssl_error.h"
#include "certs/x509_util.h"

namespace sluice::proxy::tls {

namespace {

using certs::clearOpensslErrors;
using certs::opensslFailure;
using certs::SslPtr;

// A FIFO of bytes in one contiguous vector: appends at the back, consumption advances an
// offset (no memmove per read), and the consumed front is dropped only when the vector would
// otherwise have to grow. This, not BIO_s_mem, backs both BIOs: BIO_s_mem can only be drained
// by copying (BIO_read), memmoves its remainder on every write after a partial read, and
// never gives its memory back, so one large transfer would pin megabytes per idle connection.
class ByteQueue {
 public:
  std::size_t size() const { return data_.size() - head_; }
  std::span<const char> peek() const { return {data_.data() + head_, size()}; }

  void append(const char* bytes, std::size_t n) {
    if (head_ > 0 && (head_ == data_.size() || data_.size() + n > data_.capacity())) {
      compact();
    }
    data_.insert(data_.end(), bytes, bytes + n);
  }

  void consume(std::size_t n) {
    head_ += std::min(n, size());
    if (head_ == data_.size()) {
      data_.clear();  // keeps the capacity for the next burst
      head_ = 0;
    }
  }

  std::size_t read(char* out, std::size_t n) {
    n = std::min(n, size());
    if (n > 0) {
      std::memcpy(out, data_.data() + head_, n);
      consume(n);
    }
    return n;
  }

  std::vector<char> take(std::vector<char> spare) {
    compact();
    spare.clear();
    std::swap(data_, spare);
    return spare;
  }

  void release() {
    if (size() == 0) {
      std::vector<char>().swap(data_);
      head_ = 0;
    }
  }

 private:
  void compact() {
    data_.erase(data_.begin(), data_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }

  std::vector<char> data_;
  std::size_t head_ = 0;
};

// What the verify callback saw first; SSL_get_verify_result() has the code but not the depth.
struct VerifyRecord {
  int error = X509_V_OK;
  int depth = -1;
};

// The BIO callbacks are noexcept trampolines (no exception crosses OpenSSL): the data pointer is
// always a ByteQueue owned by the TlsSession's State, which outlives the SSL (State frees it
// first).
int queueWrite(BIO* bio, const char* data, std::size_t len, std::size_t* written) noexcept {
  BIO_clear_retry_flags(bio);
  auto* queue = static_cast<ByteQueue*>(BIO_get_data(bio));
  if (queue == nullptr) {
    return 0;
  }
  try {
    queue->append(data, len);
  } catch (const std::bad_alloc&) {
    return 0;  // OpenSSL sees a failed write: the connection fails, the process goes on
  }
  *written = len;
  return 1;
}

int queueRead(BIO* bio, char* out, std::size_t len, std::size_t* read) noexcept {
  BIO_clear_retry_flags(bio);
  auto* queue = static_cast<ByteQueue*>(BIO_get_data(bio));
  *read = queue != nullptr ? queue->read(out, len) : 0;
  if (*read == 0) {
    BIO_set_retry_read(bio);  // "no bytes yet", never EOF: socket EOF is the caller's business
    return 0;
  }
  return 1;
}

long queueCtrl(BIO* bio, int cmd, long /*num*/, void* /*ptr*/) noexcept {
  auto* queue = static_cast<ByteQueue*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH:  // the handshake state machine treats a failed flush as WANT_WRITE
      return 1;
    case BIO_CTRL_PENDING:
      return queue != nullptr ? static_cast<long>(queue->size()) : 0;
    default:  // WPENDING, EOF, kTLS queries and the rest: "no" / "nothing"
      return 0;
  }
}

int queueCreate(BIO* bio) noexcept {
  BIO_set_init(bio, 1);
  return 1;
}

int queueDestroy(BIO* bio) noexcept {
  BIO_set_data(bio, nullptr);  // the queue belongs to the State, not to the BIO
  BIO_set_init(bio, 0);
  return 1;
}

// Built once, shared read-only by every BIO of every thread; lives as long as the process.
const BIO_METHOD* queueMethod() {
  static BIO_METHOD* const method = [] {
    int index = BIO_get_new_index();
    BIO_METHOD* m =
        index == -1 ? nullptr : BIO_meth_new(index | BIO_TYPE_SOURCE_SINK, "sluice byte queue");
    if (m == nullptr || BIO_meth_set_write_ex(m, queueWrite) != 1 ||
        BIO_meth_set_read_ex(m, queueRead) != 1 || BIO_meth_set_ctrl(m, queueCtrl) != 1 ||
        BIO_meth_set_create(m, queueCreate) != 1 || BIO_meth_set_destroy(m, queueDestroy) != 1) {
      BIO_meth_free(m);
      return static_cast<BIO_METHOD*>(nullptr);
    }
    return m;
  }();
  return method;
}

// Records the first verification failure with its depth. Never changes the verdict.
int recordVerifyFailure(int preverify_ok, X509_STORE_CTX* store) noexcept {
  if (preverify_ok == 1) {
    return 1;
  }
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* record = ssl != nullptr ? static_cast<VerifyRecord*>(SSL_get_app_data(ssl)) : nullptr;
  if (record != nullptr && record->depth < 0) {
    record->error = X509_STORE_CTX_get_error(store);
    record->depth = X509_STORE_CTX_get_error_depth(store);
  }
  return preverify_ok;
}

bool isReceivedAlert(unsigned long code) {
  int reason = ERR_GET_REASON(code);
  return ERR_GET_LIB(code) == ERR_LIB_SSL && reason >= SSL_AD_REASON_OFFSET &&
         reason < SSL_AD_REASON_OFFSET + 256;
}

}  // namespace

struct TlsSession::State {
  ByteQueue incoming;  // from the peer, not yet read by OpenSSL
  ByteQueue outgoing;  // from OpenSSL, not yet taken by the caller
  VerifyRecord verify;
  Failure failure;
  std::optional<ReadStatus> deferred;  // a Closed/Failed found after returning data
  std::string expected_host;           // client: for failure details
  // The bound on post-handshake messages (read()): what the peer has sent of them, and the
  // application data carried both ways. Counting starts when handshake() is Done.
  bool handshake_done = false;
  bool over_post_handshake_limit = false;
  std::uint64_t post_handshake_messages = 0;
  std::uint64_t data_bytes = 0;
  // Last: destroyed first, while the queues its BIOs point to still exist.
  SslPtr ssl;
};

std::string_view toString(FailureKind kind) {
  switch (kind) {
    case FailureKind::None:
      return "none";
    case FailureKind::Certificate:
      return "certificate";
    case FailureKind::Alert:
      return "alert";
    case FailureKind::Protocol:
      return "protocol";
  }
  return "protocol";
}

// Sees every record and handshake message (SSL_set_msg_callback); counts the handshake messages
// the peer sends after the handshake, but for session tickets (a server may send them when it
// likes; they cost a parse, no answer). One past the allowance drops the rest of what the peer
// sent, so that OpenSSL stops at this message (read() then fails) instead of working through a
// whole socket read of them: a KeyUpdate costs a key derivation, and often an answer.
void TlsSession::onProtocolMessage(int write_p, int /*version*/, int content_type,
                                   const void* buf, std::size_t len, SSL* /*ssl*/,
                                   void* arg) noexcept {
  auto* state = static_cast<State*>(arg);
  if (write_p != 0 || content_type != SSL3_RT_HANDSHAKE || len == 0 || state == nullptr ||
      !state->handshake_done ||
      *static_cast<const unsigned char*>(buf) == SSL3_MT_NEWSESSION_TICKET) {
    return;
  }
  ++state->post_handshake_messages;
  if (state->post_handshake_messages >
      kPostHandshakeAllowance + state->data_bytes / kDataPerPostHandshakeMessage) {
    state->over_post_handshake_limit = true;
    state->incoming.consume(state->incoming.size());
  }
}

void TlsSession::watchPostHandshake(SSL* ssl, State* state) {
  SSL_set_msg_callback(ssl, &TlsSession::onProtocolMessage);
  SSL_set_msg_callback_arg(ssl, state);
}

TlsSession::TlsSession(std::unique_ptr<State> state) : state_(std::move(state)) {}
TlsSession::TlsSession(TlsSession&&) noexcept = default;
TlsSession& TlsSession::operator=(TlsSession&&) noexcept = default;
TlsSession::~TlsSession() = default;

namespace {

// A new SSL whose two BIOs read `incoming` and write `outgoing`.
Result<SslPtr, std::string> newSsl(SSL_CTX* ctx, ByteQueue& incoming, ByteQueue& outgoing) {
  if (ctx == nullptr) {
    return Err{std::string("TLS: no context")};
  }
  const BIO_METHOD* method = queueMethod();
  if (method == nullptr) {
    return opensslFailure("TLS: cannot create the BIO method");
  }
  SslPtr ssl(SSL_new(ctx));
  BIO* rbio = BIO_new(method);
  BIO* wbio = BIO_new(method);
  if (!ssl || rbio == nullptr || wbio == nullptr) {
    BIO_free(rbio);
    BIO_free(wbio);
    return opensslFailure("TLS: cannot allocate a connection");
  }
  BIO_set_data(rbio, &incoming);
  BIO_set_data(wbio, &outgoing);
  SSL_set_bio(ssl.get(), rbio, wbio);  // the SSL owns both BIOs now
  return ssl;
}

}  // namespace

Result<TlsSession, std::string> TlsSession::server(SSL_CTX* ctx, X509* leaf, EVP_PKEY* key) {
  ERR_clear_error();
  auto state = std::make_unique<State>();
  auto ssl = newSsl(ctx, state->incoming, state->outgoing);
  if (!ssl) {
    return Err{std::move(ssl).error()};
  }
  state->ssl = std::move(ssl).value();
  SSL_set_app_data(state->ssl.get(), &state->verify);
  watchPostHandshake(state->ssl.get(), state.get());
  SSL_set_accept_state(state->ssl.get());
  // One call that also checks the key belongs to the certificate (a mismatch fails here,
  // not later as a confusing handshake failure). Both get a reference, not a copy.
  if (leaf == nullptr || key == nullptr ||
      SSL_use_cert_and_key(state->ssl.get(), leaf, key, nullptr, 1) != 1) {
    return opensslFailure("TLS: cannot use the leaf certificate and key");
  }
  return TlsSession(std::move(state));
}

Result<TlsSession, std::string> TlsSession::client(SSL_CTX* ctx, std::string_view host,
                                                   SSL_SESSION* resume, OfferAlpn alpn) {
  ERR_clear_error();
  std::optional<certs::HostKind> kind = certs::certificateHostKind(host);
  if (!kind) {
    // Never reaches SSL_set1_host: a C string would silently cut a name at an embedded NUL.
    return Err{std::string("TLS: not a canonical upstream host name")};
  }
  auto state = std::make_unique<State>();
  state->expected_host = std::string(host);
  auto ssl = newSsl(ctx, state->incoming, state->outgoing);
  if (!ssl) {
    return Err{std::move(ssl).error()};
  }
  state->ssl = std::move(ssl).value();
  SSL* s = state->ssl.get();
  SSL_set_app_data(s, &state->verify);
  watchPostHandshake(s, state.get());
  SSL_set_connect_state(s);
  SSL_set_verify(s, SSL_VERIFY_PEER, recordVerifyFailure);

  const char* name = state->expected_host.c_str();
  if (*kind == certs::HostKind::DnsName) {
    // Names only in SANs of type dNSName, a wildcard only as a whole left-most label, never
    // the subject CN (which has no type: a CN could spell anything). OpenSSL's matcher also
    // refuses SAN entries with embedded NULs (docs/threat-model.md#upstream-impersonation).
    SSL_set_hostflags(s,
                      X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    if (SSL_set_tlsext_host_name(s, name) != 1 || SSL_set1_host(s, name) != 1) {
      return opensslFailure("TLS: cannot set the upstream name " + state->expected_host);
    }
  } else if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), name) != 1) {
    return opensslFailure("TLS: cannot set the upstream address " + state->expected_host);
  }

  if (resume != nullptr && SSL_SESSION_is_resumable(resume) == 1) {
    // A session made for another host must not vouch for this one: OpenSSL would offer it,
    // and a server holding that session's keys would skip sending a certificate. session()
    // tags every session it hands out with its host; untagged sessions are not used.
    const char* made_for = SSL_SESSION_get0_hostname(resume);
    if (made_for != nullptr && state->expected_host == made_for &&
        SSL_set_session(s, resume) != 1) {
      ERR_clear_error();  // not fatal: a full handshake instead
    }
  }
  if (alpn == OfferAlpn::H2AndHttp11) {
    // The context's list is "http/1.1" alone; this connection offers h2 first. (0 is success.)
    static constexpr unsigned char kH2AndHttp11[] = {2,   'h', '2', 8,   'h', 't',
                                                     't', 'p', '/', '1', '.', '1'};
    if (SSL_set_alpn_protos(s, kH2AndHttp11, sizeof kH2AndHttp11) != 0) {
      return opensslFailure("TLS: cannot offer h2 to the upstream");
    }
  }
  return TlsSession(std::move(state));
}

void TlsSession::feed(std::span<const char> ciphertext) {
  assert(state_);
  if (!ciphertext.empty() && !state_->deferred && state_->failure.kind == FailureKind::None) {
    state_->incoming.append(ciphertext.data(), ciphertext.size());
  }
}

std::size_t TlsSession::bufferedCiphertext() const { return state_->incoming.size(); }

void TlsSession::recordFailure(int ssl_error) {
  Failure& failure = state_->failure;
  if (failure.kind != FailureKind::None) {
    ERR_clear_error();
    return;  // the first failure is the cause; what follows is its echo
  }
  SSL* ssl = state_->ssl.get();
  // Certificate: the verify callback saw a failure, or (a failure without a callback call,
  // e.g. a chain too long) OpenSSL's verify result says one.
  int verify_error = state_->verify.depth >= 0 ? state_->verify.error
                                               : static_cast<int>(SSL_get_verify_result(ssl));
  if (!SSL_is_server(ssl) && verify_error != X509_V_OK) {
    failure.kind = FailureKind::Certificate;
    failure.verify_error = verify_error;
    failure.verify_depth = state_->verify.depth >= 0 ? state_->verify.depth : 0;
    failure.detail = "certificate verify failed at depth " + std::to_string(failure.verify_depth) +
                     ": " + X509_verify_cert_error_string(verify_error) + " (X509 error " +
                     std::to_string(verify_error) + "; expected " + state_->expected_host + ")";
    ERR_clear_error();
    return;
  }
  if (ssl_error == SSL_ERROR_ZERO_RETURN) {
    failure.kind = FailureKind::Alert;
    failure.alert = SSL_AD_CLOSE_NOTIFY;
    failure.detail = "peer closed (close_notify) before the handshake completed";
    ERR_clear_error();
    return;
  }
  // Otherwise the error queue says what happened. A fatal alert from the peer is queued with
  // the reason SSL_AD_REASON_OFFSET + its description; alerts we send have other reasons.
  std::string reasons;
  while (unsigned long code = ERR_get_error()) {
    if (isReceivedAlert(code) && failure.alert < 0) {
      failure.alert = ERR_GET_REASON(code) - SSL_AD_REASON_OFFSET;
    }
    const char* reason = ERR_reason_error_string(code);
    if (!reasons.empty()) {
      reasons += "; ";
    }
    reasons += reason != nullptr ? reason : "unknown error " + std::to_string(code);
  }
  if (failure.alert >= 0) {
    failure.kind = FailureKind::Alert;
    failure.detail = std::string("peer sent alert ") + SSL_alert_desc_string_long(failure.alert) +
                     " (" + std::to_string(failure.alert) + ")";
    return;
  }
  failure.kind = FailureKind::Protocol;
  if (!reasons.empty()) {
    failure.detail = "TLS error: " + reasons;
  } else if (ssl_error == SSL_ERROR_SYSCALL) {
    failure.detail = "TLS error: transport failure";
  } else {
    failure.detail = "TLS error: SSL_get_error " + std::to_string(ssl_error);
  }
}

HandshakeStatus TlsSession::handshake() {
  assert(state_);
  if (state_->failure.kind != FailureKind::None) {
    return HandshakeStatus::Failed;
  }
  clearOpensslErrors();  // SSL_get_error() reads the queue: only this call's errors may be on it
  int ret = SSL_do_handshake(state_->ssl.get());
  if (ret == 1) {
    state_->handshake_done = true;
    return HandshakeStatus::Done;
  }
  int error = SSL_get_error(state_->ssl.get(), ret);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
    return HandshakeStatus::WantIo;  // WANT_WRITE cannot happen with a growable queue
  }
  recordFailure(error);
  return HandshakeStatus::Failed;
}

bool TlsSession::handshakeDone() const { return SSL_is_init_finished(state_->ssl.get()) == 1; }

ReadStatus TlsSession::read(std::span<char> out, std::size_t* n) {
  assert(state_ && n != nullptr && !out.empty());
  *n = 0;
  if (state_->deferred) {
    return *state_->deferred;  // Closed and Failed are final
  }
  if (state_->failure.kind != FailureKind::None) {
    return ReadStatus::Failed;
  }
  // SSL_get_error() reads the error queue: only this call's errors may be on it. Once per
  // call, not per record: a successful SSL_read_ex queues nothing.
  clearOpensslErrors();
  std::size_t total = 0;
  while (total < out.size()) {
    std::size_t got = 0;
    int ret = SSL_read_ex(state_->ssl.get(), out.data() + total, out.size() - total, &got);
    if (ret == 1) {
      total += got;
      continue;
    }
    int error = SSL_get_error(state_->ssl.get(), ret);
    ReadStatus status = ReadStatus::Failed;
    if (state_->over_post_handshake_limit) {
      ERR_clear_error();
      state_->failure.kind = FailureKind::Protocol;
      state_->failure.detail = "TLS error: " + std::to_string(state_->post_handshake_messages) +
                               " post-handshake messages (KeyUpdate) for " +
                               std::to_string(state_->data_bytes) + " bytes of data";
    } else if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      status = ReadStatus::WantIo;
    } else if (error == SSL_ERROR_ZERO_RETURN) {
      status = ReadStatus::Closed;
      ERR_clear_error();
    } else {
      recordFailure(error);
    }
    if (status != ReadStatus::WantIo) {
      state_->deferred = status;
    }
    if (total == 0) {
      return status;
    }
    break;  // hand out the data first; a final status comes with the next call
  }
  state_->data_bytes += total;
  *n = total;
  return total > 0 ? ReadStatus::Data : ReadStatus::WantIo;
}

bool TlsSession::write(std::span<const char> plaintext) {
  assert(state_);
  if (state_->failure.kind != FailureKind::None) {
    return false;
  }
  clearOpensslErrors();  // as in read(): once per call
  state_->data_bytes += plaintext.size();
  std::size_t offset = 0;
  while (offset < plaintext.size()) {
    std::size_t written = 0;
    int ret = SSL_write_ex(state_->ssl.get(), plaintext.data() + offset, plaintext.size() - offset,
                           &written);
    if (ret == 1) {
      offset += written;
      continue;
    }
    int error = SSL_get_error(state_->ssl.get(), ret);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      // Only before the handshake completes (renegotiation is off): a caller's mistake, but
      // reported like any failure rather than asserted, since a peer's timing exposes it.
      ERR_clear_error();
      state_->failure.kind = FailureKind::Protocol;
      state_->failure.detail = "TLS error: write before the handshake completed";
      return false;
    }
    recordFailure(error);
    return false;
  }
  return true;
}

void TlsSession::shutdown() {
  assert(state_);
  SSL* ssl = state_->ssl.get();
  if (SSL_is_init_finished(ssl) == 1 && state_->failure.kind == FailureKind::None &&
      (SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN) == 0) {
    // Returns 0 ("sent, the peer's has not arrived"), which is all a proxy needs: it closes
    // the socket next and never waits for the peer's close_notify.
    SSL_shutdown(ssl);
  }
  ERR_clear_error();
}

std::size_t TlsSession::pendingCiphertext() const { return state_->outgoing.size(); }

std::span<const char> TlsSession::peekCiphertext() const { return state_->outgoing.peek(); }

void TlsSession::consumeCiphertext(std::size_t n) { state_->outgoing.consume(n); }

std::size_t TlsSession::takeCiphertext(std::span<char> out) {
  return state_->outgoing.read(out.data(), out.size());
}

std::vector<char> TlsSession::takeCiphertextBuffer(std::vector<char> spare) {
  return state_->outgoing.take(std::move(spare));
}

const Failure& TlsSession::failure() const { return state_->failure; }

std::string_view TlsSession::servername() const {
  const char* name = SSL_get_servername(state_->ssl.get(), TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? std::string_view(name) : std::string_view();
}

std::string_view TlsSession::alpn() const {
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(state_->ssl.get(), &data, &len);
  return data != nullptr ? std::string_view(reinterpret_cast<const char*>(data), len)
                         : std::string_view();
}

std::string_view TlsSession::protocolVersion() const { return SSL_get_version(state_->ssl.get()); }

SslSessionPtr TlsSession::session() const {
  SSL* ssl = state_->ssl.get();
  // Only what a completed, verified connection established may vouch for a later one.
  if (SSL_is_server(ssl) == 1 || SSL_is_init_finished(ssl) != 1 ||
      state_->failure.kind != FailureKind::None || SSL_get_verify_result(ssl) != X509_V_OK) {
    return nullptr;
  }
  const SSL_SESSION* current = SSL_get0_session(ssl);
  if (current == nullptr || SSL_SESSION_is_resumable(current) != 1) {
    return nullptr;  // TLS 1.3 before the server's ticket arrived
  }
  // A copy, tagged with the host it was verified for (client() checks the tag). OpenSSL
  // records the SNI in a client session only when the server acknowledged it, and never the
  // IP literal, so the tag is ours. The copy is the caller's alone: tagging it mutates
  // nothing another connection or thread may be reading.
  SslSessionPtr copy(SSL_SESSION_dup(current));
  if (!copy || SSL_SESSION_set1_hostname(copy.get(), state_->expected_host.c_str()) != 1) {
    ERR_clear_error();
    return nullptr;
  }
  return copy;
}

bool TlsSession::sessionReused() const { return SSL_session_reused(state_->ssl.get()) == 1; }

void TlsSession::releaseBuffers() {
  SSL_free_buffers(state_->ssl.get());  // refuses (returns 0) while a record is half-read
  ERR_clear_error();
  state_->incoming.release();
  state_->outgoing.release();
}

}  // namespace sluice::proxy::tls
