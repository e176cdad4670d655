#include <algorithm>
#include <cstdlib>

#include "api/api_internal.h"
#include "backends/registry.h"
#include "core/plan/static_prefix.h"
#include "serialization/model_io.h"

using tern::Status;

extern "C" {

tern_status tern_session_options_create(tern_session_options** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(out, "out is NULL");
    *out = new tern_session_options();
    return Status::ok();
  });
}

void tern_session_options_destroy(tern_session_options* o) {
  delete o;
}

tern_status tern_session_options_set_backends(tern_session_options* o, const char* list) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    TERN_API_REQUIRE(list, "backend list is NULL");
    std::vector<std::string> names;
    std::string s(list);
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      std::string name =
          s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      TERN_API_REQUIRE(tern::backends::is_known(name), "unknown backend '", tern::shorten(name),
                       "' in \"", tern::shorten(s), "\" (known: cpu, cuda, cuda:N, vulkan, mps)");
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    o->backends = std::move(names);
    return Status::ok();
  });
}

tern_status tern_session_options_set_cpu_fallback(tern_session_options* o, int enabled) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    o->cpu_fallback = enabled != 0;
    return Status::ok();
  });
}

tern_status tern_session_options_set_num_threads(tern_session_options* o, int n) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    TERN_API_REQUIRE(n >= 0 && n <= 4096, "num_threads must be 0..4096, got ", n);
    if (n == 0) {
      o->flags.clear(tern::FlagId::kNumThreads);
    } else {
      o->flags.set(tern::FlagId::kNumThreads, n);
    }
    return Status::ok();
  });
}

tern_status tern_session_options_set_max_memory_bytes(tern_session_options* o, uint64_t bytes) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    o->max_memory_bytes = bytes;
    return Status::ok();
  });
}

tern_status tern_session_options_set_plan_cache_bytes(tern_session_options* o, uint64_t bytes) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    o->plan_cache_bytes = bytes;
    return Status::ok();
  });
}

tern_status tern_session_options_set_progress(tern_session_options* o, tern_progress_fn fn,
                                              void* ctx) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    o->progress = nullptr;
    if (fn) {
      o->progress = [fn, ctx](const char* stage, size_t done, size_t total) {
        fn(stage, done, total, ctx);
      };
    }
    return Status::ok();
  });
}

tern_status tern_session_options_set_num_interop_threads(tern_session_options* o, int n) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    TERN_API_REQUIRE(n >= 0 && n <= 4096, "num_interop_threads must be 0..4096, got ", n);
    if (n == 0) {
      o->flags.clear(tern::FlagId::kNumInteropThreads);
    } else {
      o->flags.set(tern::FlagId::kNumInteropThreads, n);
    }
    return Status::ok();
  });
}

tern_status tern_session_options_set_flag(tern_session_options* o, const char* name,
                                          const char* value) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    TERN_API_REQUIRE(name && value, "name or value is NULL");
    return o->flags.set(name, value, tern::FlagScope::kSession);
  });
}

tern_status tern_run_options_create(tern_run_options** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(out, "out is NULL");
    *out = new tern_run_options();
    return Status::ok();
  });
}

void tern_run_options_destroy(tern_run_options* r) {
  delete r;
}

tern_status tern_run_options_set_flag(tern_run_options* r, const char* name, const char* value) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(r, "run options is NULL");
    TERN_API_REQUIRE(name && value, "name or value is NULL");
    return r->flags.set(name, value, tern::FlagScope::kRun);
  });
}

tern_status tern_run_options_set_sdp_backends(tern_run_options* r, const tern_sdp_backend* list,
                                              size_t n) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(r, "run options is NULL");
    TERN_API_REQUIRE(n == 0 || list, "list is NULL with n = ", n);
    const tern::FlagId ids[] = {tern::FlagId::kSdpMath, tern::FlagId::kSdpFlash,
                                tern::FlagId::kSdpMemEfficient, tern::FlagId::kSdpCudnn};
    bool allowed[4] = {false, false, false, false};
    for (size_t i = 0; i < n; ++i) {
      int b = static_cast<int>(list[i]);
      TERN_API_REQUIRE(b >= 0 && b < 4, "list[", i, "] = ", b,
                       " is not a tern_sdp_backend (MATH=0, FLASH=1, MEM_EFFICIENT=2, CUDNN=3)");
      allowed[b] = true;
    }
    for (int b = 0; b < 4; ++b) r->flags.set(ids[b], allowed[b] ? 1 : 0);
    return Status::ok();
  });
}

tern_status tern_run_options_set_output_device(tern_run_options* r, const char* device) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(r, "run options are NULL");
    TERN_API_REQUIRE(device, "device is NULL");
    const std::string name = device;
    if (name == "cpu") {
      r->output_device = tern::Device{};
      return Status::ok();
    }
    // The name and the device's presence are checked here (as tern_tensor_create_on_device
    // does); whether the session runs there, at tern_session_run.
    auto b = tern::backends::get(name);
    if (!b) {
      if (b.status().code() == tern::Code::kInvalidArgument) return b.status();
      return b.status().with_prefix(tern::str_cat("output device '", tern::shorten(name), "'"));
    }
    r->output_device = (*b)->device();
    return Status::ok();
  });
}

