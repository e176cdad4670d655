// Status and Expected<T>: the one way errors travel inside Tern. The C boundary turns a Status into
// a tern_status plus the thread's last-error message.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tern {

// Values match tern_status in include/c_api.h.
enum class Code : int {
  kOk = 0,
  kInvalidArgument,
  kInvalidModel,
  kUnsupported,
  kBackendUnavailable,
  kOutOfMemory,
  kIO,
  kInternal,
};

const char* code_name(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // Returns the same status with "prefix: " put before the message (for naming the node, file...).
  Status with_prefix(const std::string& prefix) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Concatenates anything streamable: str_cat("node '", name, "' (", op, ")").
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// A caller's text as an error message quotes it: at most 200 bytes, then how long it was (a 1 MB
// value must not come back whole).
inline std::string shorten(std::string_view text) {
  constexpr size_t kMax = 200;
  if (text.size() <= kMax) return std::string(text);
  return str_cat(text.substr(0, kMax), "... (", text.size(), " bytes)");
}

template <class... Args>
Status invalid_argument(const Args&... a) {
  return Status(Code::kInvalidArgument, str_cat(a...));
}
template <class... Args>
Status invalid_model(const Args&... a) {
  return Status(Code::kInvalidModel, str_cat(a...));
}
template <class... Args>
Status unsupported(const Args&... a) {
  return Status(Code::kUnsupported, str_cat(a...));
}
template <class... Args>
Status io_error(const Args&... a) {
  return Status(Code::kIO, str_cat(a...));
}
template <class... Args>
Status internal_error(const Args&... a) {
  return Status(Code::kInternal, str_cat(a...));
}
template <class... Args>
Status out_of_memory(const Args&... a) {
  return Status(Code::kOutOfMemory, str_cat(a...));
}

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {}  // NOLINT: must not be ok

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  Status status() const { return has_value() ? Status::ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tern

#define TERN_CONCAT_INNER(a, b) a##b
#define TERN_CONCAT(a, b) TERN_CONCAT_INNER(a, b)

#define TERN_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::tern::Status tern_status_ = (expr);           \
    if (!tern_status_.is_ok()) return tern_status_; \
  } while (0)

// TERN_ASSIGN_OR_RETURN(auto x, make_x()); returns the error status when make_x() failed.
#define TERN_ASSIGN_OR_RETURN(lhs, expr) \
  TERN_ASSIGN_OR_RETURN_IMPL(TERN_CONCAT(tern_expected_, __LINE__), lhs, expr)
#define TERN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.has_value()) return tmp.status();       \
  lhs = std::move(tmp).value()
