//===- Status.h - how runtime code reports failure -------------*- C++ -*-===//
//
// Library code of the runtime returns a Status and passes it up; only
// cleave-run's main decides to end the job (STYLE.md, rule 8).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_STATUS_H
#define CLEAVE_RUNTIME_STATUS_H

#include <string>
#include <utility>

namespace cleave::runtime {

class [[nodiscard]] Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool isOk() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string &message() const { return message_; }

private:
  bool failed_ = false;
  std::string message_;
};

} // namespace cleave::runtime

/// Returns the Status of `expr` from the enclosing function if it failed.
#define CLEAVE_CHECK(expr)                                                     \
  do {                                                                         \
    ::cleave::runtime::Status cleave_status_ = (expr);                         \
    if (!cleave_status_.isOk())                                                \
      return cleave_status_;                                                   \
  } while (0)

#endif // CLEAVE_RUNTIME_STATUS_H
