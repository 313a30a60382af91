#include "certs/openssl_error.h"

#include <openssl/err.h>

namespace sluice::certs {

std::string drainOpensslErrors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    if (!text.empty()) {
      text += "; ";
    }
    text += buf;
  }
  return text.empty() ? "no OpenSSL error reported" : text;
}

Err<std::string> opensslFailure(std::string_view what) {
  return Err{std::string(what) + " (OpenSSL: " + drainOpensslErrors() + ")"};
}

void clearOpensslErrors() {
  if (ERR_peek_error() != 0) {
    ERR_clear_error();
  }
}

}  // namespace sluice::certs
