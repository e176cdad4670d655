// Selective-op builds (TERN_SELECTED_OPS, cmake/TernSelectiveOps.cmake): the op types CMake reads
// from each op source's and CPU kernel source's register function must include every op the
// function registers (else a selective build would leave out a source a selected op needs), and
// the registries' selection keeps the selected ops and names the others as left out.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "c_api.h"
#include "core/built_dtypes.h"
#include "core/kernel_registry.h"
#include "core/op_registry.h"
#include "core/opt/graph_util.h"
#include "graph_builder.h"
#include "serialization/model_io.h"

namespace tern::generated {
// A source's register function and the op types CMake read from it (generated tables below).
template <class Registry>
struct SourceOps {
  const char* stem;
  void (*fn)(Registry&);
  std::vector<std::string> ops;
};
}  // namespace tern::generated

#include "cpu_kernel_sources.h"
#include "op_sources.h"

using namespace tern;

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Status no_infer(OpContext&) {
  return Status::ok();
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("CMake reads every op an op source registers (selective builds pick sources by them)") {
    std::string missed;
    size_t ops = 0;
    for (const auto& src : generated::register_op_sources()) {
      OpRegistry r;
      src.fn(r);
      for (const std::string& op : r.op_types()) {
        ++ops;
        if (!contains(src.ops, op)) missed += std::string(" ops/") + src.stem + ".cpp:" + op;
      }
    }
    CHECK(ops > 100);
    CHECK_MESSAGE(missed.empty(),
                  "ops registered under names cmake/TernSelectiveOps.cmake does "
                  "not see (write them as literals in the register function):"
                      << missed);
  }

  TEST_CASE("CMake reads every op a CPU kernel source registers") {
    std::string missed;
    size_t ops = 0;
    for (const auto& src : generated::register_cpu_sources()) {
      KernelRegistry r;
      src.fn(r);
      for (const std::string& op : r.op_types("cpu")) {
        ++ops;
        if (!contains(src.ops, op)) missed += std::string(" ") + src.stem + ":" + op;
      }
    }
    CHECK(ops > 10);
    CHECK_MESSAGE(missed.empty(), "kernels registered under names CMake does not see:" << missed);
  }

  TEST_CASE("a selection keeps the selected ops and names Tern's others as left out") {
    OpRegistry r;
    for (const char* op : {"Conv", "Relu", "Loop"}) {
      r.add({op, 1, 1, 1, 1, no_infer, nullptr, {}, attrs({})});
    }
    r.select({"Conv", "Relu"}, {"If"});
    CHECK(r.find("Conv") != nullptr);
    CHECK(r.find("Relu") != nullptr);
    CHECK(r.find("Loop") == nullptr);
    CHECK(r.left_out("Loop"));  // registered, then dropped
    CHECK(r.left_out("If"));    // in a source the build did not call
    CHECK_FALSE(r.left_out("Conv"));
    CHECK_FALSE(r.left_out("NoSuchOp"));
    CHECK(r.op_types() == std::vector<std::string>{"Conv", "Relu"});
    // A full build's registry leaves nothing out.
    CHECK_FALSE(OpRegistry::global().left_out("Conv"));
  }

  TEST_CASE("the generated registration's packed name lists select as braced lists do") {
    CHECK(split_names("Conv\0"
                      "Relu\0") == std::vector<std::string>{"Conv", "Relu"});
    CHECK(split_names("").empty());
    OpRegistry r;
    for (const char* op : {"Conv", "Relu", "Loop"}) {
      r.add({op, 1, 1, 1, 1, no_infer, nullptr, {}, attrs({})});
    }
    r.select_packed("Conv\0",
                    "If\0"
                    "Where\0");
    CHECK(r.op_types() == std::vector<std::string>{"Conv"});
    CHECK(r.left_out("Loop"));
    CHECK(r.left_out("Relu"));
    CHECK(r.left_out("Where"));
    CHECK_FALSE(r.left_out("Conv"));
    KernelRegistry k;
    KernelFactory f = nullptr;
    k.add("Conv", "cpu", DType::kFloat32, f);
    k.add("Relu", "cpu", DType::kFloat32, f);
    k.keep_ops_packed("cpu", "Relu\0");
    CHECK(k.op_types("cpu") == std::vector<std::string>{"Relu"});
  }

  TEST_CASE("a selection keeps the selected ops' kernels of that backend only") {
    KernelRegistry r;
    KernelFactory f = nullptr;
    r.add("Conv", "cpu", DType::kFloat32, f);
    r.add("Relu", "cpu", DType::kFloat32, f);
    r.add("Relu", "cuda", DType::kFloat32, f);
    r.keep_ops("cpu", {"Conv"});
    CHECK(r.op_types("cpu") == std::vector<std::string>{"Conv"});
    CHECK(r.op_types("cuda") == std::vector<std::string>{"Relu"});
    CHECK_FALSE(r.has_op("Relu", "cpu"));
  }
  TEST_CASE("the optimizer's op set (kBuiltOptimizerOps, from CMake) agrees with the registry") {
    // The passes skip themselves by it (and link-time optimisation drops them): each bit must be
    // set exactly when the op is registered, or a pass would be dropped that could still fire.
    const std::pair<OptOp, const char*> ops[] = {
        {OptOp::kAttention, "Attention"},
        {OptOp::kBatchNormalization, "BatchNormalization"},
        {OptOp::kDequantizeLinear, "DequantizeLinear"},
        {OptOp::kDropout, "Dropout"},
        {OptOp::kFusedBatchNormalization, "FusedBatchNormalization"},
        {OptOp::kFusedConv, "FusedConv"},
        {OptOp::kFusedMatMul, "FusedMatMul"},
        {OptOp::kGelu, "Gelu"},
        {OptOp::kGroupNormalization, "GroupNormalization"},
        {OptOp::kHardSwish, "HardSwish"},
        {OptOp::kLayerNormalization, "LayerNormalization"},
        {OptOp::kPad, "Pad"},
        {OptOp::kSwish, "Swish"},
        {OptOp::kTranspose, "Transpose"},
    };
    for (const auto& entry : ops) {  // no structured binding: clang 14 cannot capture one in INFO
      INFO(entry.second);
      CHECK(op_built(entry.first) == op_built(std::string(entry.second)));
    }
    // Every enumerator is listed above (the last one's number).
    CHECK(static_cast<size_t>(OptOp::kTranspose) + 1 == std::size(ops));
  }

  TEST_CASE("a dtype a selective build left out is refused, and the message says so") {
    const uint64_t f32_i64 = (uint64_t{1} << 1) | (uint64_t{1} << 7);  // bit N: dtype N
    CHECK(dtype_built(DType::kFloat32, f32_i64));
    CHECK(dtype_built(DType::kInt64, f32_i64));
    CHECK_FALSE(dtype_built(DType::kFloat64, f32_i64));
    CHECK_FALSE(dtype_built(DType::kBFloat16, f32_i64));
    CHECK(dtype_built(DType::kSequence, f32_i64));   // not a tensor type
    CHECK(dtype_built(DType::kUndefined, f32_i64));  // not known yet
    const Status s = require_dtype_built(DType::kFloat64, "value 'x'", f32_i64);
    CHECK(s.code() == Code::kUnsupported);
    CHECK(s.message() ==
          str_cat("value 'x' is float64, a dtype left out of this ", kBuiltDTypesBuild,
                  " build of Tern (TERN_SELECTED_DTYPES); rebuild with it selected"));
    CHECK(require_dtype_built(DType::kInt64, "value 'x'", f32_i64).is_ok());
    if (std::strcmp(kBuiltDTypesBuild, "full") == 0) {  // (the minimal build's have fewer)
      for (DType t :
           {DType::kFloat16, DType::kFloat64, DType::kInt8, DType::kUInt64, DType::kBool}) {
        CHECK(dtype_built(t));
      }
      CHECK(built_dtypes_text().empty());
    }
  }
}

