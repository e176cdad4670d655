// Tern's C++ API: a header-only C++17 wrapper over the C ABI (c_api.h) and nothing else, so a
// program built with any C++17 compiler and standard library works with any libtern of the same
// ABI version (the library exports C functions only; no C++ type crosses it).
//
//   tern::Model model = tern::Model::load("model.onnx");
//   tern::Session session(model, tern::SessionOptions().threads(2));
//   std::vector<float> pixels(1 * 3 * 48 * 192);
//   tern::Tensor x = tern::Tensor::borrow<float>(pixels, {1, 3, 48, 192});   // zero-copy
//   std::vector<tern::Tensor> out = session.run({"x"}, {&x}, {"softmax"});
//   tern::Span<const float> probs = out[0].data<float>();
//
// Handles (Tensor, Value, Model, SessionOptions, RunOptions, Session) own one C handle each, are
// move-only and destroy it in their destructor. A moved-from handle holds nothing: destroying or
// assigning it is fine, queries answer as the C API does for NULL (0, empty), and calls that need
// the handle throw tern::Error with TERN_ERR_INVALID_ARGUMENT.
//
// Errors are exceptions: a failing C call throws tern::Error carrying its tern_status and Tern's
// message (tern_last_error(), read on the failing thread right after the call). Why exceptions
// rather than an expected<T, Error> result: constructors of RAII types (Model::load, Session)
// cannot return a status, a C++17 header would have to ship its own expected type (std::expected
// is C++23), and Tern's failures are exceptional (a bad file, a wrong input shape) rather than
// results a caller branches on in a hot loop. The exceptions stay on the caller's side of the
// ABI: they are thrown by this header's inline code in the caller's program, never by libtern.
//
// Everything is in namespace tern, inside an inline namespace (tern::abi1) that users never
// name: libtern.a holds Tern's internal C++ code in namespace tern (tern::Tensor, tern::Model...),
// and a program linking it statically must not get two definitions of one mangled name.
//
// Thread safety is the C API's: models are immutable and shareable, Session::run may be called
// from many threads at once, options and tensors are not synchronised.
#ifndef TERN_TERN_HPP
#define TERN_TERN_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "c_api.h"

