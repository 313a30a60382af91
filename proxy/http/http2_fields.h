#pragma once
// The fields of one HTTP/2 head sluice submits (a response to the sandbox, a request to an
// origin, trailers): names lower-cased as they are added (RFC 9113 §8.2.1), then nghttp2_nv
// views of them made once every byte is in place. The buffers are reused from head to head: a
// stream allocates nothing per head once they have grown.

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/http/header_block.h"
#include "proxy/http/http2_request.h"

namespace sluice::proxy::http {

class Http2Fields {
 public:
  void clear() {
    bytes_.clear();
    offsets_.clear();
  }
  // Gives the memory back (a spare stream).
  void release() {
    std::string().swap(bytes_);
    std::vector<std::size_t>().swap(offsets_);
    std::vector<nghttp2_nv>().swap(nva_);
  }
  void reserve(std::size_t bytes) { bytes_.reserve(bytes); }
  bool empty() const { return offsets_.empty(); }

  void add(std::string_view name, std::string_view value) {
    offsets_.push_back(bytes_.size());
    offsets_.push_back(name.size());
    for (char c : name) {
      bytes_ += ascii::toLower(c);
    }
    offsets_.push_back(bytes_.size());
    offsets_.push_back(value.size());
    bytes_.append(value);
  }
  // Adds a field that came from a peer or from configuration, unless HTTP/2 cannot carry it
  // (http2FieldProblem on its lower-cased name): then it is left out. True if added.
  bool addChecked(std::string_view name, std::string_view value) {
    add(name, value);
    if (http2FieldProblem(lastName(), value) != nullptr) {
      dropLast();
      return false;
    }
    return true;
  }
  std::string_view lastName() const {
    const std::size_t i = offsets_.size() - 4;
    return std::string_view(bytes_).substr(offsets_[i], offsets_[i + 1]);
  }
  void dropLast() {
    bytes_.resize(offsets_[offsets_.size() - 4]);
    offsets_.resize(offsets_.size() - 4);
  }

  // The views nghttp2 takes (it copies the bytes when the head is submitted).
  std::span<const nghttp2_nv> nva() {
    nva_.clear();
    auto* base = reinterpret_cast<std::uint8_t*>(bytes_.data());
    for (std::size_t i = 0; i + 3 < offsets_.size(); i += 4) {
      nva_.push_back(nghttp2_nv{base + offsets_[i], base + offsets_[i + 2], offsets_[i + 1],
                                offsets_[i + 3], NGHTTP2_NV_FLAG_NONE});
    }
    return nva_;
  }
  // The bytes (to wipe a head that carried an injected secret).
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
  std::vector<std::size_t> offsets_;  // name offset, name length, value offset, value length
  std::vector<nghttp2_nv> nva_;
};

}  // namespace sluice::proxy::http
