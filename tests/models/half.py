"""float16 versions of corpus models: every float32 weight, constant and activation of an exported
float32 ONNX graph becomes float16, as `model.half()` would make it (PyTorch 1.13 cannot run or
export a half model on the CPU), with the graph's inputs and outputs kept float32 through Cast
nodes at both ends, as float16 exports meant for float32 callers have them. (bfloat16 models are
PyTorch's own `model.bfloat16()` exports, given the same float32 ends: vision.py.)
Inputs that ONNX types as float32 whatever the model's precision (Resize's roi and scales) stay
float32.
"""
import onnx
from onnx import TensorProto, helper, numpy_helper

F, H = TensorProto.FLOAT, TensorProto.FLOAT16
# (op, input index) that are float32 in every ONNX model.
FLOAT32_INPUTS = {("Resize", 1), ("Resize", 2), ("Upsample", 1)}


def _tensor_to_half(t):
    if t.data_type == F:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype("float16"), t.name))


def _graph_to_half(g):
    keep = {n.input[i] for n in g.node for (op, i) in FLOAT32_INPUTS
            if n.op_type == op and i < len(n.input)}
    for t in g.initializer:
        if t.name not in keep:
            _tensor_to_half(t)
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        if vi.type.tensor_type.elem_type == F and vi.name not in keep:
            vi.type.tensor_type.elem_type = H
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and not (n.op_type == "Constant" and
                                                              n.output[0] in keep):
                _tensor_to_half(a.t)
            elif a.type == onnx.AttributeProto.GRAPH:
                _graph_to_half(a.g)
            elif a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i == F:
                a.i = H


def to_half(model):
    """The model with float16 inside and float32 inputs and outputs."""
    g = model.graph
    inputs = [vi.name for vi in g.input if vi.type.tensor_type.elem_type == F]
    outputs = [vi.name for vi in g.output if vi.type.tensor_type.elem_type == F]
    _graph_to_half(g)
    return with_float32_ends(model, H, inputs, outputs)


def with_float32_ends(model, elem, inputs=None, outputs=None):
    """The model with its graph inputs and outputs of type `elem` (or those named) made float32,
    through Cast nodes at both ends: what a float16/bfloat16 export meant for float32 callers
    has."""
    g = model.graph
    if inputs is None:
        inputs = [vi.name for vi in g.input if vi.type.tensor_type.elem_type == elem]
    if outputs is None:
        outputs = [vi.name for vi in g.output if vi.type.tensor_type.elem_type == elem]
    suffix = "_bf16" if elem == TensorProto.BFLOAT16 else "_fp16"
    casts_in, casts_out = [], []
    for name in inputs:
        half = name + suffix
        for n in g.node:
            n.input[:] = [half if i == name else i for i in n.input]
        casts_in.append(helper.make_node("Cast", [name], [half], to=elem, name=half + "_cast"))
    for name in outputs:
        half = name + suffix
        for n in g.node:
            n.output[:] = [half if o == name else o for o in n.output]
            n.input[:] = [half if i == name else i for i in n.input]
        casts_out.append(helper.make_node("Cast", [half], [name], to=F, name=half + "_cast"))
    nodes = casts_in + list(g.node) + casts_out
    del g.node[:]
    g.node.extend(nodes)
    for vi in list(g.input) + list(g.output):
        if vi.name in inputs or vi.name in outputs:
            vi.type.tensor_type.elem_type = F
    onnx.checker.check_model(model)
    return model
