#include "proxy/tls/plaintext_scratch.h"

#include <cassert>

namespace sluice::proxy::tls {

namespace {

thread_local char t_plaintext[PlaintextScratch::kBytes];
thread_local bool t_held = false;

}  // namespace

PlaintextScratch::PlaintextScratch() {
  assert(!t_held && "a TLS read started while another still hands on its plaintext");
  t_held = true;
}

PlaintextScratch::~PlaintextScratch() { t_held = false; }

std::span<char> PlaintextScratch::bytes() const {
  return std::span<char>(t_plaintext, sizeof t_plaintext);
}

}  // namespace sluice::proxy::tls
