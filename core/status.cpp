#include "core/status.h"

#include <charconv>

namespace tern {

namespace detail {

void append_text(std::string& out, std::string_view text) {
  out.append(text.data(), text.size());
}

void append_signed(std::string& out, long long v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

void append_unsigned(std::string& out, unsigned long long v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

std::string cat_pieces(const Piece* pieces, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    const Piece& p = pieces[i];
    if (p.kind == Piece::kText) {
      out.append(p.text, p.value);
    } else if (p.kind == Piece::kSigned) {
      append_signed(out, static_cast<long long>(p.value));
    } else {
      append_unsigned(out, p.value);
    }
  }
  return out;
}

Status status_of(Code code, const Piece* pieces, size_t count) {
  return Status(code, cat_pieces(pieces, count));
}

}  // namespace detail

const char* code_name(Code c) {
  switch (c) {
    case Code::kOk:
      return "TERN_OK";
    case Code::kInvalidArgument:
      return "TERN_ERR_INVALID_ARGUMENT";
    case Code::kInvalidModel:
      return "TERN_ERR_INVALID_MODEL";
    case Code::kUnsupported:
      return "TERN_ERR_UNSUPPORTED";
    case Code::kBackendUnavailable:
      return "TERN_ERR_BACKEND_UNAVAILABLE";
    case Code::kOutOfMemory:
      return "TERN_ERR_OUT_OF_MEMORY";
    case Code::kIO:
      return "TERN_ERR_IO";
    case Code::kInternal:
      return "TERN_ERR_INTERNAL";
    case Code::kCancelled:
      return "TERN_ERR_CANCELLED";
    case Code::kDeadlineExceeded:
      return "TERN_ERR_DEADLINE_EXCEEDED";
  }
  return "TERN_UNKNOWN_STATUS";
}

Status Status::with_prefix(const std::string& prefix) const {
  if (is_ok()) return *this;
  return Status(code_, prefix + ": " + message_);
}

}  // namespace tern