TEST_SUITE("serialization") {
  TEST_CASE("a model of a dtype the build left out is refused at load (the minimal default)") {
    // The minimal build's default element types leave float64 out (TERN_MINIMAL_DTYPES); a full
    // build has it. Either way the loader and `tern info` agree with dtype_built.
    const Graph g = tern_test::relu_graph(DType::kFloat64);
    const std::string path = "/tmp/tern_dtype_left_out_" + std::to_string(::getpid()) + ".tern";
    REQUIRE(serialization::save_tern(g, path).is_ok());
    auto m = serialization::load_model_file(path);
    std::remove(path.c_str());
    const std::string info = tern_config_show();
    if (dtype_built(DType::kFloat64)) {
      CHECK(m.has_value());
    } else {
      REQUIRE_FALSE(m.has_value());
      CHECK(m.status().code() == Code::kUnsupported);
      // ("'PATH': " first.)
      CHECK(m.status().message() ==
            str_cat("'", path, "': value 'x' is float64, a dtype left out of this ",
                    kBuiltDTypesBuild,
                    " build of Tern (TERN_SELECTED_DTYPES); rebuild with it selected"));
      CHECK(info.find("element types: ") != std::string::npos);
      CHECK(info.find(built_dtypes_text()) != std::string::npos);
      CHECK(built_dtypes_text().find("float64") == std::string::npos);
    }
    // float32 and int64 are in every selection (shapes are int64).
    CHECK(dtype_built(DType::kFloat32));
    CHECK(dtype_built(DType::kInt64));
  }
}
