// `tern check MODEL DIR [--atol A] [--rtol R]`: runs a model on reference inputs and compares each
// output with the reference, the accuracy diff run after converting a model. DIR is an ONNX test
// data set (input_N.pb / output_N.pb TensorProto files, N in the model's input and output order,
// read by the same reader as the conformance runner, through tern_tensor_read_onnx_file), a folder
// of test_data_set_* such sets, or .npy pairs: input_NAME.npy for each model input and
// expected_NAME.npy for each output (NAME with '/' and ':' as '_'). Per output it prints the max
// absolute and relative error and the worst element (most over its tolerance). Exit status: 0 when
// every element of every output has |got - want| <= atol + rtol * |want| (NaN matching NaN), 1
// otherwise (a shape or dtype mismatch included), 2 on errors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "c_api.h"
#include "tools/tern/cli_util.h"
#include "tools/tern/commands.h"
#include "tools/tern/npy.h"

namespace tern_cli {

namespace {

namespace fs = std::filesystem;

double half_to_double(uint16_t h, bool bf16) {
  if (bf16) {
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0) return sign * std::ldexp(man, -24);
  if (exp == 31) return man ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  return sign * std::ldexp(man + 1024, exp - 25);
}

// Element i as a double; false for a dtype that has no numeric value (strings).
bool element(tern_dtype dt, const void* data, size_t i, double* out) {
  switch (dt) {
    case TERN_FLOAT32:
      *out = static_cast<const float*>(data)[i];
      return true;
    case TERN_FLOAT64:
      *out = static_cast<const double*>(data)[i];
      return true;
    case TERN_FLOAT16:
      *out = half_to_double(static_cast<const uint16_t*>(data)[i], false);
      return true;
    case TERN_BFLOAT16:
      *out = half_to_double(static_cast<const uint16_t*>(data)[i], true);
      return true;
    case TERN_INT8:
      *out = static_cast<const int8_t*>(data)[i];
      return true;
    case TERN_UINT8:
      *out = static_cast<const uint8_t*>(data)[i];
      return true;
    case TERN_BOOL:
      *out = static_cast<const uint8_t*>(data)[i] ? 1 : 0;
      return true;
    case TERN_INT16:
      *out = static_cast<const int16_t*>(data)[i];
      return true;
    case TERN_UINT16:
      *out = static_cast<const uint16_t*>(data)[i];
      return true;
    case TERN_INT32:
      *out = static_cast<const int32_t*>(data)[i];
      return true;
    case TERN_UINT32:
      *out = static_cast<const uint32_t*>(data)[i];
      return true;
    case TERN_INT64:
      *out = static_cast<double>(static_cast<const int64_t*>(data)[i]);
      return true;
    case TERN_UINT64:
      *out = static_cast<double>(static_cast<const uint64_t*>(data)[i]);
      return true;
    default:
      return false;
  }
}

std::string index_text(size_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 0) {
      idx[d] = static_cast<int64_t>(flat % static_cast<size_t>(shape[d]));
      flat /= static_cast<size_t>(shape[d]);
    }
  }
  return shape_text(idx.data(), idx.size());
}

// A reference array, from either kind of file.
struct Ref {
  tern_dtype dtype = TERN_FLOAT32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
  NpyArray npy;                   // holds .npy data
  tern_tensor* tensor = nullptr;  // holds .pb data
  ~Ref() { tern_tensor_destroy(tensor); }
};

// Reads `path` (.pb or .npy) into *r; "" or what is wrong.
std::string read_ref(const std::string& path, Ref* r) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    std::string err = read_npy(path, &r->npy);
    if (!err.empty()) return err;
    r->dtype = r->npy.dtype;
    r->shape = r->npy.shape;
    r->data = r->npy.data.data();
    r->bytes = r->npy.data.size();
    return "";
  }
  const tern_status s = tern_tensor_read_onnx_file(path.c_str(), &r->tensor);
  if (s != TERN_OK) return std::string(tern_status_name(s)) + ": " + tern_last_error();
  r->dtype = tern_tensor_dtype(r->tensor);
  r->shape.assign(tern_tensor_shape(r->tensor),
                  tern_tensor_shape(r->tensor) + tern_tensor_rank(r->tensor));
  r->data = tern_tensor_data(r->tensor);
  r->bytes = tern_tensor_byte_size(r->tensor);
  return "";
}

