// core/: tensors, shapes, half floats, graph validation, memory planning, sessions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/half.h"
#include "core/low_float.h"
#include "core/plan/memory_plan.h"
#include "core/weight_memory.h"
#include "graph_builder.h"

using namespace tern;
using namespace tern_test;

TEST_SUITE("core") {
  TEST_CASE("checked_numel rejects negative dims and overflow") {
    CHECK(checked_numel({2, 3, 4}).value() == 24);
    CHECK(checked_numel({}).value() == 1);
    CHECK(checked_numel({5, 0, 7}).value() == 0);
    CHECK(checked_numel({2, -1}).status().code() == Code::kInvalidArgument);
    auto big = checked_numel({int64_t{1} << 40, int64_t{1} << 40});
    CHECK(big.status().code() == Code::kInvalidArgument);
    CHECK(big.status().message().find("2^62") != std::string::npos);
  }

  TEST_CASE("str_cat and the status makers: every kind of piece as a stream writes it") {
    const std::string name = "conv_1";
    const std::string_view view = "view";
    const char* none = nullptr;
    char buffer[8] = "buf";
    std::ostringstream os;
    os << "node '" << name << "' " << view << buffer << 'c' << static_cast<unsigned char>('u')
       << int64_t{-9223372036854775807 - 1} << " " << uint64_t{18446744073709551615u} << " " << -7
       << " " << 42u << " " << true << " " << static_cast<int16_t>(-3);
    // Names and integers only: the pieces' path.
    CHECK(str_cat("node '", name, "' ", view, buffer, none, 'c', static_cast<unsigned char>('u'),
                  int64_t{-9223372036854775807 - 1}, " ", uint64_t{18446744073709551615u}, " ", -7,
                  " ", 42u, " ", true, " ", static_cast<int16_t>(-3)) == os.str());
    // A float among them: the stream's path for the whole list.
    CHECK(str_cat(name, " ", 1.5, " ", 2) == "conv_1 1.5 2");
    CHECK(str_cat().empty());
    CHECK(str_cat(name) == name);
    const Status s = invalid_model("node '", name, "': ", 3, " inputs");
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message() == "node 'conv_1': 3 inputs");
    CHECK(unsupported("only ", size_t{4}, "-D").message() == "only 4-D");
    CHECK(internal_error().code() == Code::kInternal);
    CHECK(internal_error().message().empty());
  }

  TEST_CASE("tensors are 64-byte aligned and zeroed") {
    Tensor t = Tensor::allocate(DType::kFloat32, {3, 5}).value();
    CHECK(reinterpret_cast<uintptr_t>(t.raw()) % 64 == 0);
    CHECK(t.byte_size() == 60);
    for (int64_t i = 0; i < t.numel(); ++i) CHECK(t.data<float>()[i] == 0.0f);
    CHECK(Tensor::allocate(DType::kUndefined, {1}).status().code() == Code::kUnsupported);
  }

  TEST_CASE("string tensors hold std::string elements; clone copies them") {
    Tensor s = Tensor::allocate(DType::kString, {2}).value();
    CHECK(s.data<std::string>()[0].empty());
    s.data<std::string>()[1] = std::string(100, 'x');  // longer than the small-string buffer
    Tensor c = s.clone().value();
    s.data<std::string>()[1] = "changed";
    CHECK(c.data<std::string>()[1] == std::string(100, 'x'));
    // 2^60 strings are too large, as 2^60 of any 4-byte type (their byte count, 32 each, once
    // wrapped to nothing); 2^56 are out of memory.
    CHECK(Tensor::allocate(DType::kString, {int64_t{1} << 30, int64_t{1} << 30}).status().code() ==
          Code::kInvalidArgument);
    CHECK(Tensor::allocate(DType::kString, {int64_t{1} << 28, int64_t{1} << 28}).status().code() ==
          Code::kOutOfMemory);
  }

  TEST_CASE("float8 and float4 codes decode and round-trip with round-to-nearest-even") {
    CHECK(low_float_to_float(DType::kFloat8E4M3FN, 0x7e) == 448.0f);
    CHECK(std::isnan(low_float_to_float(DType::kFloat8E4M3FN, 0x7f)));
    CHECK(low_float_to_float(DType::kFloat8E5M2, 0x7c) == INFINITY);
    CHECK(std::isnan(low_float_to_float(DType::kFloat8E4M3FNUZ, 0x80)));
    CHECK(low_float_to_float(DType::kFloat4E2M1, 0x7) == 6.0f);
    CHECK(low_float_to_float(DType::kFloat4E2M1, 0x9) == -0.5f);
    for (DType t : {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                    DType::kFloat8E5M2FNUZ, DType::kFloat4E2M1}) {
      const int codes = t == DType::kFloat4E2M1 ? 16 : 256;
      for (int c = 0; c < codes; ++c) {
        float v = low_float_to_float(t, static_cast<uint8_t>(c));
        if (std::isnan(v) || std::isinf(v) || (v == 0 && c != 0)) continue;
        CHECK_MESSAGE(float_to_low_float(t, v) == c, dtype_name(t), " code ", c);
      }
    }
    // 464 lies halfway between 448 (even mantissa) and the NaN code: ties to even keep 448.
    CHECK(float_to_low_float(DType::kFloat8E4M3FN, 464.0f, false) == 0x7e);
    CHECK(float_to_low_float(DType::kFloat8E4M3FN, 500.0f, false) == 0x7f);  // overflow: NaN
    CHECK(float_to_low_float(DType::kFloat8E4M3FN, 500.0f, true) == 0x7e);   // saturates
    CHECK(float_to_low_float(DType::kFloat8E5M2, 1e6f, false) == 0x7c);      // to infinity
    CHECK(float_to_low_float(DType::kFloat8E4M3FN, 1.0625f) == 0x38);        // tie 1 / 1.125 -> 1
  }

  TEST_CASE("int_at / float_at read every dtype (no recursion for the 8/4/2-bit types)") {
    Tensor f8 = Tensor::allocate(DType::kFloat8E4M3FN, {1}).value();
    f8.data<uint8_t>()[0] = 0x7e;
    CHECK(f8.float_at(0) == 448.0);
    CHECK(f8.int_at(0) == 448);
    Tensor i4 = Tensor::allocate(DType::kInt4, {1}).value();
    i4.data<int8_t>()[0] = -3;
    CHECK(i4.int_at(0) == -3);
    CHECK(i4.float_at(0) == -3.0);
    Tensor u64 = Tensor::allocate(DType::kUInt64, {1}).value();
    u64.data<uint64_t>()[0] = uint64_t{1} << 63;
    CHECK(u64.float_at(0) == 9223372036854775808.0);
    Tensor s = Tensor::allocate(DType::kString, {1}).value();
    CHECK(std::isnan(s.float_at(0)));
    CHECK(s.int_at(0) == 0);
  }

  TEST_CASE("half and bfloat16 conversions round to nearest even") {
    for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
      CHECK(half_to_float(float_to_half(f)) == f);
    }
    CHECK(float_to_half(1.0f) == 0x3c00);
    CHECK(float_to_half(1e6f) == 0x7c00);  // overflow to +inf
    CHECK(half_to_float(0xfc00) == -std::numeric_limits<float>::infinity());
    CHECK(float_to_bfloat16(1.0f) == 0x3f80);
    CHECK(bfloat16_to_float(float_to_bfloat16(3.140625f)) == 3.140625f);
  }

  TEST_CASE("unused_name: a taken value name gets a numbered suffix") {
    Graph g;
    CHECK(g.unused_name("w") == "w");
    g.add_value("w");
    CHECK(g.unused_name("w") == "w_2");
    g.add_value(g.unused_name("w"));
    g.add_value("w_3x");
    CHECK(g.unused_name("w") == "w_3");
    CHECK(g.values[1].name == "w_2");
  }

  TEST_CASE("a tensor alone owning its storage: not once a copy, a view or a wrapper shares it") {
    Tensor t = Tensor::allocate(DType::kFloat32, {4, 4}).value();
    CHECK(t.owns_storage_alone());
    {
      Tensor copy = t;  // shares the buffer
      CHECK_FALSE(t.owns_storage_alone());
      CHECK_FALSE(copy.owns_storage_alone());
    }
    CHECK(t.owns_storage_alone());
    {
      Tensor view = t.reshaped({16});
      CHECK_FALSE(t.owns_storage_alone());
      CHECK_FALSE(view.owns_storage_alone());
    }
    float data[4] = {};
    CHECK_FALSE(Tensor::wrap(DType::kFloat32, {4}, data, nullptr).owns_storage_alone());
    Tensor moved = std::move(t);
    CHECK(moved.owns_storage_alone());
  }

  TEST_CASE("a large buffer freed serves the next, larger request of a growing tensor") {
    // A tensor one row longer each time (a Loop's carried Concat) gets the block its previous
    // size freed, resident, instead of a new mapping faulted in afresh. Blocks that could serve
    // 45 MB are held first, so that the one freed below is the only candidate.
    std::vector<std::shared_ptr<void>> held;
    for (int k = 0; k < 9; ++k) held.push_back(aligned_buffer(45000000));
    auto first = aligned_buffer(40000000);
    REQUIRE(first);
    std::memset(first.get(), 1, 40000000);
    void* const address = first.get();
    first.reset();
    auto grown = aligned_buffer(45000000);
    REQUIRE(grown);
    CHECK(grown.get() == address);
    std::memset(grown.get(), 2, 45000000);  // all of it is writable
  }

  TEST_CASE("weight buffers: aligned, writable, apart; small ones share chunks, large own maps") {
    std::vector<std::shared_ptr<void>> bufs;
    const size_t sizes[] = {1, 100, 4096, 300000, 3 << 20, 64, 5 << 20, 1 << 20};
    for (size_t n : sizes) {
      auto b = weight_buffer(n);
      REQUIRE(b);
      CHECK(reinterpret_cast<uintptr_t>(b.get()) % 64 == 0);
      std::memset(b.get(), static_cast<int>(bufs.size() + 1), n);
      bufs.push_back(b);
    }
    // Nothing overlaps: each buffer still holds its own byte.
    for (size_t i = 0; i < bufs.size(); ++i) {
      const auto* p = static_cast<const uint8_t*>(bufs[i].get());
      CHECK(p[0] == i + 1);
      CHECK(p[sizes[i] - 1] == i + 1);
    }
    // Many small buffers fill several chunks; freeing them all in any order is safe.
    std::vector<std::shared_ptr<void>> small;
    for (int i = 0; i < 200; ++i) small.push_back(weight_buffer(200000));
    for (auto& b : small) REQUIRE(b);
    for (size_t i = 0; i < small.size(); i += 2) small[i].reset();
    bufs.clear();
    small.clear();
    auto again = weight_buffer(1000);
    REQUIRE(again);
    std::memset(again.get(), 7, 1000);
  }

  TEST_CASE("packed weights are advised for huge pages once written, not while being written") {
    // The VmFlags of the mapping holding address a ("hg": MADV_HUGEPAGE); empty when unreadable.
    auto flags_of = [](const void* a) {
      std::ifstream smaps("/proc/self/smaps");
      std::string line, flags;
      bool inside = false;
      const auto x = reinterpret_cast<uintptr_t>(a);
      while (std::getline(smaps, line)) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2) {  // a mapping's first line
          inside = x >= lo && x < hi;
        } else if (inside && line.rfind("VmFlags:", 0) == 0) {
          return line;
        }
      }
      return flags;
    };
    // Whether advice shows at all (qemu's user mode takes MADV_HUGEPAGE without passing it on).
    {
      auto probe = weight_buffer(size_t{4} << 20);
      REQUIRE(probe);
      advise_huge_pages(probe.get(), size_t{4} << 20);
      if (flags_of(probe.get()).find(" hg") == std::string::npos) {
        MESSAGE("skipped: this system does not show MADV_HUGEPAGE in /proc/self/smaps");
        return;
      }
    }
    std::string during;
    auto blob = packed_blob(size_t{3} << 20, "test huge", [&](float* out) {
      std::memset(out, 0, size_t{3} << 22);
      during = flags_of(out + (size_t{1} << 19));  // 2 MiB in: a whole huge page of the buffer
    });
    REQUIRE(blob);
    const std::string after = flags_of(static_cast<const uint8_t*>(blob->data.raw()) + (2 << 20));
    // Small ones share chunks: a chunk's 2 MiB pages are advised as its buffers complete them.
    std::vector<PackedData> small;
    bool advised = false;
    for (int i = 0; i < 12; ++i) {
      auto b = packed_blob(size_t{1} << 17, "test small",
                           [](float* out) { std::memset(out, 1, size_t{1} << 19); });
      REQUIRE(b);
      small.push_back(*b);
    }
    for (const PackedData& b : small)
      advised |= flags_of(b.data.raw()).find(" hg") != std::string::npos;
    CHECK(advised);
    CHECK(during.find(" hg") == std::string::npos);
    CHECK(after.find(" hg") != std::string::npos);
  }

  TEST_CASE("graph validation names cycles, undefined inputs and double definitions") {
    Graph g;
    int a = g.add_value("a"), b = g.add_value("b"), c = g.add_value("c");
    g.values[static_cast<size_t>(a)].type.dtype = DType::kFloat32;
    g.inputs = {a};
    g.nodes.push_back(Node{"n1", "Relu", "", {c}, {b}, {}});
    g.nodes.push_back(Node{"n2", "Relu", "", {b}, {c}, {}});
    g.outputs = {c};
    Status s = g.validate();
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message().find("cycle") != std::string::npos);

    Graph h;
    int x = h.add_value("x"), y = h.add_value("y"), z = h.add_value("z");
    h.inputs = {x};
    h.nodes.push_back(Node{"uses_z", "Relu", "", {z}, {y}, {}});
    h.outputs = {y};
    s = h.validate();
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message().find("'z' is not produced") != std::string::npos);

    h.nodes[0].inputs = {x};
    h.nodes.push_back(Node{"again", "Relu", "", {x}, {y}, {}});
    s = h.validate();
    CHECK(s.message().find("already defined") != std::string::npos);
  }

  TEST_CASE("memory plan reuses buffers whose readers have run and never overlaps live ones") {
    // A chain: buffer i is written by step i and read by step i + 1.
    std::vector<BufferRequest> chain;
    for (int i = 0; i < 10; ++i) chain.push_back({1000, i, i + 1});
    MemoryPlan p = plan_memory(chain);
    CHECK(p.naive_bytes == 10 * 1024);
    CHECK(p.arena_bytes == 2 * 1024);  // two alive at any step
    // Random lifetimes: any two buffers alive at the same step must not overlap.
    uint32_t seed = 7;
    std::vector<BufferRequest> reqs;
    for (int i = 0; i < 200; ++i) {
      seed = seed * 1664525u + 1013904223u;
      int first = static_cast<int>(seed % 50);
      int len = static_cast<int>((seed >> 8) % 10);
      reqs.push_back({static_cast<size_t>(64 + (seed >> 16) % 5000), first, first + len});
    }
    MemoryPlan q = plan_memory(reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      CHECK(q.offsets[i] % 64 == 0);
      for (size_t j = i + 1; j < reqs.size(); ++j) {
        bool live_together =
            reqs[i].first_step <= reqs[j].last_step && reqs[j].first_step <= reqs[i].last_step;
        bool overlap = q.offsets[i] < q.offsets[j] + reqs[j].bytes &&
                       q.offsets[j] < q.offsets[i] + reqs[i].bytes;
        if (live_together && overlap)
          FAIL("buffers ", i, " and ", j, " overlap while both are live (seed 7)");
      }
    }
    CHECK(q.arena_bytes < q.naive_bytes);
    // Device arenas: every offset a multiple of 256 (cuBLAS/cuBLASLt workspaces need it).
    MemoryPlan d = plan_memory(reqs, kDeviceArenaAlign);
    for (size_t i = 0; i < reqs.size(); ++i) CHECK(d.offsets[i] % 256 == 0);
    CHECK(d.naive_bytes > q.naive_bytes);
  }

  TEST_CASE("session: constant folding, shape math planned ahead, and the arena is reused") {
    // y = Relu(Reshape(x + (c1 * c2), Shape(x)[0:1] ++ [-1]))
    Graph g;
    g.opset = 13;
    ValueType xt{DType::kFloat32, true, {Dim{-1, "batch"}, Dim{4, ""}}};
    int x = g.add_value("x", xt);
    int c1 = g.add_value("c1"), c2 = g.add_value("c2");
    g.values[static_cast<size_t>(c1)].constant = make_f32({4}, {1, 2, 3, 4});
    g.values[static_cast<size_t>(c2)].constant = make_f32({4}, {-1, -1, -1, -1});
    int prod = g.add_value("prod"), sum = g.add_value("sum"), shp = g.add_value("shp");
    int head = g.add_value("head"), minus1 = g.add_value("minus1"), target = g.add_value("target");
    int starts = g.add_value("starts"), ends = g.add_value("ends");
    int reshaped = g.add_value("reshaped"), y = g.add_value("y");
    g.values[static_cast<size_t>(minus1)].constant = make_i64({1}, {-1});
    g.values[static_cast<size_t>(starts)].constant = make_i64({1}, {0});
    g.values[static_cast<size_t>(ends)].constant = make_i64({1}, {1});
    Attributes concat_axis;
    concat_axis.set("axis", attr_int(0));
    g.nodes.push_back(Node{"mul", "Mul", "", {c1, c2}, {prod}, {}});
    g.nodes.push_back(Node{"add", "Add", "", {x, prod}, {sum}, {}});
    g.nodes.push_back(Node{"shape", "Shape", "", {x}, {shp}, {}});
    g.nodes.push_back(Node{"slice", "Slice", "", {shp, starts, ends}, {head}, {}});
    g.nodes.push_back(Node{"concat", "Concat", "", {head, minus1}, {target}, concat_axis});
    g.nodes.push_back(Node{"reshape", "Reshape", "", {sum, target}, {reshaped}, {}});
    g.nodes.push_back(Node{"relu", "Relu", "", {reshaped}, {y}, {}});
    g.inputs = {x};
    g.outputs = {y};
    auto model = Model::create(std::move(g), nullptr, "test").value();
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(model, cfg).value();
    CHECK(session->folded_constant_count() == 1);  // the Mul of two constants

    for (int64_t batch : {1, 3}) {
      std::vector<float> xv;
      for (int64_t i = 0; i < batch * 4; ++i) xv.push_back(static_cast<float>(i % 5));
      Tensor xin = make_f32({batch, 4}, xv);
      std::vector<Tensor> out;
      REQUIRE(session->run({"x"}, {&xin}, {"y"}, &out).is_ok());
      CHECK(out[0].shape() == Shape{batch, 4});
      for (int64_t i = 0; i < batch * 4; ++i) {
        float expect = std::max(0.0f, xv[static_cast<size_t>(i)] - static_cast<float>(i % 4 + 1));
        CHECK(out[0].data<float>()[i] == expect);
      }
      // Only Add, Reshape and Relu run; Shape/Slice/Concat were computed while planning.
      auto plan = session->plan_for({{batch, 4}}).value();
      CHECK(plan->steps.size() == 3);
      CHECK(plan->arena_bytes < plan->naive_bytes + 1);
    }
  }

  TEST_CASE("session: an unknown op is UNSUPPORTED naming the node") {
    Graph g;
    int x = g.add_value("x", ValueType{DType::kFloat32, true, {Dim{1, ""}}});
    int y = g.add_value("y");
    g.nodes.push_back(Node{"mystery", "FrobnicateOp", "", {x}, {y}, {}});
    g.inputs = {x};
    g.outputs = {y};
    auto model = Model::create(std::move(g), nullptr, "test").value();
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto s = Session::create(model, cfg);
    CHECK(s.status().code() == Code::kUnsupported);
    CHECK(s.status().message().find("node 'mystery' (FrobnicateOp)") != std::string::npos);
  }
}
