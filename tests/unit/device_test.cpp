// The device paths of the session (partitioning onto a device backend, copies inserted where
// device and host kernels meet, uploaded constants, the device arena, bound device inputs and
// outputs, captured and replayed segments) on a simulated device: host memory that the engine
// must treat as a device's. Its kernels refuse host tensors, so a missing copy fails the test.
// The CUDA backend goes through the same code; this suite runs on machines without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>

#include "backends/registry.h"
#include "c_api.h"
#include "core/kernel_registry.h"
#include "core/plan/memory_plan.h"
#include "core/session.h"
#include "graph_builder.h"

using namespace tern;
using tern_test::make_f32;
using tern_test::values_f32;

namespace {

struct SimCounters {
  int to_device = 0, to_host = 0, on_device = 0, captures = 0, replays = 0, allocs = 0;
  int capture_attempts = 0, begins = 0, ends = 0;
};

thread_local std::vector<std::function<void()>>* t_capturing = nullptr;

class SimDevice final : public Backend {
 public:
  explicit SimDevice(int index = 0) : index_(index), name_("simdev:" + std::to_string(index)) {}
  SimCounters n;
  bool fail_capture = false;  // capture() refuses, as a CUDA capture broken by an allocation does
  const char* name() const override { return name_.c_str(); }
  const char* kernel_backend() const override { return "simdev"; }
  bool is_built() const override { return true; }
  bool is_available() const override { return true; }
  Device device() const override { return {DeviceType::kSimulated, index_}; }
  void begin_run(const FlagValues&) override { ++n.begins; }
  void end_run(const FlagValues&) override { ++n.ends; }
  Expected<std::shared_ptr<void>> allocate(size_t bytes) override {
    ++n.allocs;
    auto p = aligned_buffer(bytes ? bytes : 1);
    if (p) std::memset(p.get(), 0xA5, bytes);  // garbage, as fresh device memory
    return p;
  }
  Status copy_to_device(const Tensor& host, Tensor& dev) override {
    if (!host.on_host() || dev.device() != device()) return internal_error("bad H2D copy");
    ++n.to_device;
    std::memcpy(dev.raw(), host.raw(), host.byte_size());
    return Status::ok();
  }
  Status copy_to_host(const Tensor& dev, Tensor& host) override {
    if (!host.on_host() || dev.device() != device()) return internal_error("bad D2H copy");
    ++n.to_host;
    std::memcpy(host.raw(), dev.raw(), host.byte_size());
    return Status::ok();
  }
  Status copy_on_device(const Tensor& src, Tensor& dst) override {
    ++n.on_device;
    std::memcpy(dst.raw(), src.raw(), src.byte_size());
    return Status::ok();
  }
  // Capture records the kernels' work instead of doing it; replay does the recorded work.
  bool can_capture() const override { return true; }
  Expected<std::shared_ptr<void>> capture(const std::function<Status()>& body) override {
    ++n.capture_attempts;
    auto list = std::make_shared<std::vector<std::function<void()>>>();
    t_capturing = list.get();
    Status st = body();
    t_capturing = nullptr;
    TERN_RETURN_IF_ERROR(st);
    // The recorded work is dropped, as a broken CUDA capture drops its launches.
    if (fail_capture) return internal_error("simdev: capture invalidated");
    ++n.captures;
    return std::static_pointer_cast<void>(list);
  }
  Status replay(void* captured) override {
    ++n.replays;
    for (auto& f : *static_cast<std::vector<std::function<void()>>*>(captured)) f();
    return Status::ok();
  }