tern_status tern_run_options_set_deadline_ms(tern_run_options* r, int64_t ms) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(r, "run options are NULL");
    TERN_API_REQUIRE(ms >= 0, "deadline_ms must be >= 0 (0: no deadline), got ", ms);
    r->deadline_ms = ms;
    return Status::ok();
  });
}

tern_status tern_run_options_cancel(tern_run_options* r) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(r, "run options are NULL");
    r->cancelled.store(true, std::memory_order_relaxed);
    return Status::ok();
  });
}

tern_status tern_run_options_clear_cancel(tern_run_options* r) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(r, "run options are NULL");
    r->cancelled.store(false, std::memory_order_relaxed);
    return Status::ok();
  });
}

tern_status tern_session_create(const tern_model* m, const tern_session_options* o,
                                tern_session** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(m, "model is NULL");
    TERN_API_REQUIRE(out, "out is NULL");
    tern_session_options defaults;
    const tern_session_options& opts = o ? *o : defaults;
    tern::SessionConfig cfg;
    std::vector<std::string> names = opts.backends;
    if (opts.cpu_fallback && std::find(names.begin(), names.end(), "cpu") == names.end()) {
      names.push_back("cpu");
    }
    for (const std::string& name : names) {
      TERN_ASSIGN_OR_RETURN(tern::Backend * b, tern::backends::get(name));
      cfg.backends.push_back(b);
    }
    TERN_ASSIGN_OR_RETURN(cfg.planning_host, tern::backends::get("cpu"));
    cfg.overrides = opts.flags;
    cfg.profile_path = opts.profile_path;
    cfg.max_memory_bytes = opts.max_memory_bytes;
    cfg.plan_cache_bytes = opts.plan_cache_bytes;
    // Creation optimizes the graph and, for static input shapes, prepares the kernels.
    const tern::ProgressScope progress(&opts.progress);
    TERN_ASSIGN_OR_RETURN(auto s, tern::Session::create(m->m, std::move(cfg)));
    *out = new tern_session{std::move(s), opts.progress};
    return Status::ok();
  });
}

}  // extern "C"

namespace {

// The part tern_session_run and tern_session_run_values share: argument checks and the run.
Status run_session(tern_session* s, const tern_run_options* r, const char* const* input_names,
                   const std::vector<const tern::Tensor*>& ins, const char* const* output_names,
                   size_t n_outputs, bool outputs_given, std::vector<tern::Tensor>* results) {
  // The deadline counts from here, the run's start.
  const tern::RunControl control(r ? &r->cancelled : nullptr, r ? r->deadline_ms : 0,
                                 tern::RunControl::Clock::now());
  TERN_API_REQUIRE(s, "session is NULL");
  TERN_API_REQUIRE(ins.empty() || input_names,
                   "input_names or inputs is NULL with n_inputs = ", ins.size());
  TERN_API_REQUIRE(n_outputs == 0 || (output_names && outputs_given),
                   "output_names or outputs is NULL with n_outputs = ", n_outputs);
  std::vector<std::string> in_names, out_names;
  for (size_t i = 0; i < ins.size(); ++i) {
    TERN_API_REQUIRE(input_names[i], "input_names[", i, "] is NULL");
    TERN_API_REQUIRE(ins[i], "inputs[", i, "] ('", input_names[i], "') is NULL");
    in_names.emplace_back(input_names[i]);
  }
  for (size_t j = 0; j < n_outputs; ++j) {
    TERN_API_REQUIRE(output_names[j], "output_names[", j, "] is NULL");
    out_names.emplace_back(output_names[j]);
  }
  const tern::ProgressScope progress(&s->progress);  // a run may build a plan
  return s->s->run(in_names, ins, out_names, results, r ? &r->flags : nullptr,
                   r ? &r->output_device : nullptr, &control);
}

}  // namespace

extern "C" {

tern_status tern_session_run(tern_session* s, const tern_run_options* r,
                             const char* const* input_names, const tern_tensor* const* inputs,
                             size_t n_inputs, const char* const* output_names, size_t n_outputs,
                             tern_tensor** outputs) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(n_inputs == 0 || inputs, "inputs is NULL with n_inputs = ", n_inputs);
    std::vector<const tern::Tensor*> ins;
    for (size_t i = 0; i < n_inputs; ++i) ins.push_back(inputs[i] ? &inputs[i]->t : nullptr);
    std::vector<tern::Tensor> results;
    TERN_RETURN_IF_ERROR(
        run_session(s, r, input_names, ins, output_names, n_outputs, outputs != nullptr, &results));
    for (size_t j = 0; j < results.size(); ++j) {
      if (tern::dtype_is_composite(results[j].dtype())) {
        return tern::unsupported("output '", output_names[j], "' is a ",
                                 tern::dtype_name(results[j].dtype()),
                                 "; run the session with tern_session_run_values");
      }
      if (!tern::dtype_in_c_api(static_cast<int32_t>(results[j].dtype()))) {
        return tern::unsupported("output '", output_names[j], "' has dtype ",
                                 tern::dtype_name(results[j].dtype()),
                                 ", which tern_dtype cannot express (string and the 8/4/2-bit "
                                 "quantization types are internal)");
      }
    }
    std::vector<std::unique_ptr<tern_tensor>> handles;
    for (auto& t : results)
      handles.push_back(std::make_unique<tern_tensor>(tern_tensor{std::move(t)}));
    for (size_t j = 0; j < n_outputs; ++j) outputs[j] = handles[j].release();
    return Status::ok();
  });
}

