#include "proxy/dns/resolver.h"

#include <ares.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "policy/host_name.h"
#include "proxy/dns/answer_reader.h"
#include "proxy/dns/resolv_conf.h"

namespace sluice::proxy::dns {

static_assert(std::is_same_v<ares_socket_t, int>, "onSocketState takes the fd as int");
static_assert(std::is_same_v<ares_channel, ares_channeldata*>);

namespace {

constexpr int kClassIn = 1;
constexpr int kTypeA = 1;
constexpr int kTypeAaaa = 28;

using Clock = std::chrono::steady_clock;

// A name goes to DNS only in the exact canonical form decide() matched, and never an address:
// c-ares 1.18 would send "127.0.0.1" to the servers, and read "0177.0.0.1" its own way.
bool isQueryableName(std::string_view name) {
  if (policy::IpAddress::parse(name)) {
    return false;
  }
  auto host = policy::canonicalizeHost(name);
  return host.ok() && host->kind() == policy::HostKind::Name && host->text() == name;
}

// Worst case per DNS: per_try * servers * (2^tries - 1); see the header.
int perTryTimeoutMs(std::chrono::milliseconds total, std::size_t servers) {
  const long long rounds = (1LL << Resolver::kTries) - 1;
  const long long divisor = rounds * static_cast<long long>(std::max<std::size_t>(servers, 1));
  const long long ms = std::max<long long>(total.count() / divisor, 1);
  return static_cast<int>(std::min<long long>(ms, INT_MAX));
}

template <class Handle>
void deleteHandle(uv_handle_t* handle) {
  delete reinterpret_cast<Handle*>(handle);
}

}  // namespace

// One name in flight: its two c-ares questions, and the callers waiting for the answer. Owned
// by in_flight_ until both questions are answered, then by completed_ until delivered. c-ares
// holds a pointer to it until its callbacks ran, so it lives until then, callers or not.
struct Resolver::Query {
  Query(Resolver& owner, std::string_view query_name) : resolver(owner), name(query_name) {}
  ~Query() { detachAll(); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  void add(Lookup* lookup) {
    lookup->query_ = this;
    lookup->prev_ = tail;
    lookup->next_ = nullptr;
    (tail ? tail->next_ : head) = lookup;
    tail = lookup;
  }
  void remove(Lookup* lookup) {
    (lookup->prev_ ? lookup->prev_->next_ : head) = lookup->next_;
    (lookup->next_ ? lookup->next_->prev_ : tail) = lookup->prev_;
    lookup->query_ = nullptr;
    lookup->prev_ = lookup->next_ = nullptr;
  }
  Lookup* popFront() {
    Lookup* first = head;
    if (first) {
      remove(first);
    }
    return first;
  }
  void detachAll() {
    while (popFront()) {
    }
  }

  Resolver& resolver;
  std::string name;
  int pending = 0;  // c-ares questions not yet called back
  FamilyAnswer a;
  FamilyAnswer aaaa;
  std::optional<LookupResult> result;  // set when pending reaches 0
  Lookup* head = nullptr;
  Lookup* tail = nullptr;
};

Resolver::Lookup::~Lookup() {
  if (query_) {
    query_->remove(this);
  }
}

Resolver::Resolver(uv_loop_t* loop, const policy::DnsSettings& settings,
                   std::size_t max_cached_names)
    : loop_(loop),
      servers_(settings.servers.empty() ? readResolvConf() : settings.servers),
      max_ttl_(std::max(settings.max_ttl, std::chrono::milliseconds(0))),
      cache_(max_cached_names) {
  timer_ = new uv_timer_t;
  uv_timer_init(loop_, timer_);
  timer_->data = this;
  handles_.insert(reinterpret_cast<uv_handle_t*>(timer_));
  delivery_timer_ = new uv_timer_t;
  uv_timer_init(loop_, delivery_timer_);
  delivery_timer_->data = this;
  handles_.insert(reinterpret_cast<uv_handle_t*>(delivery_timer_));
  if (!servers_.empty()) {
    initChannel(settings);
  }
}

Resolver::~Resolver() {
  // The documented way is close() and then wait for `done`. Destroyed earlier, the remaining
  // handles are left to the loop, pointing nowhere: the loop frees them when it runs again.
  close(nullptr);
  for (uv_handle_t* handle : handles_) {
    handle->data = nullptr;
  }
}

void Resolver::initChannel(const policy::DnsSettings& settings) {
  static std::once_flag library_once;
  static int library_status = ARES_SUCCESS;
  std::call_once(library_once, [] { library_status = ares_library_init(ARES_LIB_INIT_ALL); });
  if (library_status != ARES_SUCCESS) {
    return;
  }

  // Every input of the channel is set here (docs/threat-model.md#what-the-resolver-reads): DNS only
  // ("b": no /etc/hosts), no search list and no HOSTALIASES, no rotation, and a resolv.conf that
  // says nothing (we read the real one ourselves, with the strict parser), so no host file can add
  // to this.
  char lookups[] = "b";
  char resolvconf[] = "/dev/null";
  ares_options options{};
  int mask = 0;
  options.sock_state_cb = &Resolver::onSocketState;
  options.sock_state_cb_data = this;
  mask |= ARES_OPT_SOCK_STATE_CB;
  options.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES | ARES_FLAG_EDNS;
  mask |= ARES_OPT_FLAGS;
  options.timeout = perTryTimeoutMs(settings.timeout, servers_.size());
  mask |= ARES_OPT_TIMEOUTMS;
  options.tries = kTries;
  mask |= ARES_OPT_TRIES;
  options.lookups = lookups;
  mask |= ARES_OPT_LOOKUPS;
  options.domains = nullptr;
  options.ndomains = 0;
  mask |= ARES_OPT_DOMAINS;
  mask |= ARES_OPT_NOROTATE;
  options.resolvconf_path = resolvconf;
  mask |= ARES_OPT_RESOLVCONF;

  ares_channel channel = nullptr;
  if (ares_init_options(&channel, &options, mask) != ARES_SUCCESS) {
    return;
  }
  std::string csv;
  for (const policy::Endpoint& server : servers_) {
    if (!csv.empty()) {
      csv += ',';
    }
    csv += server.toString();  // "1.2.3.4:53", "[::1]:53"
  }
  if (ares_set_servers_ports_csv(channel, csv.c_str()) != ARES_SUCCESS) {
    ares_destroy(channel);
    return;
  }
  channel_ = channel;
}

Resolver::Resolution Resolver::resolve(std::string_view name, Callback cb) {
  if (closing_) {
    return LookupResult(Err{DnsError::Cancelled});
  }
  if (!isQueryableName(name)) {
    ++stats_.failures;
    return LookupResult(Err{DnsError::Failed});
  }
  if (auto hit = cache_.find(name, Clock::now())) {
    ++stats_.cache_hits;
    return std::move(*hit);
  }
  if (!channel_) {
    ++stats_.failures;
    return LookupResult(Err{DnsError::Failed});
  }

  std::unique_ptr<Lookup> lookup(new Lookup());
  lookup->callback_ = std::move(cb);
  if (auto it = in_flight_.find(name); it != in_flight_.end()) {
    ++stats_.joined;
    it->second->add(lookup.get());
    return lookup;
  }

  auto [it, inserted] = in_flight_.emplace(std::string(name), nullptr);
  assert(inserted);
  it->second = std::make_unique<Query>(*this, name);
  Query& query = *it->second;
  ++stats_.queries;
  startQuery(query);
  if (query.pending == 0) {
    // Both questions were answered inside ares_query (no socket could be opened, say): the
    // result is here now, and returning it keeps the callback out of resolve().
    LookupResult result = std::move(*query.result);
    in_flight_.erase(it);
    if (!completed_.empty()) {
      scheduleDelivery();
    }
    return result;
  }
  query.add(lookup.get());
  if (!completed_.empty()) {
    scheduleDelivery();
  }
  return lookup;
}

void Resolver::startQuery(Query& query) {
  query.pending = 2;
  starting_ = &query;
  ares_query(channel_, query.name.c_str(), kClassIn, kTypeA, &Resolver::onAnswerA, &query);
  ares_query(channel_, query.name.c_str(), kClassIn, kTypeAaaa, &Resolver::onAnswerAaaa, &query);
  starting_ = nullptr;
  rearmTimer();
}

void Resolver::onAnswerA(void* arg, int status, int /*timeouts*/, unsigned char* abuf,
                         int alen) noexcept {
  auto& query = *static_cast<Query*>(arg);
  if (status == ARES_SUCCESS) {
    query.a = readAReply(abuf, alen);
  } else {
    query.a.error = dnsErrorFromAresStatus(status);
  }
  if (--query.pending == 0 && !query.resolver.closing_) {
    query.resolver.finishQuery(query);
  }
}

void Resolver::onAnswerAaaa(void* arg, int status, int /*timeouts*/, unsigned char* abuf,
                            int alen) noexcept {
  auto& query = *static_cast<Query*>(arg);
  if (status == ARES_SUCCESS) {
    query.aaaa = readAaaaReply(abuf, alen);
  } else {
    query.aaaa.error = dnsErrorFromAresStatus(status);
  }
  if (--query.pending == 0 && !query.resolver.closing_) {
    query.resolver.finishQuery(query);
  }
}

// Runs inside a c-ares callback: builds and caches the result, and queues the query for
// delivery. No caller code runs here: a callback may close the Resolver, and ares_destroy()
// must not run inside c-ares.
void Resolver::finishQuery(Query& query) {
  const auto now = Clock::now();
  JoinedAnswer joined = joinFamilies(query.a, query.aaaa, now, max_ttl_);
  if (!joined.result.ok()) {
    ++stats_.failures;
  }
  query.result.emplace(std::move(joined.result));
  if (joined.cache_until) {
    cache_.store(query.name, *query.result, *joined.cache_until, now);
  }

  if (&query == starting_) {
    return;  // resolve() takes it from here
  }
  auto it = in_flight_.find(query.name);
  assert(it != in_flight_.end() && it->second.get() == &query);
  completed_.push_back(std::move(it->second));
  in_flight_.erase(it);
}

// Delivers every answered query to its callers. Runs only outside c-ares (after
// ares_process_fd returned, or from the delivery timer), so callbacks may resolve, cancel
// other lookups or close the Resolver.
void Resolver::deliverCompleted() {
  if (completed_.empty()) {
    return;
  }
  std::vector<std::unique_ptr<Query>> batch;
  batch.swap(completed_);
  for (auto& query : batch) {
    while (!closing_) {
      Lookup* lookup = query->popFront();
      if (!lookup) {
        break;
      }
      // Moved out first: the callback may destroy its own Lookup.
      Callback callback = std::move(lookup->callback_);
      callback(*query->result);
    }
  }
  // Queries still holding callers (close() ran in a callback) detach them as they go.
}

void Resolver::scheduleDelivery() {
  if (!closing_) {
    uv_timer_start(delivery_timer_, &Resolver::onDeliveryTimer, 0, 0);
  }
}

void Resolver::onDeliveryTimer(uv_timer_t* timer) noexcept {
  if (auto* self = static_cast<Resolver*>(timer->data)) {
    self->deliverCompleted();
  }
}

// c-ares needs its timeouts and retries processed even when no socket is readable.
void Resolver::rearmTimer() {
  if (!channel_ || closing_) {
    return;
  }
  timeval tv{};
  if (!ares_timeout(channel_, nullptr, &tv)) {
    uv_timer_stop(timer_);
    return;
  }
  // Rounded up: waking a moment early would only spin through ares_process_fd.
  const auto ms = static_cast<std::uint64_t>(tv.tv_sec) * 1000 +
                  (static_cast<std::uint64_t>(tv.tv_usec) + 999) / 1000;
  uv_timer_start(timer_, &Resolver::onTimer, ms, 0);
}

void Resolver::onTimer(uv_timer_t* timer) noexcept {
  auto* self = static_cast<Resolver*>(timer->data);
  if (!self || !self->channel_) {
    return;
  }
  ares_process_fd(self->channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
  self->rearmTimer();
  self->deliverCompleted();  // last: a callback may close the Resolver
}

// c-ares tells which sockets to watch. (0, 0) means it is closing the fd: stop watching now and
// forget the fd at once, because the kernel may hand the same number to the next socket.
void Resolver::onSocketState(void* data, int fd, int readable, int writable) noexcept {
  auto* self = static_cast<Resolver*>(data);
  auto it = self->polls_.find(fd);
  if (!readable && !writable) {
    if (it != self->polls_.end()) {
      uv_poll_stop(it->second);
      self->closeHandle(reinterpret_cast<uv_handle_t*>(it->second));
      self->polls_.erase(it);
    }
    return;
  }
  if (self->closing_) {
    return;
  }
  if (it == self->polls_.end()) {
    auto* poll = new uv_poll_t;
    if (uv_poll_init_socket(self->loop_, poll, fd) != 0) {
      delete poll;  // never registered with the loop; c-ares' timer will time the query out
      return;
    }
    poll->data = self;
    self->handles_.insert(reinterpret_cast<uv_handle_t*>(poll));
    it = self->polls_.emplace(fd, poll).first;
  }
  uv_poll_start(it->second, (readable ? UV_READABLE : 0) | (writable ? UV_WRITABLE : 0),
                &Resolver::onPoll);
}

void Resolver::onPoll(uv_poll_t* poll, int status, int events) noexcept {
  auto* self = static_cast<Resolver*>(poll->data);
  if (!self || !self->channel_) {
    return;
  }
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(poll), &fd) != 0) {
    return;
  }
  if (status < 0) {
    events = UV_READABLE | UV_WRITABLE;  // let c-ares read the socket error itself
  }
  ares_process_fd(self->channel_, (events & UV_READABLE) ? fd : ARES_SOCKET_BAD,
                  (events & UV_WRITABLE) ? fd : ARES_SOCKET_BAD);
  self->rearmTimer();
  self->deliverCompleted();  // last: a callback may close the Resolver
}

void Resolver::close(std::function<void()> done) {
  if (closing_) {
    return;
  }
  closing_ = true;
  done_ = std::move(done);
  // No callback runs from here on: callers are detached before c-ares reports
  // ARES_EDESTRUCTION for what is pending, and the queries live until ares_destroy returned.
  for (auto& [name, query] : in_flight_) {
    query->detachAll();
  }
  for (auto& query : completed_) {
    query->detachAll();
  }
  if (channel_) {
    ares_destroy(channel_);  // closes its sockets through onSocketState
    channel_ = nullptr;
  }
  in_flight_.clear();
  completed_.clear();
  for (auto& [fd, poll] : polls_) {
    uv_poll_stop(poll);
    closeHandle(reinterpret_cast<uv_handle_t*>(poll));
  }
  polls_.clear();
  closeHandle(reinterpret_cast<uv_handle_t*>(timer_));
  closeHandle(reinterpret_cast<uv_handle_t*>(delivery_timer_));
}

void Resolver::closeHandle(uv_handle_t* handle) {
  if (!uv_is_closing(handle)) {
    uv_close(handle, &Resolver::onHandleClosed);
  }
}

void Resolver::onHandleClosed(uv_handle_t* handle) noexcept {
  auto* self = static_cast<Resolver*>(handle->data);
  if (self) {
    self->handles_.erase(handle);
  }
  if (handle->type == UV_POLL) {
    deleteHandle<uv_poll_t>(handle);
  } else {
    deleteHandle<uv_timer_t>(handle);
  }
  if (self && self->closing_ && self->handles_.empty() && self->done_) {
    // Moved out first: `done` may destroy the Resolver.
    auto done = std::move(self->done_);
    self->done_ = nullptr;
    done();
  }
}

}  // namespace sluice::proxy::dns