 private:
  int index_;
  std::string name_;
};

// Queues `work` like a device kernel (recorded while capturing).
Status launch(std::function<void()> work) {
  if (t_capturing) {
    t_capturing->push_back(std::move(work));
  } else {
    work();
  }
  return Status::ok();
}

Status require_device(const KernelArgs& a) {
  for (const Tensor* t : a.inputs) {
    if (t && t->device().type != DeviceType::kSimulated) {
      return internal_error("simdev kernel got a tensor on ", t->device().name());
    }
  }
  for (const Tensor* t : a.outputs) {
    if (t && t->device().type != DeviceType::kSimulated) {
      return internal_error("simdev kernel writes a tensor on ", t->device().name());
    }
  }
  return Status::ok();
}

struct Empty {};

Expected<std::unique_ptr<Kernel>> sim_add(const OpContext& ctx) {
  if (ctx.inputs[0].shape != ctx.inputs[1].shape) return unsupported("simdev Add: broadcast");
  return make_kernel("sim_add", Empty{}, [](const Empty&, const KernelArgs& a, const ExecContext&) {
    TERN_RETURN_IF_ERROR(require_device(a));
    const float* x = a.inputs[0]->data<float>();
    const float* y = a.inputs[1]->data<float>();
    float* z = a.outputs[0]->data<float>();
    const int64_t n = a.outputs[0]->numel();
    return launch([=] {
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
    });
  });
}

// x [.., C] * w [C].
Expected<std::unique_ptr<Kernel>> sim_mul(const OpContext& ctx) {
  const Shape& w = ctx.inputs[1].shape;
  if (w.size() != 1 || ctx.inputs[0].shape.empty() || ctx.inputs[0].shape.back() != w[0]) {
    return unsupported("simdev Mul: a row vector only");
  }
  return make_kernel("sim_mul", Empty{}, [](const Empty&, const KernelArgs& a, const ExecContext&) {
    TERN_RETURN_IF_ERROR(require_device(a));
    const float* x = a.inputs[0]->data<float>();
    const float* row = a.inputs[1]->data<float>();
    float* z = a.outputs[0]->data<float>();
    const int64_t n = a.outputs[0]->numel(), c = a.inputs[1]->numel();
    return launch([=] {
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] * row[i % c];
    });
  });
}

Expected<std::unique_ptr<Kernel>> sim_relu(const OpContext&) {
  return make_kernel("sim_relu", Empty{},
                     [](const Empty&, const KernelArgs& a, const ExecContext&) {
                       TERN_RETURN_IF_ERROR(require_device(a));
                       const float* x = a.inputs[0]->data<float>();
                       float* z = a.outputs[0]->data<float>();
                       const int64_t n = a.outputs[0]->numel();
                       return launch([=] {
                         for (int64_t i = 0; i < n; ++i) z[i] = x[i] > 0 ? x[i] : 0;
                       });
                     });
}

SimDevice& sim() {
  static SimDevice d;
  static std::once_flag once;
  std::call_once(once, [] {
    KernelRegistry::global().add("Add", "simdev", DType::kFloat32, sim_add);
    KernelRegistry::global().add("Relu", "simdev", DType::kFloat32, sim_relu);
    KernelRegistry::global().add("Mul", "simdev", DType::kFloat32, sim_mul);
  });
  return d;
}

// A second simulated device, listed after the first: never chosen, so never used.
SimDevice& sim1() {
  static SimDevice d(1);
  return d;
}

// y = Relu(Softmax(Relu(x + W)) + x): Softmax has no simdev kernel, so the run goes
// device -> host -> device, and x is read on the device twice.
std::shared_ptr<const Model> chain_model() {
  Graph g;
  g.opset = 13;
  ValueType t{DType::kFloat32, true, {Dim{2, ""}, Dim{3, ""}}};
  const int x = g.add_value("x", t), w = g.add_value("w");
  g.values[static_cast<size_t>(w)].constant = make_f32({2, 3}, {1, -2, 3, -4, 5, -6});
  const int a = g.add_value("a"), r = g.add_value("r"), s = g.add_value("s");
  const int b = g.add_value("b"), y = g.add_value("y");
  g.nodes.push_back(Node{"add", "Add", "", {x, w}, {a}, {}});
  g.nodes.push_back(Node{"relu", "Relu", "", {a}, {r}, {}});
  g.nodes.push_back(Node{"softmax", "Softmax", "", {r}, {s}, {}});
  g.nodes.push_back(Node{"add2", "Add", "", {s, x}, {b}, {}});
  g.nodes.push_back(Node{"relu2", "Relu", "", {b}, {y}, {}});
  g.inputs = {x};
  g.outputs = {y};
  return Model::create(std::move(g), nullptr, "device_test").value();
}

