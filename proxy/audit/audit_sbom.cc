#include "proxy/audit/audit_sbom.h"

#include "base/json_writer.h"

namespace sluice::proxy::audit {

namespace {

// Bytes a purl segment keeps as they are (purl-spec: the unreserved characters of RFC 3986);
// every other byte is %XX.
bool purlPlain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_' || c == '~';
}

void appendPercentEncoded(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (purlPlain(u)) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
}

// The record's resp_sha256 in lower case, or "" when it is not 64 hex digits.
std::string digestOf(const JsonObjectLine& record) {
  const std::string_view hex = record.string("resp_sha256").value_or("");
  if (hex.size() != 64) {
    return {};
  }
  std::string out(hex);
  for (char& c : out) {
    if (c >= 'A' && c <= 'F') {
      c = static_cast<char>(c - 'A' + 'a');
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return {};
    }
  }
  return out;
}

}  // namespace

std::string purlOf(policy::Ecosystem ecosystem, std::string_view name, std::string_view version) {
  std::string out = ecosystem == policy::Ecosystem::Npm ? "pkg:npm/" : "pkg:pypi/";
  // npm: the scope is the namespace, its '@' encoded as every other byte of a segment is.
  if (const std::size_t slash = name.find('/'); slash != std::string_view::npos) {
    appendPercentEncoded(out, name.substr(0, slash));
    out += '/';
    name.remove_prefix(slash + 1);
  }
  appendPercentEncoded(out, name);
  out += '@';
  appendPercentEncoded(out, version);
  return out;
}

std::optional<FetchedPackage> fetchedPackage(const JsonObjectLine& record, bool* malformed) {
  *malformed = false;
  const JsonScalar* member = record.find("package");
  if (member == nullptr || member->kind == JsonScalar::Kind::Null) {
    return std::nullopt;
  }
  // A `package` there must be an object of scalars (docs/audit.md#the-fields).
  std::optional<JsonObjectLine> package;
  if (member->kind == JsonScalar::Kind::Nested && member->text.starts_with('{')) {
    package = JsonObjectLine::parse(member->text);
  }
  if (!package) {
    *malformed = true;
    return std::nullopt;
  }
  const std::string_view decision = record.string("decision").value_or("");
  if (package->string("kind") != "file" || (decision != "allow" && decision != "report") ||
      record.count("status") != 200u) {
    return std::nullopt;
  }
  const auto ecosystem = policy::ecosystemFromWord(package->string("ecosystem").value_or(""));
  const std::optional<std::string_view> name = package->string("name");
  const std::optional<std::string_view> version = package->string("version");
  std::optional<std::string> normal;
  if (ecosystem && name) {
    normal = policy::normalizePackageName(*ecosystem, *name);
  }
  if (!normal || !version || version->empty() || version->size() > kMaxVersion) {
    *malformed = true;
    return std::nullopt;
  }
  FetchedPackage fetched;
  fetched.ecosystem = *ecosystem;
  fetched.purl = purlOf(*ecosystem, *normal, *version);
  fetched.name = std::move(*normal);
  fetched.version.assign(*version);
  fetched.sha256 = digestOf(record);
  return fetched;
}

void Sbom::add(std::string_view line) {
  auto record = JsonObjectLine::parse(line);
  const std::optional<std::string_view> sandbox = record ? record->string("sandbox") : std::nullopt;
  const std::optional<std::string_view> kind = record ? record->string("kind") : std::nullopt;
  if (!sandbox || (kind && *kind != "http" && *kind != "dns")) {
    ++skipped_;  // as audit summary counts them (audit_summary.cc)
    return;
  }
  if (!sandbox_.empty() && *sandbox != sandbox_) {
    ++filtered_;
    return;
  }
  bool malformed = false;
  std::optional<FetchedPackage> fetched = fetchedPackage(*record, &malformed);
  if (malformed) {
    ++skipped_;
    return;
  }
  ++records_;
  if (!fetched) {
    return;
  }
  auto [it, inserted] = components_.try_emplace(fetched->purl);
  SbomComponent& component = it->second;
  if (inserted) {
    component.first_url.assign(record->string("url").value_or(""));
    component.package = std::move(*fetched);
    if (!component.package.sha256.empty()) {
      component.sha256s.insert(component.package.sha256);
    }
  } else if (!fetched->sha256.empty()) {
    component.sha256s.insert(std::move(fetched->sha256));
  }
  component.sandboxes.emplace(*sandbox);
}

std::string uuidUrn(const unsigned char (&random)[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "urn:uuid:";
  for (std::size_t i = 0; i < 16; ++i) {
    unsigned char b = random[i];
    if (i == 6) {
      b = static_cast<unsigned char>((b & 0x0f) | 0x40);  // version 4
    } else if (i == 8) {
      b = static_cast<unsigned char>((b & 0x3f) | 0x80);  // the RFC 4122 variant
    }
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      out += '-';
    }
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

namespace {

void property(JsonWriter& json, std::string_view name, std::string_view value) {
  json.beginObject().field("name", name).field("value", value).endObject();
}

void component(JsonWriter& json, const std::string& purl, const SbomComponent& c) {
  const FetchedPackage& p = c.package;
  json.beginObject();
  json.field("type", "library");
  json.field("bom-ref", purl);
  std::string_view name = p.name;
  if (const std::size_t slash = name.find('/'); slash != std::string_view::npos) {
    json.field("group", name.substr(0, slash));  // npm's "@scope"
    name.remove_prefix(slash + 1);
  }
  json.field("name", name);
  json.field("version", p.version);
  json.field("purl", purl);
  if (!c.sha256s.empty()) {
    json.key("hashes").beginArray();
    for (const std::string& hex : c.sha256s) {
      json.beginObject().field("alg", "SHA-256").field("content", hex).endObject();
    }
    json.endArray();
  }
  json.key("properties").beginArray();
  for (const std::string& sandbox : c.sandboxes) {
    property(json, "sluice:sandbox", sandbox);
  }
  if (!c.first_url.empty()) {
    property(json, "sluice:url", c.first_url);
  }
  if (c.sha256s.size() > 1) {
    // The same name and version served with different bytes: a registry or mirror that
    // changed a published file, which is worth a look (docs/packages.md#sbom).
    property(json, "sluice:hashes_differ",
             std::to_string(c.sha256s.size()) + " different SHA-256 digests were served");
  }
  json.endArray();
  json.endObject();
}

}  // namespace

std::string sbomJson(const Sbom& sbom, const SbomMeta& meta) {
  std::string out;
  JsonWriter json(out);
  json.beginObject();
  json.field("bomFormat", "CycloneDX");
  json.field("specVersion", "1.5");
  json.field("serialNumber", meta.serial);
  json.field("version", std::int64_t{1});
  json.key("metadata").beginObject();
  json.field("timestamp", meta.timestamp);
  json.key("tools").beginObject().key("components").beginArray();
  json.beginObject()
      .field("type", "application")
      .field("name", "sluice")
      .field("version", meta.tool_version)
      .endObject();
  json.endArray().endObject();
  json.endObject();
  json.key("components").beginArray();
  for (const auto& [purl, c] : sbom.components()) {
    component(json, purl, c);
  }
  json.endArray();
  json.endObject();
  out += '\n';
  return out;
}

}  // namespace sluice::proxy::audit
