// serialization/: the .tern writer and loader (round trip, verification), the ONNX importer.
#include <doctest/doctest.h>

#if defined(TERN_HAVE_ONNX)
#include <onnx/onnx_pb.h>
#endif

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "backends_util.h"
#include "core/session.h"
#include "graph_builder.h"
#include "serialization/model_io.h"
#include "serialization/tern_generated.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

namespace {

// x -> Add(w) -> Relu -> z; with `attribute_kinds`, the Add carries an attribute of every kind
// (names no op declares: such a graph only round-trips through the format, loading refuses it).
Graph sample_graph(bool attribute_kinds = false) {
  Graph g;
  g.opset = 13;
  g.producer = "test";
  g.metadata.push_back({"author", "tern"});
  int x = g.add_value("x", ValueType{DType::kFloat32, true, {Dim{-1, "batch"}, Dim{3, ""}}});
  int w = g.add_value("w");
  g.values[static_cast<size_t>(w)].constant = make_f32({3}, {1, 2, 3});
  int y = g.add_value("y");
  int z = g.add_value("z");
  Attributes a;
  if (attribute_kinds) {
    a.set("i", attr_int(-7));
    a.set("f", attr_float(0.5f));
    a.set("s", attr_string("text"));
    a.set("ints", attr_ints({1, 2, 3}));
    Attribute floats;
    floats.kind = Attribute::Kind::kFloats;
    floats.floats = {1.5f, -2};
    a.set("floats", floats);
    Attribute strings;
    strings.kind = Attribute::Kind::kStrings;
    strings.strings = {"a", "bc"};
    a.set("strings", strings);
    Attribute t;
    t.kind = Attribute::Kind::kTensor;
    t.t = make_i64({2}, {5, 6});
    a.set("t", t);
  }
  g.nodes.push_back(Node{"add", "Add", "", {x, w}, {y}, a});
  g.nodes.push_back(Node{"relu", "Relu", "", {y}, {z}, {}});
  g.inputs = {x};
  g.outputs = {z};
  return g;
}

// Rebuilds a .tern image after `edit` changes the unpacked model (FlatBuffers object API-free:
// we patch the written file's scalar fields in place through the generated accessors).
Status load_bytes(std::vector<uint8_t> bytes) {
  auto keep = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  auto g = serialization::load_tern(keep, keep->data(), keep->size());
  if (!g) return g.status();
  return Model::create(std::move(*g), keep, "tern").status();
}

}  // namespace

