// Status and Expected<T>: the one way errors travel inside Tern. The C boundary turns a Status into
// a tern_status plus the thread's last-error message.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
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
  kCancelled,         // tern_run_options_cancel stopped the run
  kDeadlineExceeded,  // the run passed its tern_run_options_set_deadline_ms
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

namespace detail {
// The pieces of str_cat: text and integers are appended directly (no stream is made for a message
// of names and numbers, which planning builds often); anything else goes through operator<<,
// with the same output as streaming it.
void append_text(std::string& out, std::string_view text);
void append_signed(std::string& out, long long v);
void append_unsigned(std::string& out, unsigned long long v);

template <class T>
void append_piece(std::string& out, const T& v) {
  using U = std::decay_t<T>;
  if constexpr (std::is_array_v<T>) {
    append_text(out, std::string_view(v));  // a string literal
  } else if constexpr (std::is_same_v<U, const char*> || std::is_same_v<U, char*>) {
    if (v) append_text(out, v);  // (a null pointer streams as nothing)
  } else if constexpr (std::is_convertible_v<const U&, std::string_view>) {
    append_text(out, std::string_view(v));
  } else if constexpr (std::is_same_v<U, char> || std::is_same_v<U, signed char> ||
                       std::is_same_v<U, unsigned char>) {
    const char c = static_cast<char>(v);
    append_text(out, std::string_view(&c, 1));
  } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && !std::is_same_v<U, bool>) {
    append_signed(out, v);
  } else if constexpr (std::is_integral_v<U> && !std::is_same_v<U, bool>) {
    append_unsigned(out, v);
  } else {
    std::ostringstream os;
    os << v;
    append_text(out, os.str());
  }
}

// A piece of a message as plain data: text, or an integer (its bits) appended in decimal. A
// message of names and numbers (nearly all) is an array of these handed to one function, rather
// than a string built and appended to by code compiled for each list of argument types (there
// are hundreds); other types (floats, streamable classes) go through append_piece. Inlining
// piece() into the callers made the aarch64 library larger, not smaller.
struct Piece {
  enum Kind : unsigned char { kText, kSigned, kUnsigned };
  const char* text;          // kText
  unsigned long long value;  // kText: the length; otherwise the integer
  Kind kind;
};

template <class T>
constexpr bool is_piece_v = std::is_convertible_v<const T&, std::string_view> ||
                            (std::is_integral_v<T> && !std::is_same_v<T, wchar_t>);

template <class T>
Piece piece(const T& v) {
  if constexpr (std::is_same_v<T, const char*> || std::is_same_v<T, char*>) {
    if (v == nullptr) return {"", 0, Piece::kText};  // (a null pointer streams as nothing)
    const std::string_view t(v);
    return {t.data(), t.size(), Piece::kText};
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    const std::string_view t(v);
    return {t.data(), t.size(), Piece::kText};
  } else if constexpr (std::is_same_v<T, char> || std::is_same_v<T, signed char> ||
                       std::is_same_v<T, unsigned char>) {
    return {reinterpret_cast<const char*>(&v), 1, Piece::kText};
  } else if constexpr (std::is_signed_v<T>) {
    return {nullptr, static_cast<unsigned long long>(static_cast<long long>(v)), Piece::kSigned};
  } else {
    return {nullptr, static_cast<unsigned long long>(v), Piece::kUnsigned};
  }
}

std::string cat_pieces(const Piece* pieces, size_t count);
Status status_of(Code code, const Piece* pieces, size_t count);
}  // namespace detail

// Concatenates anything streamable: str_cat("node '", name, "' (", op, ")").
template <class... Args>
std::string str_cat(const Args&... args) {
  if constexpr (sizeof...(Args) > 0 && (detail::is_piece_v<Args> && ...)) {
    const detail::Piece pieces[] = {detail::piece(args)...};
    return detail::cat_pieces(pieces, sizeof...(Args));
  } else {
    std::string out;
    (detail::append_piece(out, args), ...);
    return out;
  }
}

// A status of `code` whose message is str_cat(a...).
template <class... Args>
Status make_status(Code code, const Args&... a) {
  if constexpr (sizeof...(Args) > 0 && (detail::is_piece_v<Args> && ...)) {
    const detail::Piece pieces[] = {detail::piece(a)...};
    return detail::status_of(code, pieces, sizeof...(Args));
  } else {
    return Status(code, str_cat(a...));
  }
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
  return make_status(Code::kInvalidArgument, a...);
}
template <class... Args>
Status invalid_model(const Args&... a) {
  return make_status(Code::kInvalidModel, a...);
}
template <class... Args>
Status unsupported(const Args&... a) {
  return make_status(Code::kUnsupported, a...);
}
template <class... Args>
Status io_error(const Args&... a) {
  return make_status(Code::kIO, a...);
}
template <class... Args>
Status internal_error(const Args&... a) {
  return make_status(Code::kInternal, a...);
}
template <class... Args>
Status out_of_memory(const Args&... a) {
  return make_status(Code::kOutOfMemory, a...);
}

template <class... Args>
Status cancelled(const Args&... a) {
  return make_status(Code::kCancelled, a...);
}
template <class... Args>
Status deadline_exceeded(const Args&... a) {
  return make_status(Code::kDeadlineExceeded, a...);
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
