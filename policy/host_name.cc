#include "policy/host_name.h"
#include "base/ascii.h"

#include <cstring>

namespace sluice::policy {

namespace {

constexpr std::size_t kMaxLabel = 63;

using ascii::isDigit;
using ascii::isHexDigit;

// The WHATWG URL standard's "ends in a number" test: a last label of decimal digits, or 0x
// followed by hex digits, makes a host an IPv4 address to browsers, glibc and friends. Such a
// host is refused unless it is a canonical dotted quad, so no library ever reads it as an
// address sluice did not check.
bool lastLabelLooksNumeric(std::string_view lowered) {
  std::size_t dot = lowered.rfind('.');
  std::string_view last = dot == std::string_view::npos ? lowered : lowered.substr(dot + 1);
  if (last.empty()) {
    return false;
  }
  bool all_digits = true;
  for (char c : last) {
    all_digits = all_digits && isDigit(c);
  }
  if (all_digits) {
    return true;
  }
  if (last.size() >= 2 && last[0] == '0' && last[1] == 'x') {
    for (char c : last.substr(2)) {
      if (!isHexDigit(c)) {
        return false;
      }
    }
    return true;
  }
  return false;
}

}  // namespace

std::string_view toString(HostError e) {
  switch (e) {
    case HostError::Empty:
      return "empty host";
    case HostError::TooLong:
      return "host name longer than 253 characters";
    case HostError::EmptyLabel:
      return "empty label in host name";
    case HostError::LabelTooLong:
      return "label longer than 63 characters";
    case HostError::BadCharacter:
      return "character not allowed in a host name (letters, digits, '-' and '.' only)";
    case HostError::NonAscii:
      return "non-ASCII host name (write internationalised names as A-labels, xn--...)";
    case HostError::HyphenAtEdge:
      return "label starts or ends with '-'";
    case HostError::NumericNotIpv4:
      return "numeric host that is not a canonical dotted-quad IPv4 address";
    case HostError::BadIpv6:
      return "bracketed host is not an IPv6 address";
  }
  return "bad host";
}

std::string CanonicalHost::authorityText() const {
  std::string s;
  appendAuthorityText(s);
  return s;
}

void CanonicalHost::appendAuthorityText(std::string& out) const {
  if (kind_ == HostKind::Ipv6Literal) {
    out.reserve(out.size() + length_ + 2u);
    out += '[';
    out += text();
    out += ']';
  } else {
    out += text();
  }
}

Result<CanonicalHost, HostError> canonicalizeHost(std::string_view raw) {
  CanonicalHost host;
  if (raw.empty()) {
    return Err{HostError::Empty};
  }

  if (raw.front() == '[') {
    if (raw.size() < 3 || raw.back() != ']') {
      return Err{HostError::BadIpv6};
    }
    auto address = IpAddress::parseV6(raw.substr(1, raw.size() - 2));
    if (!address) {
      return Err{HostError::BadIpv6};
    }
    host.kind_ = HostKind::Ipv6Literal;
    host.address_ = *address;
    char buf[IpAddress::kMaxTextLength + 1];
    std::size_t n = address->format(buf);
    std::memcpy(host.text_, buf, n);
    host.length_ = static_cast<std::uint8_t>(n);
    return host;
  }

  // One trailing dot names the root; "a.b.." is an empty label, refused below.
  if (raw.back() == '.') {
    raw.remove_suffix(1);
    if (raw.empty()) {
      return Err{HostError::EmptyLabel};
    }
  }
  if (raw.size() > CanonicalHost::kMaxLength) {
    // Still say NonAscii/BadCharacter first if the text is not even a name: a more useful
    // message, and no difference to the verdict.
    for (char c : raw) {
      if (static_cast<unsigned char>(c) >= 0x80) {
        return Err{HostError::NonAscii};
      }
    }
    return Err{HostError::TooLong};
  }

  std::size_t label_length = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c >= 0x80) {
      return Err{HostError::NonAscii};
    }
    const char lower = ascii::toLower(static_cast<char>(c));
    if (lower == '.') {
      if (label_length == 0) {
        return Err{HostError::EmptyLabel};
      }
      if (host.text_[i - 1] == '-') {
        return Err{HostError::HyphenAtEdge};
      }
      label_length = 0;
    } else if (ascii::isLower(lower) || isDigit(lower) || lower == '-') {
      if (lower == '-' && label_length == 0) {
        return Err{HostError::HyphenAtEdge};
      }
      if (++label_length > kMaxLabel) {
        return Err{HostError::LabelTooLong};
      }
    } else {
      return Err{HostError::BadCharacter};
    }
    host.text_[i] = lower;
  }
  if (label_length == 0) {
    return Err{HostError::EmptyLabel};  // "a.b.." arrives here as "a.b."
  }
  if (host.text_[raw.size() - 1] == '-') {
    return Err{HostError::HyphenAtEdge};
  }
  host.length_ = static_cast<std::uint8_t>(raw.size());

  std::string_view lowered = host.text();
  if (lastLabelLooksNumeric(lowered)) {
    auto address = IpAddress::parseV4(lowered);
    if (!address) {
      return Err{HostError::NumericNotIpv4};
    }
    host.kind_ = HostKind::Ipv4Literal;
    host.address_ = *address;
  }
  return host;
}

}  // namespace sluice::policy