tern_status tern_session_run_values(tern_session* s, const tern_run_options* r,
                                    const char* const* input_names, const tern_value* const* inputs,
                                    size_t n_inputs, const char* const* output_names,
                                    size_t n_outputs, tern_value** outputs) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(n_inputs == 0 || inputs, "inputs is NULL with n_inputs = ", n_inputs);
    std::vector<const tern::Tensor*> ins;
    for (size_t i = 0; i < n_inputs; ++i) ins.push_back(inputs[i] ? &inputs[i]->t : nullptr);
    std::vector<tern::Tensor> results;
    TERN_RETURN_IF_ERROR(
        run_session(s, r, input_names, ins, output_names, n_outputs, outputs != nullptr, &results));
    for (size_t j = 0; j < results.size(); ++j) {
      const tern::DType dt = results[j].dtype();
      if (!tern::dtype_is_composite(dt) && !tern::dtype_in_c_api(static_cast<int32_t>(dt))) {
        return tern::unsupported("output '", output_names[j], "' has dtype ", tern::dtype_name(dt),
                                 ", which tern_dtype cannot express");
      }
    }
    std::vector<std::unique_ptr<tern_value>> handles;
    for (auto& t : results)
      handles.push_back(std::make_unique<tern_value>(tern_value{std::move(t)}));
    for (size_t j = 0; j < n_outputs; ++j) outputs[j] = handles[j].release();
    return Status::ok();
  });
}

tern_status tern_session_save_optimized(const tern_session* s, const char* path,
                                        size_t* packed_count) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(s, "session is NULL");
    TERN_API_REQUIRE(path, "path is NULL");
    if (!tern::serialization::tern_writer_built()) {
      return tern::serialization::tern_writer_refusal(path);
    }
    tern::Graph g;
    const size_t packed = s->s->optimized_graph(&g);
    TERN_RETURN_IF_ERROR(tern::serialization::save_tern(g, path));
    if (packed_count) *packed_count = packed;
    return Status::ok();
  });
}

void tern_session_destroy(tern_session* s) {
  delete s;
}

tern_status tern_session_options_enable_profiling(tern_session_options* o, const char* path) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    o->profile_path = path ? path : "";
    return Status::ok();
  });
}

tern_status tern_session_end_profiling(tern_session* s) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(s, "session is NULL");
    TERN_API_REQUIRE(s->s->profiler(),
                     "the session was not created with profiling "
                     "(tern_session_options_enable_profiling)");
    TERN_RETURN_IF_ERROR(s->s->profiler()->write());
    s->profile_written = true;
    return Status::ok();
  });
}

tern_status tern_session_memory_info(const tern_session* s, size_t* activation_bytes,
                                     size_t* packed_weight_bytes) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(s, "session is NULL");
    std::shared_ptr<const tern::Plan> plan = s->s->last_plan();
    TERN_API_REQUIRE(plan,
                     "the session has no plan yet: its input shapes are dynamic, so the plan is "
                     "built by the first run");
    // A dynamic plan's planned part is its static prefix (core/plan/static_prefix.h).
    if (activation_bytes) {
      *activation_bytes = plan->dynamic && plan->prefix
                              ? plan->prefix->runner->memory().last_plan_arena_bytes
                              : plan->arena_bytes;
    }
    if (packed_weight_bytes) {
      *packed_weight_bytes = plan->packed_weight_bytes + s->s->memory().packed_weight_bytes;
    }
    return Status::ok();
  });
}

tern_status tern_session_memory_stat(const tern_session* s, const char* name, uint64_t* value) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(s, "session is NULL");
    TERN_API_REQUIRE(name, "name is NULL");
    TERN_API_REQUIRE(value, "value is NULL");
    const tern::SessionMemory m = s->s->memory();
    const std::pair<const char*, size_t> stats[] = {{"plans", m.plans},
                                                    {"plan_bytes", m.plan_bytes},
                                                    {"packed_weight_bytes", m.packed_weight_bytes},
                                                    {"arena_bytes", m.arena_bytes},
                                                    {"full_plans", m.full_plans},
                                                    {"template_plans", m.template_plans}};
    std::string known;
    for (const auto& [n, v] : stats) {
      if (std::string(n) == name) {
        *value = v;
        return Status::ok();
      }
      known += tern::str_cat(known.empty() ? "" : ", ", n);
    }
    return tern::invalid_argument("unknown memory stat '", tern::api::shorten(name),
                                  "' (known: ", known, ")");
  });
}

}  // extern "C"
