// Reading OSV documents (advisory.h) with simdjson's DOM parser: it validates the whole
// document (an advisory file that is not JSON is an error, not half an advisory) and bounds
// nesting at kMaxOsvDepth without recursion; this reader walks a fixed depth of it.
#include <simdjson.h>

#include <algorithm>
#include <cstring>

#include "base/ascii.h"
#include "proxy/packages/advisory.h"

namespace sluice::proxy::packages {

namespace dom = simdjson::dom;

struct OsvReader::Parser {
  // The bound given at construction: simdjson 3.0.1's set_max_capacity() clamps any bound to
  // 32 bytes.
  dom::parser parser{kMaxOsvDocument};
  // The document copied with SIMDJSON_PADDING bytes after it, which simdjson reads past the
  // end; kept between documents so that a loader of thousands of files allocates once.
  std::unique_ptr<char[]> buffer;
  std::size_t capacity = 0;
};

namespace {

constexpr std::size_t kMaxModifiedLength = 64;  // RFC 3339 times are shorter

struct Failure {
  std::string message;
};

// The document being read: counts against the per-document bounds and the error's text.
class DocumentReader {
 public:
  DocumentReader(std::string_view id, std::vector<AdvisoryEntry>& out) : id_(id), out_(out) {}

  // false: *failure says why.
  bool readAffected(dom::array affected, std::string_view modified, Failure& failure);

 private:
  bool fail(Failure& failure, std::string message) {
    failure.message = std::move(message);
    return false;
  }
  bool readEntry(dom::object affected, std::size_t index, std::string_view modified,
                 Failure& failure);
  bool readVersions(dom::element versions, const std::string& where, AdvisoryEntry& entry,
                    Failure& failure);
  bool readRange(dom::element range, const std::string& where, AdvisoryEntry& entry,
                 Failure& failure);