std::vector<float> run_cpu(const Tensor& x) {
  SessionConfig cfg;
  cfg.backends = {backends::get("cpu").value()};
  auto s = Session::create(chain_model(), cfg).value();
  std::vector<Tensor> out;
  REQUIRE(s->run({"x"}, {&x}, {"y"}, &out).is_ok());
  return values_f32(out[0]);
}

std::unique_ptr<Session> sim_session(bool graphs = false) {
  SessionConfig cfg;
  cfg.backends = {&sim(), backends::get("cpu").value()};
  if (graphs) cfg.overrides.set(FlagId::kCudaGraphs, 1);
  return Session::create(chain_model(), cfg).value();
}

Tensor on_sim(const Tensor& host) {
  auto mem = sim().allocate(host.byte_size()).value();
  void* raw = mem.get();
  Tensor t = Tensor::wrap(host.dtype(), host.shape(), raw, std::move(mem), sim().device());
  REQUIRE(sim().copy_to_device(host, t).is_ok());
  return t;
}

}  // namespace

TEST_SUITE("core") {
  TEST_CASE("device partition: copies where device and host kernels meet, results as on the CPU") {
    const Tensor x = make_f32({2, 3}, {0.5f, 1, -1, 2, -3, 0.25f});
    const std::vector<float> want = run_cpu(x);
    auto s = sim_session();
    auto plan = s->plan_for({{2, 3}}).value();
    CHECK(plan->device_backend == &sim());
    CHECK(plan->device_steps == 4);  // add, relu, add2, relu2
    // x to the device (once, shared by both Adds), relu's output to the host for Softmax, and
    // Softmax's back; W is uploaded at planning, not copied per run.
    CHECK(plan->transfers == 3);
    CHECK(s->device_constant_count() == 1);  // the session's, not the plan's
    CHECK(plan->device_constants.empty());
    CHECK(plan->device_layout.bytes > 0);
    // Device buffers and workspaces at multiples of 256 bytes (the host arena's are of 64).
    for (size_t o : plan->device_layout.value_offset) CHECK(o % kDeviceArenaAlign == 0);
    for (size_t o : plan->device_layout.workspace_offset) CHECK(o % kDeviceArenaAlign == 0);
    const SimCounters before = sim().n;
    std::vector<Tensor> out;
    REQUIRE(s->run({"x"}, {&x}, {"y"}, &out).is_ok());
    REQUIRE(out.size() == 1);
    CHECK(out[0].on_host());
    CHECK(values_f32(out[0]) == want);
    CHECK(sim().n.to_device - before.to_device == 2);  // x, softmax
    CHECK(sim().n.to_host - before.to_host == 2);      // relu -> softmax, y at the end
    for (const PlanStep& st : plan->steps) {
      if (st.op_node->op_type == "Softmax") CHECK(std::string(st.backend->name()) == "cpu");
      if (st.op_node->op_type == "Relu") CHECK(std::string(st.backend->name()) == "simdev:0");
    }
  }

  TEST_CASE("device partition: bound device inputs are read in place; outputs can stay on it") {
    const Tensor x = make_f32({2, 3}, {3, -1, 0, 2, 7, -0.5f});
    const std::vector<float> want = run_cpu(x);
    auto s = sim_session();
    const Tensor xd = on_sim(x);
    const SimCounters before = sim().n;
    std::vector<Tensor> out;
    const Device dev = sim().device();
    REQUIRE(s->run({"x"}, {&xd}, {"y"}, &out, nullptr, &dev).is_ok());
    CHECK(sim().n.to_device - before.to_device == 1);  // only Softmax's output; x was there
    CHECK(sim().n.to_host - before.to_host == 1);      // only for Softmax
    REQUIRE(out[0].device() == dev);
    Tensor host = Tensor::allocate(DType::kFloat32, {2, 3}).value();
    REQUIRE(sim().copy_to_host(out[0], host).is_ok());
    CHECK(values_f32(host) == want);
    // Outputs on a device the session has no backend for are refused by name.
    const Device cuda{DeviceType::kCuda, 0};
    Status st = s->run({"x"}, {&x}, {"y"}, &out, nullptr, &cuda);
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("cuda:0") != std::string::npos);
  }

  TEST_CASE("device partition: a device input read by host kernels is staged to the host") {
    SessionConfig cfg;
    cfg.backends = {&sim(), backends::get("cpu").value()};
    Graph g;
    g.opset = 13;
    const int x = g.add_value("x", ValueType{DType::kFloat32, true, {Dim{4, ""}}});
    const int y = g.add_value("y");
    g.nodes.push_back(Node{"softmax", "Softmax", "", {x}, {y}, {}});
    g.inputs = {x};
    g.outputs = {y};
    auto s = Session::create(Model::create(std::move(g), nullptr, "t").value(), cfg).value();
    const Tensor xh = make_f32({4}, {1, 2, 3, 4});
    const Tensor xd = on_sim(xh);
    std::vector<Tensor> a, b;
    REQUIRE(s->run({"x"}, {&xh}, {"y"}, &a).is_ok());
    REQUIRE(s->run({"x"}, {&xd}, {"y"}, &b).is_ok());
    CHECK(values_f32(a[0]) == values_f32(b[0]));
    // A session without that device cannot read the tensor and says so.
    SessionConfig cpu_only;
    cpu_only.backends = {backends::get("cpu").value()};
    Graph g2;
    g2.opset = 13;
    const int x2 = g2.add_value("x", ValueType{DType::kFloat32, true, {Dim{4, ""}}});
    const int y2 = g2.add_value("y");
    g2.nodes.push_back(Node{"softmax", "Softmax", "", {x2}, {y2}, {}});
    g2.inputs = {x2};
    g2.outputs = {y2};
    auto c = Session::create(Model::create(std::move(g2), nullptr, "t").value(), cpu_only).value();
    Status st = c->run({"x"}, {&xd}, {"y"}, &b);
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("simulated:0") != std::string::npos);
  }

  TEST_CASE("device partition: a graph output kept in the device arena outlives its readers") {
    // a = x + w is an output and is read by the Relu; the arena must not give b (= Relu(a) + w)
    // a's memory, since a is copied out only when the run ends.
    Graph g;
    g.opset = 13;
    const int x = g.add_value("x", ValueType{DType::kFloat32, true, {Dim{2, ""}, Dim{3, ""}}});
    const int w = g.add_value("w");
    g.values[static_cast<size_t>(w)].constant = make_f32({2, 3}, {1, -2, 3, -4, 5, -6});
    const int a = g.add_value("a"), r = g.add_value("r"), b = g.add_value("b");
    const int c = g.add_value("c");
    g.nodes.push_back(Node{"add", "Add", "", {x, w}, {a}, {}});
    g.nodes.push_back(Node{"relu", "Relu", "", {a}, {r}, {}});
    g.nodes.push_back(Node{"add2", "Add", "", {r, w}, {b}, {}});
    g.nodes.push_back(Node{"relu2", "Relu", "", {b}, {c}, {}});
    g.inputs = {x};
    g.outputs = {a, c};
    auto model = Model::create(std::move(g), nullptr, "outputs").value();
    SessionConfig cfg;
    cfg.backends = {&sim(), backends::get("cpu").value()};
    auto s = Session::create(model, cfg).value();
    const Tensor in = make_f32({2, 3}, {0.5f, 1, -1, 2, -3, 0.25f});
    std::vector<Tensor> out;
    REQUIRE(s->run({"x"}, {&in}, {"a", "c"}, &out).is_ok());
    CHECK(values_f32(out[0]) == std::vector<float>{1.5f, -1, 2, -2, 2, -5.75f});
    CHECK(values_f32(out[1]) == std::vector<float>{2.5f, 0, 5, 0, 7, 0});
  }

  TEST_CASE("device partition: cuda.graphs captures each device stretch once per arena") {
    const Tensor x = make_f32({2, 3}, {1, 2, 3, -4, -5, 6});
    const std::vector<float> want = run_cpu(x);
    auto s = sim_session(/*graphs=*/true);
    const SimCounters before = sim().n;
    for (int i = 0; i < 3; ++i) {
      std::vector<Tensor> out;
      REQUIRE(s->run({"x"}, {&x}, {"y"}, &out).is_ok());
      CHECK(values_f32(out[0]) == want);
    }
    // Two stretches (add+relu, add2+relu2): the first run is eager, the second captures them and
    // every later run replays them.
    CHECK(sim().n.captures - before.captures == 2);
    CHECK(sim().n.replays - before.replays == 4);
    // Another input gives another result from the same captures (the addresses are the arena's).
    const Tensor x2 = make_f32({2, 3}, {-1, 0, 4, 4, 2, -2});
    std::vector<Tensor> out;
    REQUIRE(s->run({"x"}, {&x2}, {"y"}, &out).is_ok());
    CHECK(values_f32(out[0]) == run_cpu(x2));
    CHECK(sim().n.captures - before.captures == 2);
    // A bound device input changes the addresses the first stretch reads: captured anew.
    const Tensor xd = on_sim(x2);
    REQUIRE(s->run({"x"}, {&xd}, {"y"}, &out).is_ok());
    CHECK(values_f32(out[0]) == run_cpu(x2));
    CHECK(sim().n.captures - before.captures >= 3);
  }

  TEST_CASE("device partition: a failed capture runs the stretch eagerly, and is not tried again") {
    const Tensor x = make_f32({2, 3}, {1, -2, 3, -4, 5, -6});
    const std::vector<float> want = run_cpu(x);
    auto s = sim_session(/*graphs=*/true);
    sim().fail_capture = true;
    const SimCounters before = sim().n;
    for (int i = 0; i < 4; ++i) {
      std::vector<Tensor> out;
      const Status st = s->run({"x"}, {&x}, {"y"}, &out);
      REQUIRE_MESSAGE(st.is_ok(), st.message());
      CHECK(values_f32(out[0]) == want);
      // Run 1 is eager; run 2 tries both stretches once and runs them eagerly; no more tries.
      CHECK(sim().n.capture_attempts - before.capture_attempts == (i == 0 ? 0 : 2));
    }
    CHECK(sim().n.captures == before.captures);
    CHECK(sim().n.replays == before.replays);
    sim().fail_capture = false;
  }

  TEST_CASE("device partition: model constants go to the device once per session, for every plan") {
    // y = (x * w) + relu(x * w) with x [N, 3] of any N: one plan per N, one upload of w.
    Graph g;
    g.opset = 13;
    const int x = g.add_value("x", ValueType{DType::kFloat32, true, {Dim{-1, "n"}, Dim{3, ""}}});
    const int w = g.add_value("w");
    g.values[static_cast<size_t>(w)].constant = make_f32({3}, {2, -1, 0.5f});
    const int m = g.add_value("m"), r = g.add_value("r"), y = g.add_value("y");
    g.nodes.push_back(Node{"mul", "Mul", "", {x, w}, {m}, {}});
    g.nodes.push_back(Node{"relu", "Relu", "", {m}, {r}, {}});
    g.nodes.push_back(Node{"add", "Add", "", {m, r}, {y}, {}});
    g.inputs = {x};
    g.outputs = {y};
    SessionConfig cfg;
    cfg.backends = {&sim(), backends::get("cpu").value()};
    auto s = Session::create(Model::create(std::move(g), nullptr, "consts").value(), cfg).value();
    const SimCounters before = sim().n;
    for (int64_t n : {1, 2, 5, 2}) {
      Tensor in = Tensor::allocate(DType::kFloat32, {n, 3}).value();
      for (int64_t i = 0; i < in.numel(); ++i) in.data<float>()[i] = static_cast<float>(i) - 4;
      std::vector<Tensor> out;
      REQUIRE(s->run({"x"}, {&in}, {"y"}, &out).is_ok());
      const std::vector<float> got = values_f32(out[0]);
      for (int64_t i = 0; i < in.numel(); ++i) {
        const float v = in.data<float>()[i] * std::vector<float>{2, -1, 0.5f}[i % 3];
        CHECK(got[static_cast<size_t>(i)] == v + std::max(v, 0.0f));
      }
      CHECK(s->last_plan()->device_backend == &sim());
    }
    CHECK(s->device_constant_count() == 1);
    // w once; each run copies x in (4 runs).
    CHECK(sim().n.to_device - before.to_device == 1 + 4);
  }

  TEST_CASE("device partition: only the plan's device sees begin_run and end_run") {
    SessionConfig cfg;
    cfg.backends = {&sim(), &sim1(), backends::get("cpu").value()};
    auto s = Session::create(chain_model(), cfg).value();
    const SimCounters b0 = sim().n, b1 = sim1().n;
    const Tensor x = make_f32({2, 3}, {1, 2, 3, 4, 5, 6});
    std::vector<Tensor> out;
    REQUIRE(s->run({"x"}, {&x}, {"y"}, &out).is_ok());
    CHECK(values_f32(out[0]) == run_cpu(x));
    CHECK(sim().n.begins - b0.begins == 1);
    CHECK(sim().n.ends - b0.ends == 1);
    // A listed device the plan does not use must not make itself current (CUDA: cudaSetDevice).
    CHECK(sim1().n.begins == b1.begins);
    CHECK(sim1().n.ends == b1.ends);
  }
}

