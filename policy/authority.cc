#include "policy/authority.h"
#include "base/ascii.h"
#include "policy/host_name.h"

namespace sluice::policy {

std::optional<std::uint16_t> parsePort(std::string_view text) {
  if (text.empty() || text.size() > 5 || text[0] == '0') {
    return std::nullopt;
  }
  std::uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

std::string_view toString(AuthorityError e) {
  switch (e) {
    case AuthorityError::Empty:
      return "empty authority";
    case AuthorityError::MissingPort:
      return "authority needs a port (host:port)";
    case AuthorityError::BadPort:
      return "port must be 1-65535 in plain decimal digits";
    case AuthorityError::UserInfo:
      return "userinfo ('@') is not allowed in an authority";
    case AuthorityError::BadBrackets:
      return "unbalanced or misplaced brackets in authority";
  }
  return "bad authority";
}

Result<Authority, AuthorityError> parseAuthority(std::string_view text, PortRule rule) {
  if (text.empty()) {
    return Err{AuthorityError::Empty};
  }
  if (text.find('@') != std::string_view::npos) {
    return Err{AuthorityError::UserInfo};
  }
  Authority authority;
  std::string_view rest;
  if (text.front() == '[') {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return Err{AuthorityError::BadBrackets};
    }
    authority.host = text.substr(0, close + 1);
    rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      return Err{AuthorityError::BadBrackets};
    }
  } else {
    if (text.find(']') != std::string_view::npos) {
      return Err{AuthorityError::BadBrackets};
    }
    std::size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      return Err{AuthorityError::BadBrackets};  // an IPv6 literal must be bracketed
    }
    authority.host = text.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
  }
  if (authority.host.empty()) {
    return Err{AuthorityError::Empty};
  }
  if (!rest.empty()) {
    // rest is ":port". A second colon (an unbracketed IPv6 address) fails parsePort.
    auto port = parsePort(rest.substr(1));
    if (!port) {
      return Err{AuthorityError::BadPort};
    }
    authority.port = port;
  } else if (rule == PortRule::Required) {
    return Err{AuthorityError::MissingPort};
  }
  return authority;
}

bool sameAuthority(std::string_view a, std::string_view b, std::uint16_t default_port) {
  auto first = parseAuthority(a, PortRule::Optional);
  auto second = parseAuthority(b, PortRule::Optional);
  if (!first || !second ||
      first->port.value_or(default_port) != second->port.value_or(default_port)) {
    return false;
  }
  auto first_host = canonicalizeHost(first->host);
  auto second_host = canonicalizeHost(second->host);
  return first_host && second_host && *first_host == *second_host;
}

std::string_view toString(UrlError e) {
  switch (e) {
    case UrlError::NotAbsolute:
      return "not an absolute URL (scheme://host/path)";
    case UrlError::BadAuthority:
      return "bad authority in URL";
    case UrlError::Fragment:
      return "a URL sent to a server has no fragment ('#')";
  }
  return "bad URL";
}

namespace {

bool isSchemeText(std::string_view s) {
  if (s.empty()) {
    return false;
  }
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha = ascii::isAlpha(c);
    bool other = ascii::isDigit(c) || c == '+' || c == '-' || c == '.';
    if (!(alpha || (i > 0 && other))) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<Url, UrlError> parseAbsoluteUrl(std::string_view text) {
  std::size_t sep = text.find("://");
  if (sep == std::string_view::npos || !isSchemeText(text.substr(0, sep))) {
    return Err{UrlError::NotAbsolute};
  }
  if (text.find('#') != std::string_view::npos) {
    return Err{UrlError::Fragment};
  }
  Url url;
  url.scheme_text = text.substr(0, sep);
  if (ascii::iequals(url.scheme_text, "https")) {
    url.scheme = UrlScheme::Https;
  } else if (ascii::iequals(url.scheme_text, "http")) {
    url.scheme = UrlScheme::Http;
  } else {
    url.scheme = UrlScheme::Other;
  }
  std::string_view rest = text.substr(sep + 3);
  std::size_t end = rest.find_first_of("/?");
  std::string_view authority_text = rest.substr(0, end);
  auto authority = parseAuthority(authority_text, PortRule::Optional);
  if (!authority) {
    return Err{UrlError::BadAuthority};
  }
  url.authority = *authority;
  if (url.authority.port) {
    url.port = *url.authority.port;
  } else if (url.scheme == UrlScheme::Https) {
    url.port = 443;
  } else if (url.scheme == UrlScheme::Http) {
    url.port = 80;
  }
  // "http://h?q" leaves a target that starts with '?': see Url::target.
  url.target = end == std::string_view::npos ? std::string_view("/") : rest.substr(end);
  return url;
}

}  // namespace sluice::policy