std::string safe_name(std::string n) {
  for (char& c : n) {
    if (c == '/' || c == ':') c = '_';
  }
  return n;
}

// Checks one data set; returns 0 (all within), 1 (a mismatch) or 2 (an error).
int check_set(tern_model* m, tern_session* s, const std::string& dir, double atol, double rtol) {
  const bool pb = fs::exists(dir + "/input_0.pb") || fs::exists(dir + "/output_0.pb");
  auto in_path = [&](size_t i, const char* name) {
    return pb ? dir + "/input_" + std::to_string(i) + ".pb"
              : dir + "/input_" + safe_name(name) + ".npy";
  };
  auto out_path = [&](size_t k, const char* name) {
    return pb ? dir + "/output_" + std::to_string(k) + ".pb"
              : dir + "/expected_" + safe_name(name) + ".npy";
  };
  const size_t n_in = tern_model_input_count(m), n_out = tern_model_output_count(m);
  std::vector<Ref> ins(n_in);
  TensorList in_tensors;
  std::vector<const char*> in_names, out_names;
  for (size_t i = 0; i < n_in; ++i) {
    const char* name = tern_model_input_name(m, i);
    const std::string path = in_path(i, name);
    std::string err = read_ref(path, &ins[i]);
    if (!err.empty()) {
      std::fprintf(stderr, "tern check: input '%s': %s: %s\n", name, path.c_str(), err.c_str());
      return 2;
    }
    tern_tensor* t = nullptr;
    tern_status st = tern_tensor_create_from_data(
        ins[i].dtype, ins[i].shape.data(), ins[i].shape.size(), const_cast<void*>(ins[i].data),
        ins[i].bytes, nullptr, nullptr, &t);
    if (st != TERN_OK) {
      std::fprintf(stderr, "tern check: input '%s' (%s): %s: %s\n", name, path.c_str(),
                   tern_status_name(st), tern_last_error());
      return 2;
    }
    in_tensors.v.push_back(t);
    in_names.push_back(name);
  }
  for (size_t k = 0; k < n_out; ++k) out_names.push_back(tern_model_output_name(m, k));
  TensorList outs;
  outs.v.assign(n_out, nullptr);
  tern_status st = tern_session_run(s, nullptr, in_names.data(),
                                    const_cast<const tern_tensor* const*>(in_tensors.v.data()),
                                    n_in, out_names.data(), n_out, outs.v.data());
  if (st != TERN_OK) {
    std::fprintf(stderr, "tern check: running on %s: %s: %s\n", dir.c_str(), tern_status_name(st),
                 tern_last_error());
    return 2;
  }
  int rc = 0;
  std::printf("%s:\n", dir.c_str());
  for (size_t k = 0; k < n_out; ++k) {
    Ref want;
    const std::string path = out_path(k, out_names[k]);
    std::string err = read_ref(path, &want);
    if (!err.empty()) {
      std::fprintf(stderr, "tern check: expected output '%s': %s: %s\n", out_names[k], path.c_str(),
                   err.c_str());
      return 2;
    }
    tern_tensor* got = outs.v[k];
    const tern_dtype gdt = tern_tensor_dtype(got);
    std::vector<int64_t> gshape(tern_tensor_shape(got),
                                tern_tensor_shape(got) + tern_tensor_rank(got));
    if (gshape != want.shape || gdt != want.dtype) {
      std::printf("  %-24s MISMATCH: got %s %s, expected %s %s\n", out_names[k], dtype_label(gdt),
                  shape_text(gshape.data(), gshape.size()).c_str(), dtype_label(want.dtype),
                  shape_text(want.shape.data(), want.shape.size()).c_str());
      rc = 1;
      continue;
    }
    const size_t n = dtype_bytes(gdt) ? tern_tensor_byte_size(got) / dtype_bytes(gdt) : 0;
    double max_abs = 0, max_rel = 0, worst_excess = -INFINITY, worst_got = 0, worst_want = 0;
    size_t worst = 0, bad = 0;
    for (size_t i = 0; i < n; ++i) {
      double g = 0, w = 0;
      if (!element(gdt, tern_tensor_data(got), i, &g) || !element(gdt, want.data, i, &w)) {
        std::fprintf(stderr, "tern check: output '%s': dtype %s is not compared\n", out_names[k],
                     dtype_label(gdt));
        return 2;
      }
      double diff;
      if (std::isnan(g) || std::isnan(w)) {
        diff = std::isnan(g) && std::isnan(w) ? 0 : INFINITY;
      } else if (std::isinf(g) || std::isinf(w)) {
        diff = g == w ? 0 : INFINITY;
      } else {
        diff = std::fabs(g - w);
      }
      const double rel = diff == 0 ? 0 : w != 0 ? diff / std::fabs(w) : INFINITY;
      max_abs = std::max(max_abs, diff);
      max_rel = std::max(max_rel, rel);
      const double excess = diff - (atol + rtol * (std::isfinite(w) ? std::fabs(w) : 0));
      if (excess > 0) ++bad;
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = i;
        worst_got = g;
        worst_want = w;
      }
    }
    const bool ok = bad == 0;
    if (!ok) rc = 1;
    std::printf("  %-24s %s  max abs %.3g  max rel %.3g  worst %s got %.9g expected %.9g",
                out_names[k], ok ? "ok      " : "MISMATCH", max_abs, max_rel,
                index_text(worst, gshape).c_str(), worst_got, worst_want);
    if (!ok) std::printf("  (%zu of %zu elements over tolerance)", bad, n);
    std::printf("\n");
  }
  return rc;
}

}  // namespace