  std::string_view id_;
  std::vector<AdvisoryEntry>& out_;
  std::size_t entries_ = 0;
  std::size_t versions_ = 0;
  std::size_t events_ = 0;
};

bool isIdChar(char c) { return ascii::isAlnum(c) || c == '-' || c == '_' || c == '.' || c == ':'; }

bool validId(std::string_view id) {
  return !id.empty() && id.size() <= kMaxOsvIdLength && std::all_of(id.begin(), id.end(), isIdChar);
}

// A field that may be absent or null.
bool absent(const simdjson::simdjson_result<dom::element>& field) {
  return field.error() == simdjson::NO_SUCH_FIELD ||
         (!field.error() && field.value_unsafe().is_null());
}

std::optional<OsvEventKind> eventKind(std::string_view key) {
  if (key == "introduced") {
    return OsvEventKind::Introduced;
  }
  if (key == "fixed") {
    return OsvEventKind::Fixed;
  }
  if (key == "last_affected") {
    return OsvEventKind::LastAffected;
  }
  if (key == "limit") {
    return OsvEventKind::Limit;
  }
  return std::nullopt;
}

// The events as advisory.h says they are evaluated: broken bounds resolved toward "affected",
// then sorted (introduced "0" first; at equal versions the ends before the starts).
void settleEvents(VersionScheme scheme, std::vector<OsvEvent>& events) {
  bool unlimited = false;
  for (OsvEvent& event : events) {
    if (event.kind == OsvEventKind::Limit && event.version.find('*') != std::string::npos) {
      unlimited = true;
    }
    if (event.kind == OsvEventKind::Introduced && !isValidVersion(scheme, event.version)) {
      event.version = "0";
    }
  }
  std::erase_if(events, [&](const OsvEvent& event) {
    if (event.kind == OsvEventKind::Introduced) {
      return false;
    }
    return (event.kind == OsvEventKind::Limit && unlimited) ||
           !isValidVersion(scheme, event.version);
  });
  const bool introduced = std::any_of(events.begin(), events.end(), [](const OsvEvent& e) {
    return e.kind == OsvEventKind::Introduced;
  });
  if (!introduced) {
    events.push_back({OsvEventKind::Introduced, "0"});
  }
  std::stable_sort(events.begin(), events.end(), [&](const OsvEvent& a, const OsvEvent& b) {
    const bool a_zero = a.kind == OsvEventKind::Introduced && a.version == "0";
    const bool b_zero = b.kind == OsvEventKind::Introduced && b.version == "0";
    if (a_zero || b_zero) {
      return a_zero && !b_zero;
    }
    const int c = compareVersions(scheme, a.version, b.version);
    if (c != 0) {
      return c < 0;
    }
    return a.kind != OsvEventKind::Introduced && b.kind == OsvEventKind::Introduced;
  });
}

bool DocumentReader::readAffected(dom::array affected, std::string_view modified,
                                  Failure& failure) {
  std::size_t index = 0;
  for (dom::element item : affected) {
    dom::object object;
    if (item.get_object().get(object)) {
      return fail(failure, "affected[" + std::to_string(index) + "] is not an object");
    }
    if (!readEntry(object, index, modified, failure)) {
      return false;
    }
    ++index;
  }
  return true;
}

bool DocumentReader::readEntry(dom::object affected, std::size_t index, std::string_view modified,
                               Failure& failure) {
  const std::string where = "affected[" + std::to_string(index) + "]";
  dom::object package;
  std::string_view ecosystem_text;
  if (affected["package"].get_object().get(package) ||
      package["ecosystem"].get_string().get(ecosystem_text)) {
    return true;  // not an npm or PyPI package, as far as anyone can tell
  }
  policy::Ecosystem ecosystem;
  if (ecosystem_text == policy::osvName(policy::Ecosystem::Npm)) {
    ecosystem = policy::Ecosystem::Npm;
  } else if (ecosystem_text == policy::osvName(policy::Ecosystem::Pypi)) {
    ecosystem = policy::Ecosystem::Pypi;
  } else {
    return true;
  }
  std::string_view name_text;
  if (package["name"].get_string().get(name_text)) {
    return fail(failure, where + ".package.name is not a string");
  }
  std::optional<std::string> name = policy::normalizePackageName(ecosystem, name_text);
  if (!name) {
    return true;  // no request can name it
  }
  if (++entries_ > kMaxOsvAffected) {
    return fail(failure, "more than " + std::to_string(kMaxOsvAffected) +
                             " npm and PyPI entries in affected");
  }
  AdvisoryEntry entry;
  entry.id = id_;
  entry.malicious = id_.starts_with("MAL-");
  entry.modified = modified;
  entry.ecosystem = ecosystem;
  entry.name = std::move(*name);

  const auto versions = affected["versions"];
  if (!absent(versions) && !readVersions(versions.value_unsafe(), where, entry, failure)) {
    return false;
  }
  const auto ranges = affected["ranges"];
  if (!absent(ranges)) {
    dom::array array;
    if (ranges.get_array().get(array)) {
      return fail(failure, where + ".ranges is not an array");
    }
    std::size_t i = 0;
    for (dom::element range : array) {
      if (!readRange(range, where + ".ranges[" + std::to_string(i) + "]", entry, failure)) {
        return false;
      }
      ++i;
    }
  }
  out_.push_back(std::move(entry));
  return true;
}

bool DocumentReader::readVersions(dom::element versions, const std::string& where,
                                  AdvisoryEntry& entry, Failure& failure) {
  dom::array array;
  if (versions.get_array().get(array)) {
    return fail(failure, where + ".versions is not an array");
  }
  for (dom::element item : array) {
    std::string_view version;
    if (item.get_string().get(version)) {
      return fail(failure, where + ".versions holds a value that is not a string");
    }
    if (++versions_ > kMaxOsvVersions) {
      return fail(failure, "more than " + std::to_string(kMaxOsvVersions) + " versions");
    }
    if (version.size() <= kMaxOsvVersionLength) {
      entry.versions.emplace_back(version);
    }
  }
  return true;
}

bool DocumentReader::readRange(dom::element item, const std::string& where, AdvisoryEntry& entry,
                               Failure& failure) {
  dom::object range;
  std::string_view type;
  if (item.get_object().get(range)) {
    return fail(failure, where + " is not an object");
  }
  if (range["type"].get_string().get(type)) {
    return fail(failure, where + ".type is not a string");
  }
  OsvRange kept;
  if (type == "SEMVER") {
    kept.scheme = VersionScheme::SemVer;
  } else if (type == "ECOSYSTEM") {
    kept.scheme = schemeOf(entry.ecosystem);
  } else {
    return true;  // GIT names commits; an unknown type cannot be evaluated
  }
  dom::array events;
  if (range["events"].get_array().get(events)) {
    return fail(failure, where + ".events is not an array");
  }
  for (dom::element event_item : events) {
    dom::object event;
    if (event_item.get_object().get(event)) {
      return fail(failure, where + ".events holds a value that is not an object");
    }
    std::optional<OsvEvent> found;
    for (dom::key_value_pair field : event) {
      const std::optional<OsvEventKind> kind = eventKind(field.key);
      if (!kind) {
        continue;
      }
      std::string_view version;
      if (found || field.value.get_string().get(version)) {
        return fail(failure, where +
                                 ".events holds an event that is not one string of "
                                 "introduced, fixed, last_affected or limit");
      }
      found = OsvEvent{
          *kind,
          std::string(version.size() <= kMaxOsvVersionLength ? version : std::string_view())};
    }
    if (!found) {
      continue;  // an event kind from a later schema
    }
    if (++events_ > kMaxOsvEvents) {
      return fail(failure, "more than " + std::to_string(kMaxOsvEvents) + " events");
    }
    kept.events.push_back(std::move(*found));
  }
  if (kept.events.empty()) {
    return true;
  }
  settleEvents(kept.scheme, kept.events);
  entry.ranges.push_back(std::move(kept));
  return true;
}

}  // namespace

OsvReader::OsvReader() : parser_(std::make_unique<Parser>()) {
  // The depth is set by the first allocation and kept by every later one; read() tries again
  // when this one failed.
  if (parser_->parser.allocate(64 << 10, kMaxOsvDepth) != simdjson::SUCCESS) {
    return;
  }
}

OsvReader::~OsvReader() = default;

bool OsvReader::read(std::string_view json, std::vector<AdvisoryEntry>& out, std::string* error) {
  auto failed = [&](std::string message) {
    if (error != nullptr) {
      *error = std::move(message);
    }
    return false;
  };
  if (json.size() > kMaxOsvDocument) {
    return failed("larger than " + std::to_string(kMaxOsvDocument) + " bytes");
  }
  Parser& p = *parser_;
  if (p.parser.max_depth() != kMaxOsvDepth &&
      p.parser.allocate(std::max<std::size_t>(json.size(), 64 << 10), kMaxOsvDepth)) {
    return failed("out of memory");
  }
  if (p.capacity < json.size() + simdjson::SIMDJSON_PADDING) {
    p.capacity = json.size() + simdjson::SIMDJSON_PADDING;
    p.buffer = std::make_unique<char[]>(p.capacity);
  }
  if (!json.empty()) {
    std::memcpy(p.buffer.get(), json.data(), json.size());
  }
  std::memset(p.buffer.get() + json.size(), 0, simdjson::SIMDJSON_PADDING);

  dom::element root;
  if (const auto code = p.parser.parse(p.buffer.get(), json.size(), false).get(root)) {
    return failed(std::string("not JSON: ") + simdjson::error_message(code));
  }
  dom::object document;
  if (root.get_object().get(document)) {
    return failed("not a JSON object");
  }
  std::string_view id;
  if (document["id"].get_string().get(id)) {
    return failed("no string id");
  }
  if (!validId(id)) {
    return failed("the id is not 1 to " + std::to_string(kMaxOsvIdLength) +
                  " characters of A-Z, a-z, 0-9, '-', '_', '.', ':'");
  }
  const std::string shown_id(id);
  const auto withdrawn = document["withdrawn"];
  if (!absent(withdrawn)) {
    std::string_view when;
    if (withdrawn.get_string().get(when)) {
      return failed(shown_id + ": withdrawn is not a string");
    }
    return true;  // withdrawn: nothing of it applies
  }
  std::string_view modified;
  if (document["modified"].get_string().get(modified) || modified.size() > kMaxModifiedLength) {
    modified = {};
  }
  const auto affected = document["affected"];
  if (absent(affected)) {
    return true;
  }
  dom::array array;
  if (affected.get_array().get(array)) {
    return failed(shown_id + ": affected is not an array");
  }
  const std::size_t before = out.size();
  DocumentReader reader(id, out);
  Failure failure;
  if (!reader.readAffected(array, modified, failure)) {
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
    return failed(shown_id + ": " + failure.message);
  }
  return true;
}

bool parseOsv(std::string_view json, std::vector<AdvisoryEntry>& out, std::string* error) {
  OsvReader reader;
  return reader.read(json, out, error);
}

}  // namespace sluice::proxy::packages
