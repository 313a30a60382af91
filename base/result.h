#pragma once
// A small [[nodiscard]] result type. clang 14 (sanitizers, libFuzzer) cannot use libstdc++ 12's
// std::expected, so the project keeps its own. Exceptions stop at the config boundary; the data
// path returns these.

#include <cassert>
#include <utility>
#include <variant>

namespace sluice {

// Wraps an error value so that Result<T, E> stays unambiguous even when T and E are one type.
template <class E>
struct Err {
  E error;
};
template <class E>
Err(E) -> Err<E>;

// The value of a Result that carries nothing but success.
struct Ok {};

template <class T, class E>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  template <class F>
  Result(Err<F> e) : v_(std::in_place_index<1>, std::move(e.error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  const E& error() const& {
    assert(!ok());
    return std::get<1>(v_);
  }
  E&& error() && {
    assert(!ok());
    return std::get<1>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, E> v_;
};

}  // namespace sluice