namespace tern {
inline namespace abi1 {

// ---- Errors
// --------------------------------------------------------------------------------------

// A failed Tern call: status() is the C status, what() "TERN_ERR_...: <Tern's message>" and
// message() Tern's message alone.
class Error : public std::runtime_error {
 public:
  Error(tern_status status, const std::string& message)
      : std::runtime_error(std::string(tern_status_name(status)) + ": " + message),
        status_(status),
        message_(message) {}
  tern_status status() const noexcept { return status_; }
  const std::string& message() const noexcept { return message_; }

 private:
  tern_status status_;
  std::string message_;
};

// Throws tern::Error for a status other than TERN_OK, with this thread's last error message.
inline void check(tern_status status) {
  if (status != TERN_OK) {
    const char* msg = tern_last_error();
    throw Error(status, msg ? msg : "");
  }
}

// ---- Span: a non-owning view of contiguous elements (std::span is C++20) ----------------------

template <class T>
class Span {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  constexpr Span() noexcept = default;
  constexpr Span(T* data, size_t size) noexcept : data_(data), size_(size) {}
  // From a vector or array of T (or of non-const T for a Span<const T>).
  template <class C, class = decltype(std::declval<C&>().data()),
            class = std::enable_if_t<std::is_convertible<
                std::remove_pointer_t<decltype(std::declval<C&>().data())> (*)[], T (*)[]>::value>>
  constexpr Span(C& c) noexcept : data_(c.data()), size_(c.size()) {}  // NOLINT: implicit view
  // Span<T> -> Span<const T>.
  template <class U,
            class = std::enable_if_t<std::is_same<const U, T>::value && !std::is_same<U, T>::value>>
  constexpr Span(const Span<U>& s) noexcept : data_(s.data()), size_(s.size()) {}  // NOLINT
  // From a braced list, for arguments only: {1, 3, 48, 192} lives until the call returns (as
  // C++26's std::span allows; GCC warns about keeping the list's array, which is the point here).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  template <class U = T, class = std::enable_if_t<std::is_const<U>::value>>
  constexpr Span(std::initializer_list<value_type> list) noexcept  // NOLINT: implicit view
      : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  constexpr T* data() const noexcept {
    return data_;
  }
  constexpr size_t size() const noexcept {
    return size_;
  }
  constexpr bool empty() const noexcept {
    return size_ == 0;
  }
  constexpr T* begin() const noexcept {
    return data_;
  }
  constexpr T* end() const noexcept {
    return data_ + size_;
  }
  constexpr T& operator[](size_t i) const noexcept {
    return data_[i];
  }
  std::vector<value_type> to_vector() const {
    return std::vector<value_type>(begin(), end());
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

using Shape = Span<const int64_t>;

// ---- Element types
// ---------------------------------------------------------------------------------

// The tern_dtype of a C++ element type (float, double, the fixed-width integers, bool).
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> : std::integral_constant<tern_dtype, TERN_FLOAT32> {};
template <>
struct DTypeOf<double> : std::integral_constant<tern_dtype, TERN_FLOAT64> {};
template <>
struct DTypeOf<int8_t> : std::integral_constant<tern_dtype, TERN_INT8> {};
template <>
struct DTypeOf<uint8_t> : std::integral_constant<tern_dtype, TERN_UINT8> {};
template <>
struct DTypeOf<int16_t> : std::integral_constant<tern_dtype, TERN_INT16> {};
template <>
struct DTypeOf<uint16_t> : std::integral_constant<tern_dtype, TERN_UINT16> {};
template <>
struct DTypeOf<int32_t> : std::integral_constant<tern_dtype, TERN_INT32> {};
template <>
struct DTypeOf<uint32_t> : std::integral_constant<tern_dtype, TERN_UINT32> {};
template <>
struct DTypeOf<int64_t> : std::integral_constant<tern_dtype, TERN_INT64> {};
template <>
struct DTypeOf<uint64_t> : std::integral_constant<tern_dtype, TERN_UINT64> {};
template <>
struct DTypeOf<bool> : std::integral_constant<tern_dtype, TERN_BOOL> {};
template <class T>
constexpr tern_dtype dtype_of = DTypeOf<std::remove_cv_t<T>>::value;

inline const char* version() {
  return tern_version();
}
inline uint32_t abi_version() {
  return tern_abi_version();
}
// Throws when the loaded libtern has another ABI version than this header was written for.
inline void check_abi() {
  if (tern_abi_version() != TERN_ABI_VERSION) {
    throw Error(TERN_ERR_UNSUPPORTED, "libtern has ABI " + std::to_string(tern_abi_version()) +
                                          ", this program was built for " +
                                          std::to_string(TERN_ABI_VERSION));
  }
}
inline void set_flag(const char* name, const char* value) {
  check(tern_flag_set(name, value));
}
inline std::string get_flag(const char* name) {
  char buf[256];
  check(tern_flag_get(name, buf, sizeof buf));
  return buf;
}
inline void set_num_threads(int n) {
  check(tern_set_num_threads(n));
}
inline int get_num_threads() {
  return tern_get_num_threads();
}
inline const char* cpu_capability() {
  return tern_cpu_get_capability();
}

namespace detail {
// Owns one C handle; the destroy function accepts NULL, as every Tern _destroy does.
template <class H, void (*Destroy)(H*)>
class Handle {
 public:
  Handle() noexcept = default;
  explicit Handle(H* h) noexcept : h_(h) {}
  Handle(Handle&& o) noexcept : h_(o.release()) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { Destroy(h_); }

  H* get() const noexcept { return h_; }
  // Gives the C handle to the caller, who destroys it; this object is left empty.
  H* release() noexcept { return std::exchange(h_, nullptr); }
  void reset(H* h = nullptr) noexcept { Destroy(std::exchange(h_, h)); }
  explicit operator bool() const noexcept { return h_ != nullptr; }

 private:
  H* h_ = nullptr;
};

inline std::vector<const char*> c_strings(const std::vector<std::string>& v) {
  std::vector<const char*> out;
  out.reserve(v.size());
  for (const std::string& s : v) out.push_back(s.c_str());
  return out;
}
}  // namespace detail

// ---- Tensors -----------------------------------------------------------------------------------

class Tensor : public detail::Handle<tern_tensor, tern_tensor_destroy> {
 public:
  Tensor() noexcept = default;
  // Takes ownership of a C handle.
  explicit Tensor(tern_tensor* t) noexcept : Handle(t) {}

  // Zero-filled storage Tern owns.
  static Tensor create(tern_dtype dtype, Shape shape) {
    tern_tensor* t = nullptr;
    check(tern_tensor_create(dtype, shape.data(), shape.size(), &t));
    return Tensor(t);
  }
  template <class T>
  static Tensor create(Shape shape) {
    return create(dtype_of<T>, shape);
  }
  // Borrows `data` (zero-copy): it must stay valid and unchanged while the tensor, or any output
  // or value sharing it, lives.
  template <class T>
  static Tensor borrow(Span<T> data, Shape shape) {
    tern_tensor* t = nullptr;
    check(tern_tensor_create_from_data(dtype_of<T>, shape.data(), shape.size(),
                                       const_cast<std::remove_cv_t<T>*>(data.data()),
                                       data.size() * sizeof(T), nullptr, nullptr, &t));
    return Tensor(t);
  }
  template <class T>
  static Tensor borrow(std::vector<T>& data, Shape shape) {
    return borrow(Span<T>(data), shape);
  }
  // Takes the vector's storage (moved, not copied); freed when Tern is done with it.
  template <class T>
  static Tensor adopt(std::vector<T>&& data, Shape shape) {
    static_assert(!std::is_same<T, bool>::value, "std::vector<bool> has no contiguous storage");
    auto owned = std::make_unique<std::vector<T>>(std::move(data));
    tern_tensor* t = nullptr;
    check(tern_tensor_create_from_data(
        dtype_of<T>, shape.data(), shape.size(), owned->data(), owned->size() * sizeof(T),
        [](void*, void* ctx) { delete static_cast<std::vector<T>*>(ctx); }, owned.get(), &t));
    owned.release();  // the deleter owns it now
    return Tensor(t);
  }

  tern_dtype dtype() const noexcept { return tern_tensor_dtype(get()); }
  size_t rank() const noexcept { return tern_tensor_rank(get()); }
  Shape shape() const noexcept { return Shape(tern_tensor_shape(get()), rank()); }
  size_t byte_size() const noexcept { return tern_tensor_byte_size(get()); }
  int64_t element_count() const noexcept {
    int64_t n = 1;
    for (int64_t d : shape()) n *= d;
    return get() ? n : 0;
  }
  const char* device() const noexcept { return tern_tensor_device(get()); }
  void* raw_data() noexcept { return tern_tensor_data(get()); }
  // The elements as T; throws when T is not the tensor's dtype (or the tensor is empty-handed).
  template <class T>
  Span<T> data() {
    if (!get()) check_handle();
    if (dtype_of<T> != dtype()) {
      throw Error(TERN_ERR_INVALID_ARGUMENT, "tensor of dtype " + std::to_string(dtype()) +
                                                 " read as dtype " + std::to_string(dtype_of<T>));
    }
    return Span<T>(static_cast<T*>(tern_tensor_data(get())), byte_size() / sizeof(T));
  }
  template <class T>
  Span<const T> data() const {
    Span<T> s = const_cast<Tensor*>(this)->data<T>();
    return Span<const T>(s.data(), s.size());
  }
  // Copies src's elements into this tensor (same dtype and shape; any pair of devices).
  void copy_from(const Tensor& src) { check(tern_tensor_copy(src.get(), get())); }

 private:
  [[noreturn]] static void check_handle() {
    throw Error(TERN_ERR_INVALID_ARGUMENT, "empty tern::Tensor (moved from?)");
  }
};

// ---- Values: tensors, sequences, optionals -----------------------------------------------------

class Value : public detail::Handle<tern_value, tern_value_destroy> {
 public:
  Value() noexcept = default;
  explicit Value(tern_value* v) noexcept : Handle(v) {}

  // Shares t's data (no copy).
  static Value from_tensor(const Tensor& t) {
    tern_value* v = nullptr;
    check(tern_value_from_tensor(t.get(), &v));
    return Value(v);
  }
  static Value sequence(tern_dtype elem, const std::vector<const Tensor*>& items) {
    std::vector<const tern_tensor*> raw;
    for (const Tensor* t : items) raw.push_back(t ? t->get() : nullptr);
    tern_value* v = nullptr;
    check(tern_value_create_sequence(elem, raw.data(), raw.size(), &v));
    return Value(v);
  }
  // An optional holding `inner` (shared), or nothing for nullptr.
  static Value optional(const Value* inner) {
    tern_value* v = nullptr;
    check(tern_value_create_optional(inner ? inner->get() : nullptr, &v));
    return Value(v);
  }

  tern_value_kind kind() const {
    tern_value_kind k = TERN_VALUE_TENSOR;
    check(tern_value_get_kind(get(), &k));
    return k;
  }
  Tensor tensor() const {
    tern_tensor* t = nullptr;
    check(tern_value_get_tensor(get(), &t));
    return Tensor(t);
  }
  size_t sequence_length() const noexcept { return tern_value_sequence_length(get()); }
  Tensor sequence_at(size_t i) const {
    tern_tensor* t = nullptr;
    check(tern_value_sequence_at(get(), i, &t));
    return Tensor(t);
  }
  bool has_value() const noexcept { return tern_value_optional_has_value(get()) == 1; }
  Value optional_value() const {
    tern_value* v = nullptr;
    check(tern_value_optional_get(get(), &v));
    return Value(v);
  }
};

// ---- Models ------------------------------------------------------------------------------------

// A model input or output: its name, element dtype and declared shape (-1 marks a dynamic dim;
// has_shape false when the model declares none).
struct IOInfo {
  std::string name;
  tern_dtype dtype = TERN_FLOAT32;
  bool has_shape = false;
  std::vector<int64_t> shape;
};

class Model : public detail::Handle<tern_model, tern_model_destroy> {
 public:
  Model() noexcept = default;
  explicit Model(tern_model* m) noexcept : Handle(m) {}

  // A .tern file or an ONNX model (by content).
  static Model load(const std::string& path) {
    tern_model* m = nullptr;
    check(tern_model_load_file(path.c_str(), &m));
    return Model(m);
  }
  // The bytes are copied: `bytes` may go as soon as this returns.
  static Model load(Span<const uint8_t> bytes) {
    tern_model* m = nullptr;
    check(tern_model_load_memory(bytes.data(), bytes.size(), &m));
    return Model(m);
  }
  void save(const std::string& path) const { check(tern_model_save(get(), path.c_str())); }

  size_t input_count() const noexcept { return tern_model_input_count(get()); }
  size_t output_count() const noexcept { return tern_model_output_count(get()); }
  IOInfo input(size_t i) const { return info(i, tern_model_input_name, tern_model_input_info); }
  IOInfo output(size_t i) const { return info(i, tern_model_output_name, tern_model_output_info); }
  std::vector<IOInfo> inputs() const {
    std::vector<IOInfo> v;
    for (size_t i = 0; i < input_count(); ++i) v.push_back(input(i));
    return v;
  }
  std::vector<IOInfo> outputs() const {
    std::vector<IOInfo> v;
    for (size_t i = 0; i < output_count(); ++i) v.push_back(output(i));
    return v;
  }

 private:
  IOInfo info(size_t i, const char* (*name_fn)(const tern_model*, size_t),
              tern_status (*info_fn)(const tern_model*, size_t, tern_dtype*, size_t*,
                                     const int64_t**)) const {
    IOInfo io;
    size_t rank = 0;
    const int64_t* shape = nullptr;
    check(info_fn(get(), i, &io.dtype, &rank, &shape));
    io.name = name_fn(get(), i);
    io.has_shape = shape != nullptr || rank > 0;
    io.shape.assign(shape, shape + rank);
    return io;
  }
};

// ---- Session and run options -------------------------------------------------------------------

// Setters return *this, so options chain: SessionOptions().backends("cuda,cpu").threads(4).
class SessionOptions : public detail::Handle<tern_session_options, tern_session_options_destroy> {
 public:
  SessionOptions() {
    tern_session_options* o = nullptr;
    check(tern_session_options_create(&o));
    reset(o);
  }
  SessionOptions& backends(const std::string& list) {
    check(tern_session_options_set_backends(get(), list.c_str()));
    return *this;
  }
  SessionOptions& cpu_fallback(bool on) {
    check(tern_session_options_set_cpu_fallback(get(), on ? 1 : 0));
    return *this;
  }
  SessionOptions& threads(int n) {
    check(tern_session_options_set_num_threads(get(), n));
    return *this;
  }
  SessionOptions& interop_threads(int n) {
    check(tern_session_options_set_num_interop_threads(get(), n));
    return *this;
  }
  SessionOptions& max_memory_bytes(uint64_t bytes) {
    check(tern_session_options_set_max_memory_bytes(get(), bytes));
    return *this;
  }
  SessionOptions& flag(const std::string& name, const std::string& value) {
    check(tern_session_options_set_flag(get(), name.c_str(), value.c_str()));
    return *this;
  }
  SessionOptions& profiling(const std::string& path) {
    check(tern_session_options_enable_profiling(get(), path.c_str()));
    return *this;
  }
};

class RunOptions : public detail::Handle<tern_run_options, tern_run_options_destroy> {
 public:
  RunOptions() {
    tern_run_options* r = nullptr;
    check(tern_run_options_create(&r));
    reset(r);
  }
  RunOptions& flag(const std::string& name, const std::string& value) {
    check(tern_run_options_set_flag(get(), name.c_str(), value.c_str()));
    return *this;
  }
  RunOptions& sdp_backends(Span<const tern_sdp_backend> list) {
    check(tern_run_options_set_sdp_backends(get(), list.data(), list.size()));
    return *this;
  }
  RunOptions& output_device(const std::string& device) {
    check(tern_run_options_set_output_device(get(), device.c_str()));
    return *this;
  }
};

class Session : public detail::Handle<tern_session, tern_session_destroy> {
 public:
  Session() noexcept = default;
  // The session keeps what it needs of the model: the model may be destroyed first.
  explicit Session(const Model& model, const SessionOptions* options = nullptr) {
    tern_session* s = nullptr;
    check(tern_session_create(model.get(), options ? options->get() : nullptr, &s));
    reset(s);
  }
  Session(const Model& model, const SessionOptions& options) : Session(model, &options) {}

  // Runs the model on tensors: inputs[i] is the input named input_names[i] (borrowed for the
  // call); returns the outputs named output_names, in that order.
  std::vector<Tensor> run(const std::vector<std::string>& input_names,
                          const std::vector<const Tensor*>& inputs,
                          const std::vector<std::string>& output_names,
                          const RunOptions* options = nullptr) {
    check_counts(input_names.size(), inputs.size());
    std::vector<const tern_tensor*> in;
    for (const Tensor* t : inputs) in.push_back(t ? t->get() : nullptr);
    const std::vector<const char*> in_names = detail::c_strings(input_names);
    const std::vector<const char*> out_names = detail::c_strings(output_names);
    std::vector<tern_tensor*> raw(output_names.size(), nullptr);
    std::vector<Tensor> out;
    out.reserve(raw.size());  // so that taking the handles below cannot throw
    check(tern_session_run(get(), options ? options->get() : nullptr, in_names.data(), in.data(),
                           in.size(), out_names.data(), out_names.size(), raw.data()));
    for (tern_tensor* t : raw) out.emplace_back(t);
    return out;
  }
  // The same with values (sequence and optional inputs and outputs).
  std::vector<Value> run_values(const std::vector<std::string>& input_names,
                                const std::vector<const Value*>& inputs,
                                const std::vector<std::string>& output_names,
                                const RunOptions* options = nullptr) {
    check_counts(input_names.size(), inputs.size());
    std::vector<const tern_value*> in;
    for (const Value* v : inputs) in.push_back(v ? v->get() : nullptr);
    const std::vector<const char*> in_names = detail::c_strings(input_names);
    const std::vector<const char*> out_names = detail::c_strings(output_names);
    std::vector<tern_value*> raw(output_names.size(), nullptr);
    std::vector<Value> out;
    out.reserve(raw.size());
    check(tern_session_run_values(get(), options ? options->get() : nullptr, in_names.data(),
                                  in.data(), in.size(), out_names.data(), out_names.size(),
                                  raw.data()));
    for (tern_value* v : raw) out.emplace_back(v);
    return out;
  }
  // Writes the optimized model with its packed weights (tern_session_save_optimized); returns the
  // number of packed layouts written.
  size_t save_optimized(const std::string& path) const {
    size_t packed = 0;
    check(tern_session_save_optimized(get(), path.c_str(), &packed));
    return packed;
  }

 private:
  static void check_counts(size_t names, size_t inputs) {
    if (names != inputs) {
      throw Error(TERN_ERR_INVALID_ARGUMENT,
                  std::to_string(names) + " input names for " + std::to_string(inputs) + " inputs");
    }
  }
};

}  // namespace abi1
}  // namespace tern

#endif  // TERN_TERN_HPP