int cmd_check(const std::vector<std::string>& args) {
  std::string model_path, dir, backends = "cpu";
  double atol = 1e-4, rtol = 1e-3;
  int threads = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--atol" || a == "--rtol") {
      char* end = nullptr;
      const double v = i + 1 < args.size() ? std::strtod(args[i + 1].c_str(), &end) : -1;
      if (!end || *end || v < 0) {
        std::fprintf(stderr, "tern check: %s needs a number >= 0\n", a.c_str());
        return 2;
      }
      (a == "--atol" ? atol : rtol) = v;
      ++i;
    } else if (a == "--backends" && i + 1 < args.size()) {
      backends = args[++i];
    } else if (a == "--threads") {
      if (i + 1 >= args.size() || !parse_int(args[++i], 0, 4096, &threads)) {
        std::fprintf(stderr, "tern check: --threads needs an integer 0..4096\n");
        return 2;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tern check: unknown option '%s'\n", a.c_str());
      return 2;
    } else if (model_path.empty()) {
      model_path = a;
    } else if (dir.empty()) {
      dir = a;
    } else {
      std::fprintf(stderr, "tern check: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (model_path.empty() || dir.empty()) {
    std::fprintf(stderr,
                 "usage: tern check MODEL DIR [--atol A] [--rtol R] [--backends LIST] "
                 "[--threads N]\n");
    return 2;
  }
  // The data sets: DIR itself, or its test_data_set_* folders in order.
  std::vector<std::string> sets;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    std::fprintf(stderr, "tern check: %s: not a directory\n", dir.c_str());
    return 2;
  }
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("test_data_set_", 0) == 0) sets.push_back(e.path().string());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) sets.push_back(dir);

  ModelPtr model;
  tern_status s = tern_model_load_file(model_path.c_str(), &model.p);
  if (s != TERN_OK) {
    std::fprintf(stderr, "tern check: %s: %s: %s\n", model_path.c_str(), tern_status_name(s),
                 tern_last_error());
    return 2;
  }
  std::unique_ptr<tern_session_options, void (*)(tern_session_options*)> opts{
      nullptr, tern_session_options_destroy};
  std::unique_ptr<tern_session, void (*)(tern_session*)> session{nullptr, tern_session_destroy};
  tern_session_options* o = nullptr;
  tern_session* raw = nullptr;
  if ((s = tern_session_options_create(&o)) == TERN_OK) {
    opts.reset(o);
    s = tern_session_options_set_backends(o, backends.c_str());
  }
  if (s == TERN_OK) s = tern_session_options_set_num_threads(o, threads);
  if (s == TERN_OK) s = tern_session_create(model.p, o, &raw);
  session.reset(raw);
  if (s != TERN_OK) {
    std::fprintf(stderr, "tern check: %s: session: %s: %s\n", model_path.c_str(),
                 tern_status_name(s), tern_last_error());
    return 2;
  }
  int rc = 0;
  for (const std::string& set : sets) {
    const int r = check_set(model.p, session.get(), set, atol, rtol);
    if (r == 2) return 2;
    rc = std::max(rc, r);
  }
  std::printf("%s (atol %g, rtol %g)\n", rc == 0 ? "all outputs within tolerance" : "MISMATCH",
              atol, rtol);
  return rc;
}

}  // namespace tern_cli
