// Code that catches what the standard library throws, in builds with and without C++ exceptions.
// Tern throws none of its own (errors are Status values); the catches stop std::bad_alloc (and
// std::system_error from std::thread) from crossing the C boundary or ending a pool thread.
// TERN_MINIMAL builds without exceptions (-fno-exceptions, no unwind tables: ~20% of the
// library's bytes): there the buffers a model sizes (the file, weights, arenas, tensors) come from
// allocations that fail with OUT_OF_MEMORY (core/tensor.h), threads are made through
// pthread_create's status (core/threading.h, start_detached_thread), RegexFullMatch is refused
// (std::regex reports bad patterns by throwing), and a failed small allocation ends the process, as
// in TFLite.
#pragma once

#include <exception>
#include <new>
#include <string_view>

#include "core/status.h"

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define TERN_HAVE_EXCEPTIONS 1
// try { ... } TERN_CATCH_ALL { ... }: the handler is dead code without exceptions.
#define TERN_TRY try
#define TERN_CATCH_ALL catch (...)
#else
#define TERN_HAVE_EXCEPTIONS 0
#define TERN_TRY if (true)
#define TERN_CATCH_ALL else
#endif

namespace tern {

// fn() (a Status), or what it threw as a status: OUT_OF_MEMORY for std::bad_alloc, INTERNAL
// otherwise, prefixed by `where` ("where: out of memory") unless it is empty.
template <class Fn>
Status status_of_call(Fn&& fn, std::string_view where) noexcept {
#if TERN_HAVE_EXCEPTIONS
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return where.empty() ? out_of_memory("out of memory") : out_of_memory(where, ": out of memory");
  } catch (const std::exception& e) {
    return where.empty() ? internal_error("unexpected exception: ", e.what())
                         : internal_error(where, ": ", e.what());
  } catch (...) {
    return where.empty() ? internal_error("unexpected exception")
                         : internal_error(where, ": unexpected exception");
  }
#else
  return fn();
#endif
}

}  // namespace tern