TEST_SUITE("serialization") {
  TEST_CASE(
      ".tern round trip keeps values, symbolic dims, attributes and metadata; weights aligned") {
    Graph g = sample_graph(true);
    REQUIRE(serialization::save_tern(g, "rt.tern").is_ok());
    // Loading a model checks the attributes against the op's schema: these are no Add's.
    auto refused = serialization::load_model_file("rt.tern");
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.status().message().find("attribute") != std::string::npos);
    // The format itself, read in place from 64-byte aligned memory (as a mapping is).
    const std::vector<uint8_t> bytes = read_bytes("rt.tern");
    std::shared_ptr<void> mem(std::aligned_alloc(64, (bytes.size() + 63) / 64 * 64), std::free);
    std::memcpy(mem.get(), bytes.data(), bytes.size());
    auto loaded =
        serialization::load_tern(mem, static_cast<const uint8_t*>(mem.get()), bytes.size());
    REQUIRE_MESSAGE(loaded.has_value(), loaded.status().message());
    const Graph& h = *loaded;
    CHECK(h.opset == 13);
    CHECK(h.producer == "test");
    CHECK(h.metadata == g.metadata);
    REQUIRE(h.values.size() == g.values.size());
    CHECK(h.values[0].type.dims[0].symbol == "batch");
    CHECK(h.values[0].type.dims[0].value == -1);
    CHECK(h.values[0].type.dims[1].value == 3);
    const Tensor& w = *h.values[1].constant;
    CHECK(reinterpret_cast<uintptr_t>(w.raw()) % 64 == 0);  // used in place from the memory
    CHECK(values_f32(w) == std::vector<float>{1, 2, 3});
    const Attributes& a = h.nodes[0].attrs;
    CHECK(a.get_int("i", 0).value() == -7);
    CHECK(a.get_float("f", 0).value() == 0.5f);
    CHECK(a.get_string("s", "").value() == "text");
    CHECK(a.get_ints("ints").value() == std::vector<int64_t>{1, 2, 3});
    CHECK(a.get_floats("floats").value() == std::vector<float>{1.5f, -2});
    CHECK(a.find("strings")->strings == std::vector<std::string>{"a", "bc"});
    CHECK(a.find("t")->t.data<int64_t>()[1] == 6);
    // Without them the model loads, its inputs' dims symbolic.
    REQUIRE(serialization::save_tern(sample_graph(), "rt.tern").is_ok());
    auto m = serialization::load_model_file("rt.tern");
    REQUIRE_MESSAGE(m.has_value(), m.status().message());
    CHECK((*m)->inputs()[0].dims == std::vector<int64_t>{-1, 3});
    std::remove("rt.tern");
  }

  TEST_CASE("format versions: 1 without subgraphs, 2 with; files of format 1 still load and run") {
    // A file written by a format-1 library (the fuzz seed, committed before format 2).
    const std::vector<uint8_t> old = read_bytes(matmul_seed_model());
    REQUIRE(old.size() > 8);
    CHECK(fb::GetModel(old.data())->format_version() == 1);
    auto keep = std::make_shared<std::vector<uint8_t>>(old);
    auto g = serialization::load_tern(keep, keep->data(), keep->size());
    REQUIRE_MESSAGE(g.has_value(), g.status().message());
    CHECK(Model::create(std::move(*g), keep, "tern").has_value());
    // Written now: a graph without subgraphs stays readable by format-1 readers.
    REQUIRE(serialization::save_tern(sample_graph(), "v1.tern").is_ok());
    const std::vector<uint8_t> plain = read_bytes("v1.tern");
    std::remove("v1.tern");
    CHECK(fb::GetModel(plain.data())->format_version() == 1);
    // A graph whose node holds a subgraph needs format 2, and its subgraph comes back.
    Graph with = sample_graph();
    auto branch = std::make_shared<Graph>();
    branch->opset = with.opset;
    const int in = branch->add_value("z");
    const int out = branch->add_value("z2");
    branch->nodes.push_back(Node{"neg", "Neg", "", {in}, {out}, {}});
    branch->inputs = {in};
    branch->captured = 1;
    branch->outputs = {out};
    Attribute a;
    a.kind = Attribute::Kind::kGraph;
    a.g = branch;
    with.nodes[1].attrs.set("branch", a);
    with.nodes[1].inputs.push_back(with.nodes[0].outputs[0]);  // the captured value
    REQUIRE(serialization::save_tern(with, "v2.tern").is_ok());
    const std::vector<uint8_t> v2 = read_bytes("v2.tern");
    std::remove("v2.tern");
    CHECK(fb::GetModel(v2.data())->format_version() == 2);
    auto keep2 = std::make_shared<std::vector<uint8_t>>(v2);
    auto g2 = serialization::load_tern(keep2, keep2->data(), keep2->size());
    REQUIRE_MESSAGE(g2.has_value(), g2.status().message());
    const Attribute* back = g2->nodes[1].attrs.find("branch");
    REQUIRE(back != nullptr);
    REQUIRE(back->g != nullptr);
    CHECK(back->g->captured == 1);
    CHECK(back->g->nodes[0].op_type == "Neg");
    CHECK(g2->nodes[1].inputs.size() == 2);
  }

  TEST_CASE("the loader rejects a newer format version, bad segments and bad indices by name") {
    REQUIRE(serialization::save_tern(sample_graph(), "v.tern").is_ok());
    const std::vector<uint8_t> good = read_bytes("v.tern");
    std::remove("v.tern");
    CHECK(load_bytes(good).is_ok());

    auto patched = [&](auto mutate) {
      std::vector<uint8_t> b = good;
      auto* model = fb::GetMutableModel(b.data());
      mutate(model);
      return load_bytes(b);
    };
    Status s =
        patched([](fb::Model* m) { m->mutate_format_version(serialization::kFormatVersion + 1); });
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message().find(str_cat("format version ", serialization::kFormatVersion + 1)) !=
          std::string::npos);

    s = patched(
        [](fb::Model* m) { m->mutable_segments()->GetMutableObject(0)->mutate_length(1 << 30); });
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message().find("segment 0") != std::string::npos);

    s = patched([](fb::Model* m) { m->mutable_segments()->GetMutableObject(0)->mutate_offset(8); });
    CHECK(s.message().find("unaligned") != std::string::npos);

    s = patched([](fb::Model* m) {
      m->mutable_graph()->mutable_nodes()->GetMutableObject(1)->mutable_inputs()->Mutate(0, 99);
    });
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message().find("node 1 'relu' (Relu): an input refers to value 99") !=
          std::string::npos);

    s = patched([](fb::Model* m) {
      m->mutable_graph()->mutable_nodes()->GetMutableObject(0)->mutable_outputs()->Mutate(0, -2);
    });
    CHECK(s.message().find("node 0 'add' (Add): an output refers to value -2") !=
          std::string::npos);

    s = patched([](fb::Model* m) { m->mutable_graph()->mutable_outputs()->Mutate(0, 7); });
    CHECK(s.message().find("a graph output refers to value 7") != std::string::npos);

    // "w" renamed "x": two values of one name
    s = patched([](fb::Model* m) {
      auto* name = m->mutable_graph()->mutable_values()->GetMutableObject(1)->mutable_name();
      REQUIRE(name->size() == 1);
      *reinterpret_cast<char*>(name->data()) = 'x';
    });
    CHECK(s.message().find("value 1 'x': names must be non-empty and unique") != std::string::npos);

    // relu reads its own output: a cycle
    s = patched([](fb::Model* m) {
      m->mutable_graph()->mutable_nodes()->GetMutableObject(0)->mutable_inputs()->Mutate(0, 3);
    });
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message().find("cycle") != std::string::npos);

    s = patched([](fb::Model* m) {
      m->mutable_graph()->mutable_values()->GetMutableObject(1)->mutate_dtype(99);
    });
    CHECK(s.message().find("value 1 'w': dtype 99 is not valid") != std::string::npos);
  }

  TEST_CASE("the loader names a bad attribute by its node and name") {
    REQUIRE(serialization::save_tern(sample_graph(true), "a.tern").is_ok());
    std::vector<uint8_t> b = read_bytes("a.tern");
    std::remove("a.tern");
    auto* attrs = fb::GetMutableModel(b.data())
                      ->mutable_graph()
                      ->mutable_nodes()
                      ->GetMutableObject(0)
                      ->mutable_attributes();
    bool found = false;
    for (flatbuffers::uoffset_t k = 0; k < attrs->size(); ++k) {
      if (attrs->Get(k)->name()->str() != "i") continue;
      attrs->GetMutableObject(k)->mutate_kind(static_cast<fb::AttributeKind>(99));
      found = true;
    }
    REQUIRE(found);
    const Status s = load_bytes(b);
    CHECK(s.code() == Code::kInvalidModel);
    CHECK_MESSAGE(
        s.message().find("node 0 'add' (Add): attribute 'i': unknown attribute kind 99") !=
            std::string::npos,
        s.message());
  }

  TEST_CASE(".tern packed layouts: round trip in place; bad segments, keys and owners refused") {
    Graph g = sample_graph();
    Tensor blob = Tensor::allocate(DType::kUInt8, {100}).value();
    for (int i = 0; i < 100; ++i) blob.data<uint8_t>()[i] = static_cast<uint8_t>(i);
    g.values[1].packed.push_back(PackedData{"kernel v1", blob});
    g.values[1].packed.push_back(PackedData{"kernel v2", make_f32({2}, {1, 2})});
    REQUIRE(serialization::save_tern(g, "p.tern").is_ok());
    const std::vector<uint8_t> good = read_bytes("p.tern");
    {
      auto m = serialization::load_model_file("p.tern");
      REQUIRE_MESSAGE(m.has_value(), m.status().message());
      const Value& w = (*m)->graph().values[1];
      REQUIRE(w.packed.size() == 2);
      CHECK(w.packed[0].key == "kernel v1");
      CHECK(w.packed[0].data.byte_size() == 100);
      CHECK(reinterpret_cast<uintptr_t>(w.packed[0].data.raw()) % 64 == 0);
      CHECK(std::memcmp(w.packed[0].data.raw(), blob.raw(), 100) == 0);
      CHECK(w.packed[1].data.byte_size() == 8);
      CHECK(values_f32(*w.constant) == std::vector<float>{1, 2, 3});
    }
    std::remove("p.tern");
    auto patched = [&](auto mutate) {
      std::vector<uint8_t> b = good;
      mutate(fb::GetMutableModel(b.data())->mutable_graph()->mutable_values());
      return load_bytes(b);
    };
    Status s = patched([](auto* values) {
      values->GetMutableObject(1)->mutable_packed()->GetMutableObject(0)->mutate_segment(7);
    });
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message().find("packed data 0 segment 7 out of range") != std::string::npos);
    s = patched([](auto* values) {
      values->GetMutableObject(1)->mutable_packed()->GetMutableObject(1)->mutate_segment(-1);
    });
    CHECK(s.message().find("packed data 1 segment -1") != std::string::npos);
    // The packed data belongs to a constant: move the constant's segment away from value 1.
    s = patched([](auto* values) { values->GetMutableObject(1)->mutate_segment(-1); });
    CHECK(s.code() == Code::kInvalidModel);
    CHECK(s.message().find("not a constant") != std::string::npos);
    // A graph value holding packed data without a constant cannot be written either.
    Graph bad = sample_graph();
    bad.values[2].packed.push_back(PackedData{"k", blob});
    CHECK(serialization::save_tern(bad, "bad.tern").code() == Code::kInternal);
  }

  TEST_CASE("fuzzer regressions: every saved input is refused with a message or round-trips") {
    // Inputs tests/fuzz found crashing, undefined or inconsistent (kept per target); under the
    // sanitizer builds they must stay clean.
    const std::string dir = std::string(TERN_SOURCE_DIR) + "/tests/fuzz/regressions";
    size_t count = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      const std::vector<uint8_t> bytes = read_bytes(entry.path().string());
      auto m = serialization::load_model_memory(bytes.data(), bytes.size());
      INFO(entry.path().string());
      ++count;
      if (!m) {
        CHECK(!m.status().message().empty());
        // A few bytes claiming a huge tensor are refused before anything is allocated.
        CHECK(m.status().code() != Code::kOutOfMemory);
        continue;
      }
      // What loads saves as .tern and loads again (the fuzz targets' invariant).
      REQUIRE(serialization::save_tern((*m)->graph(), "regression.tern").is_ok());
      auto again = serialization::load_model_file("regression.tern");
      CHECK_MESSAGE(again.has_value(), again.status().message());
      std::remove("regression.tern");
    }
    CHECK(count >= 2);
  }

