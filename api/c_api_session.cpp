#include <algorithm>
#include <cstdlib>

#include "api/api_internal.h"
#include "backends/registry.h"
#include "core/threading.h"

using tern::Status;

namespace {

tern::Expected<int> parse_int(const char* name, const char* value) {
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (!*value || *end != '\0' || v < 0 || v > 4096) {
    return tern::invalid_argument("option '", name, "' needs an integer 0..4096, got '", value,
                                  "'");
  }
  return static_cast<int>(v);
}

}  // namespace

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
      const auto& known = tern::backends::known_names();
      TERN_API_REQUIRE(std::find(known.begin(), known.end(), name) != known.end(),
                       "unknown backend '", name, "' in \"", s,
                       "\" (known: cpu, cuda, vulkan, mps)");
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (std::find(names.begin(), names.end(), "cpu") == names.end()) names.push_back("cpu");
    o->backends = std::move(names);
    return Status::ok();
  });
}

tern_status tern_session_options_set_num_threads(tern_session_options* o, int n) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    TERN_API_REQUIRE(n >= 0 && n <= 4096, "num_threads must be 0..4096, got ", n);
    o->num_threads = n;
    return Status::ok();
  });
}

tern_status tern_session_options_set_num_interop_threads(tern_session_options* o, int n) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    TERN_API_REQUIRE(n >= 0 && n <= 4096, "num_interop_threads must be 0..4096, got ", n);
    o->num_interop_threads = n;
    return Status::ok();
  });
}

tern_status tern_session_options_set_flag(tern_session_options* o, const char* name,
                                          const char* value) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(o, "options is NULL");
    TERN_API_REQUIRE(name && value, "name or value is NULL");
    std::string key(name);
    if (key == "num_threads") {
      TERN_ASSIGN_OR_RETURN(o->num_threads, parse_int(name, value));
    } else if (key == "num_interop_threads") {
      TERN_ASSIGN_OR_RETURN(o->num_interop_threads, parse_int(name, value));
    } else {
      return tern::invalid_argument("unknown session option '", key,
                                    "' (known: num_threads, num_interop_threads)");
    }
    return Status::ok();
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

tern_status tern_session_create(const tern_model* m, const tern_session_options* o,
                                tern_session** out) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(m, "model is NULL");
    TERN_API_REQUIRE(out, "out is NULL");
    tern_session_options defaults;
    const tern_session_options& opts = o ? *o : defaults;
    tern::SessionConfig cfg;
    for (const std::string& name : opts.backends) {
      TERN_ASSIGN_OR_RETURN(tern::Backend * b, tern::backends::get(name));
      cfg.backends.push_back(b);
    }
    cfg.num_threads = opts.num_threads > 0 ? opts.num_threads : tern::default_num_threads();
    TERN_ASSIGN_OR_RETURN(auto s, tern::Session::create(m->m, std::move(cfg)));
    *out = new tern_session{std::move(s)};
    return Status::ok();
  });
}

tern_status tern_session_run(tern_session* s, const tern_run_options* r,
                             const char* const* input_names, const tern_tensor* const* inputs,
                             size_t n_inputs, const char* const* output_names, size_t n_outputs,
                             tern_tensor** outputs) {
  return tern::api::guard([&]() -> Status {
    TERN_API_REQUIRE(s, "session is NULL");
    TERN_API_REQUIRE(n_inputs == 0 || (input_names && inputs),
                     "input_names or inputs is NULL with n_inputs = ", n_inputs);
    TERN_API_REQUIRE(n_outputs == 0 || (output_names && outputs),
                     "output_names or outputs is NULL with n_outputs = ", n_outputs);
    std::vector<std::string> in_names, out_names;
    std::vector<const tern::Tensor*> ins;
    for (size_t i = 0; i < n_inputs; ++i) {
      TERN_API_REQUIRE(input_names[i], "input_names[", i, "] is NULL");
      TERN_API_REQUIRE(inputs[i], "inputs[", i, "] ('", input_names[i], "') is NULL");
      in_names.emplace_back(input_names[i]);
      ins.push_back(&inputs[i]->t);
    }
    for (size_t j = 0; j < n_outputs; ++j) {
      TERN_API_REQUIRE(output_names[j], "output_names[", j, "] is NULL");
      out_names.emplace_back(output_names[j]);
    }
    std::vector<tern::Tensor> results;
    TERN_RETURN_IF_ERROR(s->s->run(in_names, ins, out_names, &results));
    std::vector<std::unique_ptr<tern_tensor>> handles;
    for (auto& t : results)
      handles.push_back(std::make_unique<tern_tensor>(tern_tensor{std::move(t)}));
    for (size_t j = 0; j < n_outputs; ++j) outputs[j] = handles[j].release();
    return Status::ok();
  });
}

void tern_session_destroy(tern_session* s) {
  delete s;
}

}  // extern "C"
