// Fuzz target: tern_session_run's input checking (names, count, dtypes, ranks, dims, byte sizes,
// NULL pointers) on a fixed model, x [batch, 8] -> MatMul -> Add -> Reshape [-1, 2, 3] ->
// Softmax, with inputs decoded from the fuzzer's bytes:
//   byte 0: input count (0..3) and flags (bit 2: NULL names array, bit 3: NULL tensors array,
//           bit 4: NULL output name, bit 5: NULL outputs array)
//   per input: name selector (0..2 "x", 3 "y", else a length + that many bytes), dtype code,
//              rank (0..4), a byte per dim, a byte-size selector (exact / one short / all left),
//   the rest: tensor data, shared by the inputs.
// Every call must return a status; a successful one yields a [batch, 2, 3] float tensor.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "c_api.h"

namespace {

struct Fixture {
  tern_model* model = nullptr;
  tern_session* session = nullptr;
  Fixture() {
    const std::string path =
        std::string(TERN_FUZZ_SOURCE_DIR) + "/tests/fuzz/corpus/tern_loader/matmul.tern";
    if (tern_model_load_file(path.c_str(), &model) != TERN_OK) std::abort();
    tern_session_options* o = nullptr;
    tern_session_options_create(&o);
    tern_session_options_set_num_threads(o, 1);
    // Portable kernels: every new batch size builds a plan, and oneDNN would generate code each
    // time.
    tern_session_options_set_flag(o, "deterministic_algorithms", "1");
    if (tern_session_create(model, o, &session) != TERN_OK) std::abort();
    tern_session_options_destroy(o);
  }
};

// Codes a binding might pass, valid or not (tern_dtype holds any non-negative int:
// TERN_DTYPE_MAX_ENUM).
const int kDtypes[] = {TERN_FLOAT32, TERN_FLOAT16, TERN_INT64,  TERN_INT32, TERN_UINT8,
                       TERN_BOOL,    TERN_FLOAT64, TERN_STRING, 0,          99};

struct Reader {
  const uint8_t* p;
  size_t left;
  uint8_t next() {
    if (!left) return 0;
    --left;
    return *p++;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture f;
  Reader r{data, size};
  const uint8_t head = r.next();
  const size_t count = head & 3;
  std::vector<std::string> names(count);
  struct Spec {
    tern_dtype dtype;
    std::vector<int64_t> shape;
    int size_mode;
  };
  std::vector<Spec> specs(count);
  for (size_t i = 0; i < count; ++i) {
    const uint8_t sel = r.next();
    if (sel % 5 < 3) {
      names[i] = "x";
    } else if (sel % 5 == 3) {
      names[i] = "y";
    } else {
      const size_t len = r.next() % 16;
      for (size_t k = 0; k < len; ++k) names[i].push_back(static_cast<char>(r.next()));
    }
    specs[i].dtype = static_cast<tern_dtype>(kDtypes[r.next() % (sizeof(kDtypes) / sizeof(int))]);
    const int rank = r.next() % 5;
    for (int d = 0; d < rank; ++d) specs[i].shape.push_back(r.next() % 17);
    specs[i].size_mode = r.next() % 3;
  }
  // The rest is data, shared by the inputs (borrowed, read-only for the run).
  std::vector<uint8_t> payload(r.p, r.p + r.left);
  std::vector<tern_tensor*> tensors(count, nullptr);
  std::vector<const char*> name_ptrs(count);
  for (size_t i = 0; i < count; ++i) {
    name_ptrs[i] = names[i].c_str();
    size_t elems = 1;
    for (int64_t d : specs[i].shape) elems *= static_cast<size_t>(d);
    const size_t es = specs[i].dtype == TERN_FLOAT16                                   ? 2
                      : specs[i].dtype == TERN_INT64 || specs[i].dtype == TERN_FLOAT64 ? 8
                      : specs[i].dtype == TERN_UINT8 || specs[i].dtype == TERN_BOOL    ? 1
                                                                                       : 4;
    size_t bytes = elems * es;
    if (specs[i].size_mode == 1 && bytes) bytes -= 1;
    if (specs[i].size_mode == 2) bytes = payload.size();
    std::vector<uint8_t>* buf = new std::vector<uint8_t>(std::max(bytes, payload.size()));
    std::copy(payload.begin(), payload.end(), buf->begin());
    tern_status s = tern_tensor_create_from_data(
        specs[i].dtype, specs[i].shape.data(), specs[i].shape.size(), buf->data(), bytes,
        [](void*, void* ctx) { delete static_cast<std::vector<uint8_t>*>(ctx); }, buf, &tensors[i]);
    if (s != TERN_OK) {
      delete buf;
      tensors[i] = nullptr;
    }
  }
  const char* out_name = "y";
  tern_tensor* out = nullptr;
  const tern_status s =
      tern_session_run(f.session, nullptr, (head & 4) ? nullptr : name_ptrs.data(),
                       (head & 8) ? nullptr : const_cast<const tern_tensor* const*>(tensors.data()),
                       count, (head & 16) ? nullptr : &out_name, 1, (head & 32) ? nullptr : &out);
  if (s == TERN_OK) {
    if (!out || tern_tensor_rank(out) != 3 || tern_tensor_dtype(out) != TERN_FLOAT32) std::abort();
    tern_tensor_destroy(out);
  } else if (tern_last_error()[0] == '\0') {
    std::abort();  // every failure says why
  }
  for (tern_tensor* t : tensors) tern_tensor_destroy(t);
  return 0;
}