#if defined(TERN_HAVE_ONNX)  // the ONNX importer's own cases
  TEST_CASE("ONNX import: Constant nodes become constants, unknown ops are named, opset read") {
    onnx::ModelProto mp;
    mp.set_ir_version(8);
    auto* opset = mp.add_opset_import();
    opset->set_domain("");
    opset->set_version(13);
    auto* g = mp.mutable_graph();
    auto* in = g->add_input();
    in->set_name("x");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(1);
    tt->mutable_shape()->add_dim()->set_dim_param("n");
    auto* c = g->add_node();
    c->set_op_type("Constant");
    c->add_output("two");
    auto* ca = c->add_attribute();
    ca->set_name("value_float");
    ca->set_type(onnx::AttributeProto::FLOAT);
    ca->set_f(2.0f);
    auto* mul = g->add_node();
    mul->set_op_type("Mul");
    mul->set_name("times_two");
    mul->add_input("x");
    mul->add_input("two");
    mul->add_output("y");
    g->add_output()->set_name("y");
    std::string bytes = mp.SerializeAsString();
    auto model = serialization::load_model_memory(bytes.data(), bytes.size());
    REQUIRE_MESSAGE(model.has_value(), model.status().message());
    CHECK((*model)->graph().opset == 13);
    CHECK((*model)->graph().nodes.size() == 1);  // the Constant became a value
    CHECK((*model)->inputs()[0].dims == std::vector<int64_t>{-1});

    mul->set_op_type("NoSuchOp");
    bytes = mp.SerializeAsString();
    auto bad = serialization::load_model_memory(bytes.data(), bytes.size());
    CHECK(bad.status().code() == Code::kUnsupported);
    CHECK(bad.status().message().find("node 'times_two' (NoSuchOp)") != std::string::npos);

    // Subgraphs nested deeper than the limit are refused by name, not by a stack overflow.
    mul->set_op_type("Mul");
    onnx::AttributeProto* level = mul->add_attribute();
    for (int depth = 0; depth < 20; ++depth) {
      level->set_name("body");
      level->set_type(onnx::AttributeProto::GRAPH);
      onnx::NodeProto* inner = level->mutable_g()->add_node();
      inner->set_op_type("Identity");
      inner->add_input("x");
      inner->add_output(str_cat("y", depth));
      level = inner->add_attribute();
    }
    bytes = mp.SerializeAsString();
    bad = serialization::load_model_memory(bytes.data(), bytes.size());
    CHECK(bad.status().code() == Code::kInvalidModel);
    CHECK_MESSAGE(bad.status().message().find("nest deeper than") != std::string::npos,
                  bad.status().message());

    // An opset newer than the importer knows is refused by number; the newest known loads.
    mul->mutable_attribute()->Clear();
    opset->set_version(99999);
    bytes = mp.SerializeAsString();
    bad = serialization::load_model_memory(bytes.data(), bytes.size());
    CHECK(bad.status().code() == Code::kUnsupported);
    CHECK(bad.status().message().find("opset 99999") != std::string::npos);
    opset->set_version(28);
    bytes = mp.SerializeAsString();
    CHECK(serialization::load_model_memory(bytes.data(), bytes.size()).has_value());
  }

  TEST_CASE("ONNX tensors: raw data of the wrong size is INVALID_MODEL naming the tensor") {
    onnx::TensorProto t;
    t.set_name("w");
    t.set_data_type(1);
    t.add_dims(4);
    t.set_raw_data(std::string(12, '\0'));
    onnx::ModelProto mp;
    mp.add_opset_import()->set_version(13);
    *mp.mutable_graph()->add_initializer() = t;
    mp.mutable_graph()->add_output()->set_name("w");
    std::string bytes = mp.SerializeAsString();
    auto m = serialization::load_model_memory(bytes.data(), bytes.size());
    CHECK(m.status().code() == Code::kInvalidModel);
    CHECK(m.status().message().find("initializer 'w'") != std::string::npos);
  }
  TEST_CASE("ONNX initializers: large raw data moves into the graph, values and runs unchanged") {
    // W [256, 300] float32 (300 KiB of raw data: moved, not copied) and b [300] (copied), then
    // y = x W + b run on the CPU against a double-precision sum.
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> w(256 * 300), b(300), x(256);
    for (float& v : w) v = u(rng);
    for (float& v : b) v = u(rng);
    for (float& v : x) v = u(rng);
    onnx::ModelProto mp;
    mp.set_ir_version(8);
    mp.add_opset_import()->set_version(13);
    auto* g = mp.mutable_graph();
    auto add_init = [&](const char* name, std::vector<int64_t> dims, const std::vector<float>& v) {
      onnx::TensorProto* t = g->add_initializer();
      t->set_name(name);
      t->set_data_type(1);
      for (int64_t d : dims) t->add_dims(d);
      t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    };
    add_init("w", {256, 300}, w);
    add_init("b", {300}, b);
    auto* in = g->add_input();
    in->set_name("x");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(1);
    tt->mutable_shape()->add_dim()->set_dim_value(1);
    tt->mutable_shape()->add_dim()->set_dim_value(256);
    auto* mm = g->add_node();
    mm->set_op_type("MatMul");
    mm->add_input("x");
    mm->add_input("w");
    mm->add_output("xw");
    auto* add = g->add_node();
    add->set_op_type("Add");
    add->add_input("xw");
    add->add_input("b");
    add->add_output("y");
    g->add_output()->set_name("y");
    std::string bytes = mp.SerializeAsString();
    auto model = serialization::load_model_memory(bytes.data(), bytes.size());
    REQUIRE_MESSAGE(model.has_value(), model.status().message());
    const Graph& graph = (*model)->graph();
    for (const auto& [name, want] : {std::pair{"w", &w}, std::pair{"b", &b}}) {
      const Tensor* t = nullptr;
      for (const auto& v : graph.values) {
        if (v.name == name && v.constant) t = &*v.constant;
      }
      REQUIRE(t != nullptr);
      REQUIRE(t->numel() == static_cast<int64_t>(want->size()));
      CHECK(std::memcmp(t->raw(), want->data(), want->size() * 4) == 0);
    }
    SessionConfig cfg;
    cfg.backends.push_back(backends::get("cpu").value());
    auto session = Session::create(*model, cfg).value();
    Tensor xin = Tensor::allocate(DType::kFloat32, {1, 256}).value();
    std::memcpy(xin.raw(), x.data(), x.size() * 4);
    std::vector<Tensor> out;
    REQUIRE(session->run({"x"}, {&xin}, {"y"}, &out).is_ok());
    double worst = 0;
    for (int j = 0; j < 300; ++j) {
      double acc = b[static_cast<size_t>(j)];
      for (int k = 0; k < 256; ++k)
        acc += double(x[static_cast<size_t>(k)]) * w[static_cast<size_t>(k * 300 + j)];
      worst = std::max(worst, std::fabs(acc - out[0].data<float>()[j]));
    }
    CHECK(worst < 1e-4);
    // A large raw_data of the wrong size is still refused by name before anything moves.
    g->mutable_initializer(0)->mutable_raw_data()->resize(256 * 300 * 4 - 4);
    bytes = mp.SerializeAsString();
    auto bad = serialization::load_model_memory(bytes.data(), bytes.size());
    CHECK(bad.status().code() == Code::kInvalidModel);
    CHECK(bad.status().message().find("initializer 'w'") != std::string::npos);
  }

  TEST_CASE("ONNX external data: a malformed offset is INVALID_MODEL, an escaping path refused") {
    onnx::ModelProto mp;
    mp.add_opset_import()->set_version(13);
    onnx::TensorProto* t = mp.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(1);
    t->add_dims(2);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = t->add_external_data();
    loc->set_key("location");
    loc->set_value("w.bin");
    auto* off = t->add_external_data();
    off->set_key("offset");
    off->set_value("12abc");
    mp.mutable_graph()->add_output()->set_name("w");
    {
      std::ofstream f("ext.onnx", std::ios::binary);
      f << mp.SerializeAsString();
    }
    auto m = serialization::load_model_file("ext.onnx");
    CHECK(m.status().code() == Code::kInvalidModel);
    CHECK(m.status().message().find("offset '12abc'") != std::string::npos);
    loc->set_value("../etc/passwd");
    off->set_value("0");
    {
      std::ofstream f("ext.onnx", std::ios::binary);
      f << mp.SerializeAsString();
    }
    m = serialization::load_model_file("ext.onnx");
    CHECK(m.status().code() == Code::kInvalidModel);
    CHECK(m.status().message().find("relative path inside") != std::string::npos);
    std::remove("ext.onnx");
  }
#endif
}
