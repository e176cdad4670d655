// Optional (opset 15), OptionalHasElement and OptionalGetElement (opsets 15 and 18): an optional
// holds a tensor, a sequence, or nothing (Tensor::optional). Opset 18 lets the last two take a
// tensor or a sequence as well (it then counts as present), and OptionalHasElement no input at all.
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct OptionalType {
  DType elem = DType::kUndefined, seq_elem = DType::kUndefined;
};

Status infer_optional(OpContext& ctx) {
  if (!ctx.has_input(0)) {
    const Attribute* t = ctx.attrs().find("type");
    if (!t || t->kind != Attribute::Kind::kType || t->ints.size() != 3) {
      return invalid_model("an Optional without input needs the attribute 'type'");
    }
  }
  ctx.set_output(0, DType::kOptional, {});
  ctx.outputs_from_run = true;
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_optional(const OpContext& ctx) {
  OptionalType t;
  if (ctx.has_input(0)) {
    t.elem = ctx.inputs[0].dtype;
    if (const Tensor* v = ctx.inputs[0].value; v && v->as_sequence()) {
      t.seq_elem = v->as_sequence()->elem;
    }
  } else {
    const Attribute* a = ctx.attrs().find("type");
    t.elem = static_cast<DType>(a->ints[0]);
    t.seq_elem = static_cast<DType>(a->ints[1]);
    if (t.elem == DType::kOptional) return invalid_model("an optional cannot hold an optional");
  }
  return make_kernel(
      "reference", t, [](OptionalType type, const KernelArgs& a, const ExecContext&) {
        const Tensor* in = a.inputs.empty() ? nullptr : a.inputs[0];
        if (in && in->dtype() == DType::kOptional)
          return invalid_argument("an optional of an optional");
        *a.outputs[0] = Tensor::optional(type.elem, type.seq_elem,
                                         in ? std::optional<Tensor>(*in) : std::nullopt);
        return Status::ok();
      });
}

// Whether input 0 holds something: an absent input no, a tensor or a sequence yes, an optional
// if it holds.
bool holds(const Tensor* in) {
  if (!in) return false;
  const OptionalData* o = in->as_optional();
  return !o || o->value != nullptr;
}

Status infer_has_element(OpContext& ctx) {
  if (ctx.has_input(0) && ctx.inputs[0].dtype == DType::kOptional && !ctx.inputs[0].value) {
    ctx.needs_values = true;
    return unsupported("the optional is computed at run time");
  }
  ctx.set_output(0, DType::kBool, {});
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_has_element(const OpContext&) {
  return make_kernel("reference", 0, [](int, const KernelArgs& a, const ExecContext&) {
    *a.outputs[0]->data<bool>() = holds(a.inputs.empty() ? nullptr : a.inputs[0]);
    return Status::ok();
  });
}

Status infer_get_element(OpContext& ctx) {
  const TensorInfo& in = ctx.inputs[0];
  if (in.dtype != DType::kOptional) {  // opset 18: a tensor or a sequence is its own element
    ctx.set_output(0, in.dtype, in.shape);
    ctx.outputs_from_run = dtype_is_composite(in.dtype);
    return Status::ok();
  }
  if (!in.value) {
    ctx.needs_values = true;
    return unsupported("the optional is computed at run time");
  }
  const OptionalData* o = in.value->as_optional();
  if (!o->value) {
    return invalid_argument("OptionalGetElement of an empty optional '", ctx.input_names[0], "'");
  }
  ctx.set_output(0, o->value->dtype(), o->value->shape());
  ctx.outputs_from_run = dtype_is_composite(o->value->dtype());
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_get_element(const OpContext&) {
  return make_kernel("reference", 0, [](int, const KernelArgs& a, const ExecContext&) -> Status {
    const Tensor* in = a.inputs[0];
    if (const OptionalData* o = in->as_optional()) {
      if (!o->value) return invalid_argument("OptionalGetElement of an empty optional");
      in = o->value.get();
    }
    Tensor* out = a.outputs[0];
    if (!out->defined()) {
      *out = *in;  // a sequence (immutable) or a tensor the kernel was asked to hand on
      return Status::ok();
    }
    ops::copy_elements(in->dtype(), in->raw(), 0, out->raw(), 0, in->numel());
    return Status::ok();
  });
}

}  // namespace

TERN_REGISTRATION void register_op_optional(OpRegistry& r) {
  r.add({"Optional", 0, 1, 1, 1, infer_optional, make_optional, {}, attrs("type")});
  r.add({"OptionalHasElement", 0, 1, 1, 1, infer_has_element, make_has_element, {}, attrs({})});
  r.add({"OptionalGetElement", 1, 1, 1, 1, infer_get_element, make_get_element, {}, attrs({})});
}

}  // namespace tern
