#include "policy/host_pattern.h"

#include <algorithm>
#include <iterator>

namespace sluice::policy {

namespace {

// Suffixes under which anyone can register or rent a name. A wildcard over one of them allows
// every tenant's hosts, so the loader refuses it (docs/policy.md#host-patterns). ICANN second-level
// suffixes in common use, then multi-tenant hosting from the Public Suffix List's private section.
// Only consulted while a config loads, so a linear search is fine.
constexpr std::string_view kPublicSuffixes[] = {
    "ac.jp",           "ac.uk",
    "amazonaws.com",   "appspot.com",
    "azure-api.net",   "azurecontainer.io",
    "azureedge.net",   "azurewebsites.net",
    "blob.core.windows.net", "blogspot.com",
    "bitbucket.io",    "cloudapp.net",
    "cloudflareworkers.com", "cloudfront.net",
    "co.in",           "co.jp",
    "co.kr",           "co.nz",
    "co.uk",           "co.za",
    "com.au",          "com.br",
    "com.cn",          "com.mx",
    "com.sg",          "com.tr",
    "com.tw",          "deno.dev",
    "edu.au",          "elasticbeanstalk.com",
    "fastly.net",      "firebaseapp.com",
    "fly.dev",         "gitbook.io",
    "github.io",       "githubusercontent.com",
    "gitlab.io",       "glitch.me",
    "gov.uk",          "herokuapp.com",
    "jfrog.io",        "lambda-url.us-east-1.on.aws",
    "loca.lt",         "localhost.run",
    "ne.jp",           "net.au",
    "netlify.app",     "ngrok-free.app",
    "ngrok.app",       "ngrok.io",
    "nhs.uk",          "on.aws",
    "onrender.com",    "or.jp",
    "org.au",          "org.uk",
    "pages.dev",       "pythonanywhere.com",
    "r2.dev",          "railway.app",
    "readthedocs.io",  "repl.co",
    "replit.app",      "s3.amazonaws.com",
    "sandbox.run",     "serveo.net",
    "storage.googleapis.com", "supabase.co",
    "trafficmanager.net", "trycloudflare.com",
    "vercel.app",      "web.app",
    "windows.net",     "workers.dev",
    "azurestaticapps.net", "ondigitalocean.app",
};

}  // namespace

bool isPublicSuffix(std::string_view name) {
  return std::find(std::begin(kPublicSuffixes), std::end(kPublicSuffixes), name) !=
         std::end(kPublicSuffixes);
}

Result<HostPattern, std::string> HostPattern::parse(std::string_view text) {
  HostPattern pattern;
  if (text.empty()) {
    return Err{std::string("empty host pattern")};
  }

  // IPv6 literals may be written bare in a policy ("2001:db8::1") or bracketed.
  if (text.find(':') != std::string_view::npos && text.front() != '[') {
    auto address = IpAddress::parseV6(text);
    if (!address) {
      return Err{"'" + std::string(text) + "' is not a host name or IP address"};
    }
    pattern.kind_ = Kind::Address;
    pattern.address_ = *address;
    pattern.base_ = address->toString();
    return pattern;
  }

  bool wildcard = false;
  std::string_view name = text;
  if (text.starts_with("*.")) {
    wildcard = true;
    name = text.substr(2);
  }
  if (name.find('*') != std::string_view::npos) {
    return Err{"'" + std::string(text) +
               "': '*' may only be the whole first label, as in '*.example.com'"};
  }
  auto host = canonicalizeHost(name);
  if (!host) {
    return Err{"'" + std::string(text) + "': " + std::string(toString(host.error()))};
  }
  if (host->isIpLiteral()) {
    if (wildcard) {
      return Err{"'" + std::string(text) + "': a wildcard cannot cover an IP address"};
    }
    pattern.kind_ = Kind::Address;
    pattern.address_ = host->address();
    pattern.base_ = std::string(host->text());
    return pattern;
  }
  pattern.base_ = std::string(host->text());
  if (wildcard) {
    if (pattern.base_.find('.') == std::string::npos) {
      return Err{"'" + std::string(text) + "' covers a whole top-level domain: anyone can " +
                 "register a name under it"};
    }
    if (isPublicSuffix(pattern.base_)) {
      return Err{"'" + std::string(text) + "' covers the public suffix '" + pattern.base_ +
                 "', where anyone can register a name; list the hosts you mean"};
    }
    pattern.kind_ = Kind::Wildcard;
  } else {
    pattern.kind_ = Kind::Exact;
  }
  return pattern;
}

std::string HostPattern::text() const {
  return kind_ == Kind::Wildcard ? "*." + base_ : base_;
}

bool HostPattern::matches(const CanonicalHost& host) const {
  switch (kind_) {
    case Kind::Address:
      return host.isIpLiteral() && host.address() == address_;
    case Kind::Exact:
      return !host.isIpLiteral() && host.text() == base_;
    case Kind::Wildcard: {
      if (host.isIpLiteral()) {
        return false;
      }
      std::string_view name = host.text();
      // One or more labels, then ".base": the character before the base must be a dot, and
      // there must be a label before that dot.
      return name.size() > base_.size() + 1 && name.ends_with(base_) &&
             name[name.size() - base_.size() - 1] == '.';
    }
  }
  return false;
}

}  // namespace sluice::policy
