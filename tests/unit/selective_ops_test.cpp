// Selective-op builds (TERN_SELECTED_OPS, cmake/TernSelectiveOps.cmake): the op types CMake reads
// from each op source's and CPU kernel source's register function must include every op the
// function registers (else a selective build would leave out a source a selected op needs), and
// the registries' selection keeps the selected ops and names the others as left out.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/kernel_registry.h"
#include "core/op_registry.h"

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
          "value 'x' is float64, a dtype left out of this selective build of Tern "
          "(TERN_SELECTED_DTYPES); rebuild with it selected");
    CHECK(require_dtype_built(DType::kInt64, "value 'x'", f32_i64).is_ok());
    // This build (the tests') has every type.
    for (DType t : {DType::kFloat16, DType::kFloat64, DType::kInt8, DType::kUInt64, DType::kBool}) {
      CHECK(dtype_built(t));
    }
  }
}
