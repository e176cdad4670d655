// The CPU-observable effects of the backends flags on kernels: SDPA (MATH / FLASH, run options,
// tern_sdp_can_use, the mha fastpath), opt_einsum paths, deterministic algorithms, oneDNN verbose,
// and the Transpose op the attention pattern needs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "backends_util.h"
#include "c_api.h"
#include "ops/einsum.h"
#include "test_util.h"

using namespace tern;
using namespace tern_test;

TEST_SUITE("backends") {
  TEST_CASE("sdpa: MATH and FLASH match the reference; selection by flags and run options") {
    FlagRestore restore;
    struct Case {
      const char* what;
      Shape q, k, v;
      int64_t qh = 0, kvh = 0;
      bool causal = false;
      int mask = 0;  // 0 none, 1 bool, 2 float
    };
    const Case cases[] = {
        {"4-D MHA", {2, 3, 70, 16}, {2, 3, 150, 16}, {2, 3, 150, 24}},
        {"4-D causal", {1, 2, 130, 32}, {1, 2, 130, 32}, {1, 2, 130, 32}, 0, 0, true},
        {"GQA + bool mask", {1, 4, 33, 8}, {1, 2, 200, 8}, {1, 2, 200, 8}, 0, 0, false, 1},
        {"3-D + float mask", {2, 17, 4 * 8}, {2, 19, 2 * 8}, {2, 19, 2 * 8}, 4, 2, true, 2},
    };
    for (const Case& c : cases) {
      CAPTURE(c.what);
      Attributes at;
      if (c.qh) {
        Attribute a;
        a.kind = Attribute::Kind::kInt;
        a.i = c.qh;
        at.set("q_num_heads", a);
        a.i = c.kvh;
        at.set("kv_num_heads", a);
      }
      if (c.causal) {
        Attribute a;
        a.kind = Attribute::Kind::kInt;
        a.i = 1;
        at.set("is_causal", a);
      }
      Builder b;
      int q = b.input("q", c.q), k = b.input("k", c.k), v = b.input("v", c.v);
      std::vector<int> ins = {q, k, v};
      const int64_t sq = c.q.size() == 4 ? c.q[2] : c.q[1];
      const int64_t skv = c.k.size() == 4 ? c.k[2] : c.k[1];
      Tensor mask;
      if (c.mask == 1) {
        mask = Tensor::allocate(DType::kBool, {sq, skv}).value();
        for (int64_t i = 0; i < mask.numel(); ++i)
          mask.data<bool>()[i] = (i * 7) % 5 != 0 || i % skv == 0;
        ins.push_back(b.input("m", {sq, skv}, DType::kBool));
      } else if (c.mask == 2) {
        mask = random_f32({c.q[0], 1, sq, skv}, 9, -2, 0);
        ins.push_back(b.input("m", mask.shape()));
      }
      int y = b.node("Attention", ins, at);
      auto s = b.session({y});
      Tensor qt = random_f32(c.q, 1), kt = random_f32(c.k, 2), vt = random_f32(c.v, 3);
      std::vector<std::string> names = {"q", "k", "v"};
      std::vector<const Tensor*> tensors = {&qt, &kt, &vt};
      if (c.mask) {
        names.push_back("m");
        tensors.push_back(&mask);
      }
      const std::string out = s->model().graph().value_name(y);
      // The reference kernel is the ground truth.
      SingleOp ref{"Attention", at, {qt, kt, vt}, {}, 23, 1};
      if (c.mask) ref.runtime.push_back(mask);
      auto expect = ref.run();
      REQUIRE(expect);
      std::vector<Shape> shapes;
      for (const Tensor* t : tensors) shapes.push_back(t->shape());
      FlagOverrides flash_only, math_only, none;
      for (auto* o : {&flash_only, &math_only, &none}) {
        o->set(FlagId::kSdpFlash, o == &flash_only);
        o->set(FlagId::kSdpMath, o == &math_only);
      }
      CHECK(kernels(*s, shapes, &flash_only)[0].rfind("flash.", 0) == 0);
      CHECK(kernels(*s, shapes, &math_only)[0].rfind("math.", 0) == 0);
      Tensor f = run(*s, names, tensors, out, &flash_only)[0];
      Tensor m = run(*s, names, tensors, out, &math_only)[0];
      CHECK(max_abs_diff(f, (*expect)[0]) < 2e-5f);
      CHECK(max_abs_diff(m, (*expect)[0]) < 2e-5f);
      std::vector<Tensor> res;
      Status st = s->run(names, tensors, {out}, &res, &none);
      CHECK(st.code() == Code::kInvalidArgument);
      CHECK(st.message().find("FLASH: disabled") != std::string::npos);
      // The global flags decide when a run says nothing: MATH while its score matrix fits (the
      // faster of the two on the CPU), FLASH when MATH is off.
      CHECK(kernels(*s, shapes)[0].rfind("math.", 0) == 0);
      REQUIRE(tern_sdp_enable(TERN_SDP_MATH, 0) == TERN_OK);
      CHECK(kernels(*s, shapes)[0].rfind("flash.", 0) == 0);
      REQUIRE(tern_sdp_enable(TERN_SDP_MATH, 1) == TERN_OK);
      // MATH plans one task's score rows (48 queries x the keys) per thread and the packed keys
      // and values; FLASH one block's scratch per thread, independent of the key length.
      auto pf = s->plan_for(shapes, s->flags(&flash_only)).value();
      auto pm = s->plan_for(shapes, s->flags(&math_only)).value();
      const size_t math_ws = pm->steps[0].kernel->workspace_bytes();
      const size_t flash_ws = pf->steps[0].kernel->workspace_bytes();
      CHECK(math_ws >= static_cast<size_t>(std::min<int64_t>(sq, 48) * skv * 4));
      CHECK(pm->arena_bytes + flash_ws >= pf->arena_bytes + math_ws);
    }
  }

  TEST_CASE("sdpa: FLASH takes over when MATH's score matrix would pass 64 MiB") {
    FlagRestore restore;
    Builder b;
    const Shape big{1, 4, 2100, 8};  // scores 1 * 4 * 2100 * 2100 * 4 bytes = 70.6 MB
    int q = b.input("q", big), k = b.input("k", big), v = b.input("v", big);
    int y = b.node("Attention", {q, k, v});
    auto s = b.session({y});
    const std::vector<Shape> shapes(3, big);
    CHECK(kernels(*s, shapes)[0].rfind("flash.", 0) == 0);
    FlagOverrides math_only;
    math_only.set(FlagId::kSdpFlash, 0);
    CHECK(kernels(*s, shapes, &math_only)[0].rfind("math.", 0) == 0);  // still allowed alone
  }

  TEST_CASE("sdpa: tern_sdp_can_use explains refusals") {
    // The answers are the first available device backend's with attention kernels, else the
    // CPU's: these are the CPU's (the cuda suite checks CUDA's).
    if (tern_cuda_is_available()) {
      MESSAGE("skipped: CUDA answers tern_sdp_can_use on this machine");
      return;
    }
    FlagRestore restore;
    tern_sdp_params p{};
    p.struct_size = sizeof p;
    p.batch = 1;
    p.num_heads = 8;
    p.seq_len_q = p.seq_len_kv = 512;
    p.head_dim = 64;
    p.dtype = TERN_FLOAT32;
    char why[256];
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &p, why, sizeof why) == 1);
    CHECK(std::string(why).empty());
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 1);
    CHECK(tern_sdp_can_use(TERN_SDP_MEM_EFFICIENT, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("CUDA") != std::string::npos);
    CHECK(tern_sdp_can_use(TERN_SDP_CUDNN, &p, why, sizeof why) == 0);
    p.dropout_p = 0.1f;
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("dropout") != std::string::npos);
    p.dropout_p = 0;
    p.dtype = TERN_FLOAT16;  // widened to float32 by the CPU kernels
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &p, why, sizeof why) == 1);
    p.dtype = TERN_FLOAT64;
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("float64") != std::string::npos);
    p.dtype = TERN_FLOAT32;
    p.head_dim = 4096;
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("head_dim") != std::string::npos);
    p.head_dim = 64;
    REQUIRE(tern_sdp_enable(TERN_SDP_FLASH, 0) == TERN_OK);
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("disabled") != std::string::npos);
    char small[8];
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, small, sizeof small) == 0);
    CHECK(std::strlen(small) == 7);  // truncated, terminated
    CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &p, nullptr, 0) == 0);
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, nullptr, why, sizeof why) == 0);
    p.struct_size = 8;
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &p, why, sizeof why) == 0);
    CHECK(std::string(why).find("struct_size") != std::string::npos);
  }

  TEST_CASE(
      "sdpa: with every backend disabled a run fails, also where only the portable kernel "
      "applies") {
    FlagRestore restore;
    const Shape qs{1, 2, 4, 8};
    // qk_matmul_output (output 3) runs only in the portable kernel, which is MATH.
    SingleOp op{"Attention", {}, {random_f32(qs, 1), random_f32(qs, 2), random_f32(qs, 3)},
                {},          23, 4};
    op.flags = {{FlagId::kSdpFlash, 0}};
    REQUIRE(op.run().has_value());  // MATH on
    op.flags = {{FlagId::kSdpFlash, 1}, {FlagId::kSdpMath, 0}};
    auto r = op.run();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.status().code() == Code::kInvalidArgument);
    CHECK(r.status().message().find("MATH is disabled") != std::string::npos);
    // The fused kernels refuse with the same status.
    SingleOp plain{
        "Attention", {}, {random_f32(qs, 1), random_f32(qs, 2), random_f32(qs, 3)}, {}, 23};
    plain.flags = {{FlagId::kSdpFlash, 0}, {FlagId::kSdpMath, 0}};
    auto rp = plain.run();
    REQUIRE_FALSE(rp.has_value());
    CHECK(rp.status().code() == Code::kInvalidArgument);
  }

  TEST_CASE("sdpa: tern_sdp_can_use takes every struct size from the first version's on") {
    struct Grown {  // a later header's struct: one more field
      tern_sdp_params v1;
      int64_t future;
    };
    Grown g{};
    g.v1.batch = 1;
    g.v1.num_heads = 2;
    g.v1.seq_len_q = g.v1.seq_len_kv = 16;
    g.v1.head_dim = 8;
    g.v1.dtype = TERN_FLOAT32;
    char why[256];
    for (size_t size : {TERN_SDP_PARAMS_SIZE_V1, sizeof(tern_sdp_params), sizeof(Grown)}) {
      g.v1.struct_size = size;
      CHECK_MESSAGE(tern_sdp_can_use(TERN_SDP_MATH, &g.v1, why, sizeof why) == 1, size, why);
    }
    g.future = 7;  // a field this library does not know, set: refused
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &g.v1, why, sizeof why) == 0);
    CHECK(std::string(why).find("struct_size") != std::string::npos);
    g.future = 0;
    g.v1.struct_size = 8192;
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &g.v1, why, sizeof why) == 0);
    g.v1.struct_size = TERN_SDP_PARAMS_SIZE_V1 - 1;
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &g.v1, why, sizeof why) == 0);
    g.v1.struct_size = sizeof(tern_sdp_params);
    for (float bad : {std::nanf(""), -0.5f, 1.0f}) {
      g.v1.dropout_p = bad;
      CHECK_MESSAGE(tern_sdp_can_use(TERN_SDP_MATH, &g.v1, why, sizeof why) == 0, bad);
      CHECK(std::string(why).find("dropout_p") != std::string::npos);
    }
    g.v1.dropout_p = 0;
    for (int causal : {0, 1}) {
      g.v1.is_causal = causal;
      g.v1.has_mask = 1 - causal;
      CHECK(tern_sdp_can_use(TERN_SDP_FLASH, &g.v1, why, sizeof why) == 1);
    }
    g.v1.is_causal = 2;
    CHECK(tern_sdp_can_use(TERN_SDP_MATH, &g.v1, why, sizeof why) == 0);
    CHECK(std::string(why).find("is_causal") != std::string::npos);
  }

  TEST_CASE("mha fastpath: MatMul-Softmax-MatMul becomes one Attention step") {
    FlagRestore restore;
    // PyTorch's export of softmax(q @ k.transpose(-2, -1) / sqrt(d) + mask) @ v.
    Builder b;
    const Shape qs = {2, 4, 48, 16};
    int q = b.input("q", qs), k = b.input("k", qs), v = b.input("v", qs);
    int mask = b.input("mask", {2, 1, 48, 48});
    Attribute perm;
    perm.kind = Attribute::Kind::kInts;
    perm.ints = {0, 1, 3, 2};
    int kt = b.node("Transpose", {k}, attrs1("perm", perm));
    int scores = b.node("MatMul", {q, kt});
    int scaled = b.node("Div", {scores, b.constant("sqrt_d", make_f32({}, {4.0f}))});
    int masked = b.node("Add", {scaled, mask});
    Attribute axis;
    axis.kind = Attribute::Kind::kInt;
    axis.i = -1;
    int probs = b.node("Softmax", {masked}, attrs1("axis", axis));
    int y = b.node("MatMul", {probs, v});
    auto s = b.session({y});
    CHECK(s->attention_pattern_count() == 1);
    Tensor qt = random_f32(qs, 1), ktt = random_f32(qs, 2), vt = random_f32(qs, 3);
    Tensor mt = random_f32({2, 1, 48, 48}, 4, -3, 0);
    const std::vector<Shape> shapes = {qs, qs, qs, {2, 1, 48, 48}};
    const std::string out = s->model().graph().value_name(y);
    const std::vector<std::string> names = {"q", "k", "v", "mask"};
    const std::vector<const Tensor*> ins = {&qt, &ktt, &vt, &mt};
    auto fused = s->plan_for(shapes).value();
    CHECK(fused->fused_attention == 1);
    CHECK(fused->steps.size() == 1);
    CHECK(std::string(fused->steps[0].kernel->name()).rfind("math.", 0) == 0);
    Tensor yf = run(*s, names, ins, out)[0];
    tern_mha_set_fastpath_enabled(0);
    auto plain = s->plan_for(shapes).value();
    CHECK(plain->fused_attention == 0);
    CHECK(plain->steps.size() == 6);
    Tensor yp = run(*s, names, ins, out)[0];
    CHECK(max_abs_diff(yf, yp) < 2e-5f);
    // A session can opt out on its own.
    tern_mha_set_fastpath_enabled(1);
    FlagOverrides off;
    off.set(FlagId::kMhaFastpath, 0);
    CHECK(s->plan_for(shapes, s->flags(&off)).value()->fused_attention == 0);
  }

  TEST_CASE("mha fastpath: nn.MultiheadAttention's export, heads folded into the batch") {
    FlagRestore restore;
    // PyTorch's MultiheadAttention exports q, k, v as [seq, batch * heads, dim] and writes
    // softmax((q^T / sqrt d) @ k.permute(1, 2, 0) + mask) @ v^T; K's Transpose [1, 2, 0] is split
    // into [1, 0, 2] and [0, 2, 1] for the fastpath.
    Builder b;
    const Shape qs = {24, 6, 16}, ks = {20, 6, 16};
    int q = b.input("q", qs), k = b.input("k", ks), v = b.input("v", ks);
    int mask = b.input("mask", {24, 20});
    Attribute perm;
    perm.kind = Attribute::Kind::kInts;
    perm.ints = {1, 0, 2};
    int qt = b.node("Div", {b.node("Transpose", {q}, attrs1("perm", perm)),
                            b.constant("sqrt_d", make_f32({}, {4.0f}))});
    int vt = b.node("Transpose", {v}, attrs1("perm", perm));
    perm.ints = {1, 2, 0};
    int kt = b.node("Transpose", {k}, attrs1("perm", perm));
    int scores =
        b.node("Mul", {b.node("MatMul", {qt, kt}), b.constant("one", make_f32({}, {1.0f}))});
    Attribute axis;
    axis.kind = Attribute::Kind::kInt;
    axis.i = -1;
    int probs = b.node("Softmax", {b.node("Add", {scores, mask})}, attrs1("axis", axis));
    int y = b.node("MatMul", {probs, vt});
    auto s = b.session({y});
    CHECK(s->optimizer_report().key_transposes_split == 1);
    CHECK(s->attention_pattern_count() == 1);
    Tensor tq = random_f32(qs, 5), tk = random_f32(ks, 6), tv = random_f32(ks, 7);
    Tensor tm = random_f32({24, 20}, 8, -3, 0);
    const std::vector<Shape> shapes = {qs, ks, ks, {24, 20}};
    const std::string out = s->model().graph().value_name(y);
    const std::vector<std::string> names = {"q", "k", "v", "mask"};
    const std::vector<const Tensor*> ins = {&tq, &tk, &tv, &tm};
    CHECK(s->plan_for(shapes).value()->fused_attention == 1);
    Tensor yf = run(*s, names, ins, out)[0];
    tern_mha_set_fastpath_enabled(0);
    CHECK(s->plan_for(shapes).value()->fused_attention == 0);
    Tensor yp = run(*s, names, ins, out)[0];
    CHECK(yf.shape() == Shape{6, 24, 16});
    CHECK(max_abs_diff(yf, yp) < 2e-5f);
  }

  TEST_CASE("mha fastpath: Swin's window attention, a Dropout between Softmax and MatMul") {
    FlagRestore restore;
    // torchvision's shifted_window_attention: q scaled before the product, a relative-position
    // bias broadcast over the windows, and dropout on the probabilities, exported as a Dropout
    // that becomes an Identity. The Identity is bypassed, so the pattern matches; one that is a
    // graph output stays.
    Builder b;
    const Shape qs = {6, 3, 49, 16};
    int q = b.input("q", qs), k = b.input("k", qs), v = b.input("v", qs);
    Attribute perm;
    perm.kind = Attribute::Kind::kInts;
    perm.ints = {0, 1, 3, 2};
    int qs_ = b.node("Mul", {q, b.constant("scale", make_f32({}, {0.25f}))});
    int kt = b.node("Transpose", {k}, attrs1("perm", perm));
    Tensor bias = random_f32({1, 3, 49, 49}, 9, -2, 2);
    int scores = b.node("Add", {b.node("MatMul", {qs_, kt}), b.constant("bias", bias)});
    Attribute axis;
    axis.kind = Attribute::Kind::kInt;
    axis.i = -1;
    int probs = b.node("Dropout", {b.node("Softmax", {scores}, attrs1("axis", axis))});
    int y = b.node("MatMul", {probs, v});
    int y_out = b.node("Identity", {y});
    auto s = b.session({y_out});
    CHECK(s->optimizer_report().identities_bypassed == 1);  // not the graph output's
    CHECK(s->attention_pattern_count() == 1);
    Tensor tq = random_f32(qs, 5), tk = random_f32(qs, 6), tv = random_f32(qs, 7);
    const std::vector<Shape> shapes = {qs, qs, qs};
    const std::string out = s->model().graph().value_name(y_out);
    const std::vector<std::string> names = {"q", "k", "v"};
    const std::vector<const Tensor*> ins = {&tq, &tk, &tv};
    CHECK(s->plan_for(shapes).value()->fused_attention == 1);
    Tensor yf = run(*s, names, ins, out)[0];
    tern_mha_set_fastpath_enabled(0);
    CHECK(s->plan_for(shapes).value()->fused_attention == 0);
    Tensor yp = run(*s, names, ins, out)[0];
    CHECK(yf.shape() == qs);
    CHECK(max_abs_diff(yf, yp) < 2e-5f);
  }

  TEST_CASE("opt_einsum: the path changes with the flags, the result does not") {
    FlagRestore restore;
    // ab,bc,cd->ad with a=d=200, b=c... left to right makes a 200x200 intermediate.
    const Shape sa = {200, 2}, sb = {2, 300}, sc = {300, 3};
    Builder b;
    int x = b.input("a", sa), y = b.input("b", sb), z = b.input("c", sc);
    Attribute eq;
    eq.kind = Attribute::Kind::kString;
    eq.s = "ab,bc,cd->ad";
    int out_id = b.node("Einsum", {x, y, z}, attrs1("equation", eq));
    auto s = b.session({out_id});
    Tensor ta = random_f32(sa, 1), tb = random_f32(sb, 2), tc = random_f32(sc, 3);
    const std::vector<Shape> shapes = {sa, sb, sc};
    const std::string out = s->model().graph().value_name(out_id);
    SingleOp ref{"Einsum", attrs1("equation", eq), {ta, tb, tc}, {}, 13, 1};
    auto expect = ref.run();
    REQUIRE(expect);
    std::string k_opt = kernels(*s, shapes)[0];
    Tensor r_opt = run(*s, {"a", "b", "c"}, {&ta, &tb, &tc}, out)[0];
    tern_opt_einsum_set_enabled(0);
    std::string k_ltr = kernels(*s, shapes)[0];
    Tensor r_ltr = run(*s, {"a", "b", "c"}, {&ta, &tb, &tc}, out)[0];
    tern_opt_einsum_set_enabled(1);
    REQUIRE(tern_opt_einsum_set_strategy("greedy") == TERN_OK);
    std::string k_greedy = kernels(*s, shapes)[0];
    MESSAGE(k_opt, " | ", k_ltr, " | ", k_greedy);
    CHECK(k_opt == "gemm.optimal(1,2)(0,3)");
    CHECK(k_ltr == "gemm.left_to_right(0,1)(2,3)");
    CHECK(k_greedy.rfind("gemm.greedy", 0) == 0);
    CHECK(max_abs_diff(r_opt, (*expect)[0]) < 1e-4f);
    CHECK(max_abs_diff(r_ltr, (*expect)[0]) < 1e-4f);
    // The cost model behind the choice.
    auto spec = ops::parse_einsum("ab,bc,cd->ad", shapes).value();
    auto opt = ops::einsum_path(spec, ops::EinsumStrategy::kOptimal);
    auto ltr = ops::einsum_path(spec, ops::EinsumStrategy::kLeftToRight);
    CHECK(opt.cost < ltr.cost / 10);
    CHECK(ops::einsum_strategy(true, 0, 5) == ops::EinsumStrategy::kGreedy);
    CHECK(ops::einsum_strategy(true, 0, 3) == ops::EinsumStrategy::kOptimal);
    CHECK(!ops::parse_einsum("ab,bc->ad", {sa, sb}));
    CHECK(!ops::parse_einsum("ab,bc->a", {sa, {3, 3}}));
  }

  TEST_CASE("deterministic algorithms: bitwise identical across runs and thread counts") {
    FlagRestore restore;
    Builder b;
    int x = b.input("x", {1, 8, 40, 40});
    int w = b.constant("w", random_f32({16, 8, 3, 3}, 5));
    Attribute pads;
    pads.kind = Attribute::Kind::kInts;
    pads.ints = {1, 1, 1, 1};
    int conv = b.node("Conv", {x, w}, attrs1("pads", pads));
    int r = b.constant("shape", make_i64({2}, {16 * 40, 40}));
    int flat = b.node("Reshape", {conv, r});
    int mm = b.node("MatMul", {flat, b.constant("w2", random_f32({40, 300}, 6))});
    Attribute axis;
    axis.kind = Attribute::Kind::kInt;
    axis.i = -1;
    int y = b.node("Softmax", {mm}, attrs1("axis", axis));
    auto s = b.session({y});
    Tensor xin = random_f32({1, 8, 40, 40}, 7);
    const std::string out = s->model().graph().value_name(y);
    const std::vector<Shape> shapes = {{1, 8, 40, 40}};
    CHECK(kernels(*s, shapes)[0].rfind(tern_onednn_is_available() ? "onednn" : "im2col_gemm", 0) ==
          0);
    REQUIRE(tern_use_deterministic_algorithms(1) == TERN_OK);
    CHECK(kernels(*s, shapes)[0] == "im2col_gemm");
    std::vector<Tensor> results;
    for (int threads : {1, 2, 3, 1, 2}) {
      REQUIRE(tern_set_num_threads(threads) == TERN_OK);
      results.push_back(run(*s, {"x"}, {&xin}, out)[0]);
    }
    for (const Tensor& t : results) CHECK(bitwise_equal(t, results[0]));
    REQUIRE(tern_use_deterministic_algorithms(0) == TERN_OK);
    Tensor fast = run(*s, {"x"}, {&xin}, out)[0];
    CHECK(max_abs_diff(fast, results[0]) < 1e-5f);
  }

  TEST_CASE("oneDNN verbose: on demand, and around one run only") {
    if (!tern_onednn_is_available()) return;
    FlagRestore restore;
    Builder b;
    // (8 input channels: over 4, conv_stem's, oneDNN's kernel runs it.)
    int x = b.input("x", {1, 8, 16, 16});
    int y = b.node("Conv", {x, b.constant("w", random_f32({8, 8, 3, 3}, 1))});
    auto s = b.session({y});
    Tensor xin = random_f32({1, 8, 16, 16}, 2);
    const std::string out = s->model().graph().value_name(y);
    // Captures what a run prints on stdout (oneDNN writes its verbose lines there).
    auto captured = [&](const FlagOverrides* rf) {
      return capture_stdout([&] { run(*s, {"x"}, {&xin}, out, rf); });
    };
    CHECK(captured(nullptr).find("onednn_verbose") == std::string::npos);
    REQUIRE(tern_onednn_set_verbose(TERN_VERBOSE_ON) == TERN_OK);
    std::string on = captured(nullptr);
    CHECK(on.find("onednn_verbose") != std::string::npos);
    CHECK(on.find("convolution") != std::string::npos);
    REQUIRE(tern_onednn_set_verbose(TERN_VERBOSE_OFF) == TERN_OK);
    CHECK(captured(nullptr).find("onednn_verbose") == std::string::npos);
    FlagOverrides one_run;
    one_run.set(FlagId::kOnednnVerbose, 1);
    CHECK(captured(&one_run).find("onednn_verbose") != std::string::npos);
    CHECK(captured(nullptr).find("onednn_verbose") == std::string::npos);
  }

  TEST_CASE("Transpose matches a hand computation") {
    Attribute perm;
    perm.kind = Attribute::Kind::kInts;
    perm.ints = {1, 2, 0};
    SingleOp op{"Transpose",
                attrs1("perm", perm),
                {make_f32({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})},
                {}};
    auto r = op.run();
    REQUIRE(r);
    CHECK((*r)[0].shape() == Shape{2, 3, 2});
    CHECK(values_f32((*r)[0]) == std::vector<float>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11});
    perm.ints = {0, 0, 1};
    SingleOp bad{
        "Transpose", attrs1("perm", perm), {make_f32({2, 2, 3}, std::vector<float>(12))}, {}};
    CHECK(bad.run().status().code() == Code::kInvalidModel);
  }
}
