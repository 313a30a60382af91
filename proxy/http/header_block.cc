#include "proxy/http/header_block.h"

namespace sluice::proxy::http {

std::size_t HeaderBlock::count(std::string_view wanted) const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (ascii::iequals(name(i), wanted)) {
      ++n;
    }
  }
  return n;
}

std::optional<std::string_view> HeaderBlock::find(std::string_view wanted) const {
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (ascii::iequals(name(i), wanted)) {
      return value(i);
    }
  }
  return std::nullopt;
}

void HeaderBlock::clear() {
  bytes_.clear();
  fields_.clear();
  name_open_ = false;
}

void HeaderBlock::add(std::string_view field_name, std::string_view field_value) {
  appendNamePiece(field_name);
  endName();
  appendValuePiece(field_value);
  endValue();
}

void HeaderBlock::appendNamePiece(std::string_view piece) {
  if (!name_open_) {
    open_name_offset_ = bytes_.size();
    name_open_ = true;
  }
  bytes_.append(piece);
}

void HeaderBlock::endName() {
  if (!name_open_) {  // an empty name arrives as no piece at all
    open_name_offset_ = bytes_.size();
  }
  name_open_ = false;
  Field f;
  f.name_offset = open_name_offset_;
  f.name_length = bytes_.size() - open_name_offset_;
  f.value_offset = bytes_.size();
  fields_.push_back(f);
}

void HeaderBlock::appendValuePiece(std::string_view piece) { bytes_.append(piece); }

void HeaderBlock::endValue() {
  if (fields_.empty()) {
    return;
  }
  Field& f = fields_.back();
  std::string_view raw = std::string_view(bytes_).substr(f.value_offset);
  std::string_view trimmed = ascii::trimOws(raw);
  f.value_offset += static_cast<std::size_t>(trimmed.data() - raw.data());
  f.value_length = trimmed.size();
}

namespace ascii {

bool isFieldValue(std::string_view s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      return false;
    }
  }
  return true;
}

std::string_view trimOws(std::string_view s) {
  while (!s.empty() && isOws(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && isOws(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

bool listContains(std::string_view list, std::string_view token) {
  while (true) {
    std::size_t comma = list.find(',');
    if (iequals(trimOws(list.substr(0, comma)), token)) {
      return true;
    }
    if (comma == std::string_view::npos) {
      return false;
    }
    list.remove_prefix(comma + 1);
  }
}

}  // namespace ascii

}  // namespace sluice::proxy::http
