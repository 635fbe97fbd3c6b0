// expected.h — errors as values.
//
// pipetwin passes failures up to the command line as values, which prints them once and picks
// the exit status: 2 for bad input (a job file, a CSV, a flag), 1 for anything else.
//
//   Expected<Action> a = Action::Parse("2F0");
//   if (!a) return a.error();          // propagate
//   Use(*a);
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace pipetwin {

enum class ErrorCode { kBadInput = 2, kFailure = 1 };

struct Error {
  std::string message;
  ErrorCode code = ErrorCode::kBadInput;
  // Already printed, and every process of the run knows it failed (exec::AgreeAcrossWorld):
  // the caller prints nothing more. said_by: the world rank that printed it.
  bool said = false;
  int said_by = -1;

  static Error BadInput(std::string msg) {
    return Error{std::move(msg), ErrorCode::kBadInput, false, -1};
  }
  static Error Failure(std::string msg) {
    return Error{std::move(msg), ErrorCode::kFailure, false, -1};
  }
  int exit_status() const { return static_cast<int>(code); }
};

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

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
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Status is an Expected with no value.
struct Ok {};
using Status = Expected<Ok>;
inline Status OkStatus() { return Ok{}; }

}  // namespace pipetwin