#if defined(TERN_HAVE_CUDA)
#include "backends/cuda/cuda_module.h"

TEST_SUITE("backends") {
  TEST_CASE(
      "CUDA build: the module's kernels for the models' ops, truthful answers without a device") {
    const CudaModule* m = backends::cuda_module();
    REQUIRE_MESSAGE(
        m, "the CUDA module of this build does not load: ", backends::record("cuda")->report());
    Backend& cuda = *m->backend(0);  // its kernels are in the module's registry; touches no device
    for (const char* op : {"Conv",
                           "FusedConv",
                           "ConvTranspose",
                           "MaxPool",
                           "AveragePool",
                           "GlobalAveragePool",
                           "MatMul",
                           "Gemm",
                           "FusedMatMul",
                           "Add",
                           "Mul",
                           "Div",
                           "Sub",
                           "Pow",
                           "Relu",
                           "Clip",
                           "HardSigmoid",
                           "HardSwish",
                           "Sigmoid",
                           "Tanh",
                           "Erf",
                           "Sqrt",
                           "Cast",
                           "Softmax",
                           "LayerNormalization",
                           "ReduceMean",
                           "Resize",
                           "Concat",
                           "Gather",
                           "Transpose",
                           "Slice",
                           "Reshape",
                           "Flatten",
                           "Unsqueeze",
                           "BatchNormalization",
                           "Attention"}) {
      CHECK_MESSAGE(cuda.supports_op(op), op);
    }
    CHECK(!cuda.supports_op("NonMaxSuppression"));  // falls back to the CPU
    // The module's kernels are not in libtern's registry.
    CHECK(!KernelRegistry::global().has_op("Conv", "cuda"));
    CHECK(cuda.device() == Device{DeviceType::kCuda, 0});
    CHECK(std::string(cuda.kernel_backend()) == "cuda");
    CHECK(m->backend(3) != m->backend(0));
    CHECK(m->backend(kMaxCudaDevices) == nullptr);
    if (tern_cuda_is_available()) return;
    MESSAGE("no CUDA device here: checking the refusals only");
    CHECK(!cuda.is_available());
    CHECK(m->device_count() == 0);
    auto b = backends::get("cuda:1");
    CHECK(b.status().code() == Code::kBackendUnavailable);
    CHECK(b.status().message().find("no CUDA device") != std::string::npos);
    CHECK(backends::get("cuda:x").status().code() == Code::kInvalidArgument);
    tern_sdp_params p{sizeof(tern_sdp_params), 1, 4, 128, 128, 64, TERN_FLOAT32, 0, 0, 0.0f};
    char why[256];
    CHECK(tern_sdp_can_use(TERN_SDP_MEM_EFFICIENT, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("no CUDA device") != std::string::npos);
    // What the CUDA kernels would refuse, as tern_sdp_can_use reports it with a device.
    ops::SdpCase c;
    c.batch = 1;
    c.heads = 4;
    c.seq_q = c.seq_kv = 128;
    c.head_dim = 64;
    CHECK(m->sdp_refusal(1, c).empty());
    c.head_dim = 200;
    CHECK(m->sdp_refusal(1, c).find("head_dim 200 > 128") != std::string::npos);
    CHECK(m->sdp_refusal(2, c).empty());
    c.dtype = DType::kFloat16;
    CHECK(m->sdp_refusal(0, c).find("MATH takes float32") != std::string::npos);
    CHECK(m->sdp_refusal(3, c).find("cuDNN fused attention") != std::string::npos);
  }
}
#endif
