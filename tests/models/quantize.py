#!/usr/bin/python3
"""Quantized versions of the trained models in ../shared/models, for int8 inference tests: ONNX's
QDQ form (QuantizeLinear/DequantizeLinear pairs around float ops, laid out as ONNX Runtime's own
quantizer lays them out) and one QOperator model, written by our own rewriter (python3-onnx and
numpy; no onnxruntime.quantization).

  tests/models/quantize.py [--out DIR] [NAME ...]

NAME (default: all) is one of CASES: resnet18_qdq, mobilenet_v2_qdq, tiny_bert_qdq (QDQ) and
resnet18_qop (QOperator). Writes DIR/NAME.onnx (default ~/.cache/tern/models) and prints, for the
model's reference input and eight held-out random inputs, how far ONNX Runtime's outputs of the
quantized model are from those of the float model (max abs diff, and top-1 agreement for
classifiers). tests/models/check_corpus.py makes and checks the corpus cases of these models.

QDQ rewriting (`quantize_qdq`):
- Weights of Conv, MatMul and Gemm (constant initializers): int8, symmetric (zero point 0, range
  [-127, 127]), one scale per output channel (Conv: axis 0; MatMul's [K, N]: axis 1; Gemm's B:
  axis 0 with transB, else 1), stored as int8 initializers read through DequantizeLinear(axis).
  Biases of Conv and Gemm: int32, scale input_scale * weight_scale[channel], zero point 0.
  Other constant inputs of quantized ops (a BERT bias Add's vector): uint8 per tensor, as
  activations.
- Activations: uint8 per tensor, asymmetric: scale (max - min) / 255 and zero point round(-min /
  scale) from the calibrated min and max, the range widened to hold 0. A QuantizeLinear ->
  DequantizeLinear pair follows every tensor that is an input or output of Conv, MatMul, Gemm,
  Add, Concat, MaxPool, AveragePool, GlobalAveragePool, and every graph output. Add counts only on
  the network's main path (an input made by Conv/MatMul/Gemm or by a quantized Add: residuals and
  bias Adds), so the Adds inside decomposed LayerNorms, GELUs (x/sqrt2 -> Erf -> +1) and the
  attention mask stay float, as LayerNormalization, Gelu and Softmax do: DequantizeLinear before,
  QuantizeLinear after. Tensors reached only through Reshape/Transpose/Flatten/Squeeze/Unsqueeze/
  MaxPool from a quantized tensor share its scale and zero point (these ops only move values).
  A Relu, or a Clip with minimum 0, that is the only reader of a quantized op's output is dropped,
  as ONNX Runtime's quantizer drops it: the op's output takes the activation's (calibrated) range,
  zero point 0, and QuantizeLinear's saturation does the clipping, exactly.
- Calibration: the float model, every tensor to be quantized made a graph output, run by ONNX
  Runtime (../shared/tools/ort_reference/make_reference.py) on the reference input and three
  random ones (float inputs standard normal; integer inputs uniform over the reference's range,
  0/1 masks kept); min/max over all runs.
QOperator form (`to_qoperator`, ResNet-18): from the QDQ model, each DQ -> Conv -> Q becomes
QLinearConv (uint8 in and out, per-channel int8 weights, int32 bias), MaxPool and Flatten run on
uint8 (their scales are shared), the classifier's Gemm becomes QLinearMatMul (per-column int8
weights; its output range calibrated from the calibration runs' inputs) -> DequantizeLinear -> Add
bias, and the residual Adds and the global pooling stay DQ -> float op -> Q (QLinearAdd and
QLinearGlobalAveragePool are com.microsoft ops, which this corpus avoids).
The models keep opset 13 (DequantizeLinear's axis).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED_MODELS = os.path.join(ROOT, "..", "shared", "models")
MAKE_REFERENCE = os.path.join(ROOT, "..", "shared", "tools", "ort_reference", "make_reference.py")

# name -> (model folder under ../shared/models, form, classifier outputs: compared by arg-max)
CASES = {
    "resnet18_qdq": ("resnet18", "qdq", ("logits",)),
    "mobilenet_v2_qdq": ("mobilenet_v2", "qdq", ("logits",)),
    "tiny_bert_qdq": ("tiny_bert", "qdq", ()),
    "resnet18_qop": ("resnet18", "qop", ("logits",)),
}
QUANT_OPS = {"Conv", "MatMul", "Gemm", "Add", "Concat", "MaxPool", "AveragePool",
             "GlobalAveragePool"}
LINEAR_OPS = {"Conv", "MatMul", "Gemm"}
# Ops that only move values: their output shares the input's scale and zero point.
MOVE_OPS = {"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "MaxPool"}
# Ops whose output differs from the input by no more than the input's change (outputs' steps).
LIPSCHITZ_OPS = {"Tanh", "Relu", "Identity", "Flatten", "Reshape", "Transpose", "Squeeze",
                 "Unsqueeze", "Sigmoid"}
CALIBRATION_RUNS = 3  # random inputs besides the reference input
HELD_OUT_SEEDS = tuple(range(101, 109))


def base_folder(name):
    return os.path.join(SHARED_MODELS, CASES[name][0])


def missing(name):
    """Why NAME cannot be made here ('' when it can)."""
    path = os.path.join(base_folder(name), "model.onnx")
    return "" if os.path.exists(path) else f"{os.path.normpath(path)} is absent"


def reference_inputs(folder):
    """The inputs of a case folder's test_data_set_0, by graph input name, in order."""
    model = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    return {n: numpy_helper.to_array(onnx.load_tensor(
        os.path.join(folder, "test_data_set_0", f"input_{k}.pb"))) for k, n in enumerate(names)}


def random_inputs(ref, seed):
    """Inputs like REF's: float ones standard normal, integer ones uniform over REF's range
    (0/1 masks kept as they are)."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, v in ref.items():
        if v.dtype.kind == "f":
            out[k] = rng.standard_normal(v.shape).astype(v.dtype)
        elif v.max() <= 1:
            out[k] = v
        else:
            out[k] = rng.integers(v.min(), v.max() + 1, v.shape).astype(v.dtype)
    return out


def ort_node():
    if os.environ.get("ORT_NODE"):
        return os.environ["ORT_NODE"]
    import importlib.machinery
    loader = importlib.machinery.SourceFileLoader(
        "compare_ort", os.path.join(ROOT, "tests", "bench", "compare_ort"))
    return loader.load_module().ensure_ort()


ORT_TYPES = {np.dtype(t): t for t in ("float32", "int64", "int32", "int8", "uint8")}


def run_ort(model_path, feeds, optimization="basic"):
    """ONNX Runtime's outputs (CPU provider, one thread, graph optimisation level OPTIMIZATION:
    'basic' runs QuantizeLinear/DequantizeLinear as float ops, as make_reference.py's references
    do; 'all' fuses them with their neighbours into int8 kernels) of a model for FEEDS."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = {"model": os.path.abspath(model_path), "optimization": optimization, "inputs": []}
        for k, (name, v) in enumerate(feeds.items()):
            v = np.ascontiguousarray(v)
            v.tofile(os.path.join(tmp, f"in{k}.bin"))
            spec["inputs"].append({"name": name, "dtype": ORT_TYPES[v.dtype],
                                   "shape": list(v.shape), "file": f"in{k}.bin"})
        with open(os.path.join(tmp, "spec.json"), "w") as f:
            json.dump(spec, f)
        p = subprocess.run(["node", os.path.join(HERE, "ort_outputs.js"),
                            os.path.join(tmp, "spec.json"), os.path.join(tmp, "out")],
                           env=dict(os.environ, ORT_NODE=ort_node()), capture_output=True,
                           text=True)
        if p.returncode != 0:
            raise RuntimeError(f"ONNX Runtime failed on {model_path}: {p.stderr.strip()}")
        types = {v: k for k, v in ORT_TYPES.items()}
        return {o["name"]: np.fromfile(os.path.join(tmp, "out", o["file"]),
                                       types[o["dtype"]]).reshape(o["shape"])
                for o in json.load(open(os.path.join(tmp, "out", "outputs.json")))}


# ---------------------------------------------------------------------------------------------
# Graph analysis


def _fold_identities(model):
    """Identity nodes that rename an initializer (PyTorch's shared weights): readers read the
    initializer."""
    g = model.graph
    inits = {i.name for i in g.initializer}
    outputs = {o.name for o in g.output}
    alias = {}
    keep = []
    for n in g.node:
        if n.op_type == "Identity" and n.input[0] in inits and n.output[0] not in outputs:
            alias[n.output[0]] = n.input[0]
        else:
            keep.append(n)
    for n in keep:
        for i, x in enumerate(n.input):
            if x in alias:
                n.input[i] = alias[x]
    del g.node[:]
    g.node.extend(keep)


def _constants(g):
    """name -> array of the initializers and Constant nodes' values."""
    c = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            c[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return c


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


class Plan:
    """What to quantize in a float graph: activation tensors (in order), the constant inputs of
    quantized nodes and their roles, the activations dropped (Relu/Clip), and which activation's
    scale each tensor shares. Nodes are named by their index in the graph."""

    def __init__(self, model):
        g = model.graph
        self.consts = _constants(g)
        inits = {i.name for i in g.initializer}
        self.producer = {o: k for k, n in enumerate(g.node) for o in n.output}
        readers = {}
        for k, n in enumerate(g.node):
            for x in n.input:
                readers.setdefault(x, []).append(k)
        graph_outputs = {o.name for o in g.output}
        self.acts = []          # activation tensors to quantize, in graph order
        self.weights = {}       # (node, input index) -> role: weight axis / bias / const
        self.dropped = set()    # Relu/Clip nodes whose output the producer now writes
        self.renamed = {}       # producer's output -> the dropped node's output
        quantized_adds = set()

        def add_act(t):
            if t and t not in self.acts and t not in inits:
                self.acts.append(t)

        for vi in g.input:
            if vi.name not in inits and vi.type.tensor_type.elem_type == TensorProto.FLOAT and \
                    any(g.node[r].op_type in QUANT_OPS for r in readers.get(vi.name, [])):
                add_act(vi.name)
        for k, n in enumerate(g.node):
            if n.op_type not in QUANT_OPS:
                continue
            if n.op_type == "Add":
                ops = [g.node[self.producer[x]].op_type if x in self.producer else ""
                       for x in n.input]
                if not any(op in LINEAR_OPS for op in ops) and \
                        not any(x in quantized_adds for x in n.input):
                    continue
                quantized_adds.add(n.output[0])
            for i, x in enumerate(n.input):
                if not x:
                    continue
                if x in inits:
                    if n.op_type == "Conv" and i == 1:
                        self.weights[(k, i)] = ("weight", 0)
                    elif n.op_type == "Gemm" and i == 1:
                        self.weights[(k, i)] = ("weight", 0 if _attr(n, "transB", 0) else 1)
                    elif i == 2 and (k, 1) in self.weights and self.consts[x].ndim == 1 and \
                            _attr(n, "alpha", 1.0) == 1.0 and _attr(n, "beta", 1.0) == 1.0:
                        self.weights[(k, i)] = ("bias",)  # Conv's or Gemm's
                    elif n.op_type == "MatMul" and i == 1 and self.consts[x].ndim == 2:
                        self.weights[(k, i)] = ("weight", 1)
                    elif n.op_type not in LINEAR_OPS and self.consts[x].dtype == np.float32:
                        self.weights[(k, i)] = ("const",)
                elif x not in self.consts:
                    add_act(x)
            out = n.output[0]
            # A lone Relu / Clip(0, hi) after it: QuantizeLinear clips instead.
            rs = readers.get(out, [])
            if out not in graph_outputs and len(rs) == 1 and self._clips_at_zero(g.node[rs[0]]):
                self.dropped.add(rs[0])
                self.renamed[out] = g.node[rs[0]].output[0]
                out = self.renamed[out]
            add_act(out)
        for o in g.output:
            if o.type.tensor_type.elem_type == TensorProto.FLOAT:
                add_act(o.name)
        # Scale sharing through value-moving ops.
        self.source = {}
        for t in self.acts:
            s = t
            while s in self.producer and g.node[self.producer[s]].op_type in MOVE_OPS and \
                    self.producer[s] not in self.dropped:
                s = g.node[self.producer[s]].input[0]
                if s in self.acts:
                    break
            self.source[t] = s if s in self.acts else t

    def _clips_at_zero(self, n):
        if n.op_type == "Relu":
            return True
        if n.op_type != "Clip":
            return False
        lo = n.input[1] if len(n.input) > 1 else ""
        return lo in self.consts and float(self.consts[lo]) == 0.0


def calibrate(model, plan, feeds_list):
    """Per activation: its (min, max) over the runs, and the arrays of every run."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for t in plan.acts:
        if t not in have:
            m.graph.output.append(helper.make_tensor_value_info(t, TensorProto.FLOAT, None))
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "calibration.onnx")
        onnx.save(m, path)
        for feeds in feeds_list:
            out = run_ort(path, feeds)
            out.update({k: v for k, v in feeds.items() if k in plan.acts})
            runs.append(out)
    ranges = {t: (min(float(r[t].min()) for r in runs), max(float(r[t].max()) for r in runs))
              for t in plan.acts}
    return ranges, runs


def activation_params(lo, hi):
    """uint8 asymmetric scale and zero point for a calibrated range (widened to hold 0)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zp = np.uint8(np.clip(np.round(-lo / scale), 0, 255))
    return scale, zp


def weight_params(w, axis):
    """int8 symmetric per-channel quantization of W along AXIS: (int8 array, scales)."""
    red = tuple(d for d in range(w.ndim) if d != axis)
    amax = np.abs(w).max(axis=red)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


# ---------------------------------------------------------------------------------------------
# QDQ rewriting


def quantize_qdq(model, ranges, plan):
    """The QDQ model of MODEL (which PLAN describes) for the calibrated RANGES of its activations.
    Returns (model, params: activation -> (scale, zero point))."""
    g = model.graph
    consts = plan.consts
    params = {t: activation_params(*ranges[plan.source[t]]) for t in plan.acts}
    inits = {}
    nodes = []

    def add_init(arr, name):
        if name not in inits:
            inits[name] = numpy_helper.from_array(arr, name)
        return name

    def dequantize(q, scale, zp, name, axis=None):
        """NAME_quantized, NAME_scale, NAME_zero_point -> DequantizeLinear -> NAME_dequantized."""
        add_init(q, name + "_quantized")
        add_init(scale, name + "_scale")
        add_init(zp, name + "_zero_point")
        kw = {} if axis is None else {"axis": axis}
        nodes.append(helper.make_node(
            "DequantizeLinear", [name + "_quantized", name + "_scale", name + "_zero_point"],
            [name + "_dequantized"], name=name + "_DequantizeLinear", **kw))
        return name + "_dequantized"

    def qdq(t, src, dst):
        """Q(src) -> DQ -> dst, src being activation T's float value; the scale and zero point
        are named after the tensor they are calibrated on (shared ones once)."""
        s = plan.source[t]
        sc = add_init(np.array(params[t][0], np.float32), s + "_scale")
        zp = add_init(np.array(params[t][1], np.uint8), s + "_zero_point")
        nodes.append(helper.make_node("QuantizeLinear", [src, sc, zp], [t + "_quantized"],
                                      name=t + "_QuantizeLinear"))
        nodes.append(helper.make_node("DequantizeLinear", [t + "_quantized", sc, zp], [dst],
                                      name=t + "_DequantizeLinear"))

    graph_outputs = {o.name for o in g.output}
    acts = set(plan.acts)
    # Readers of an activation read its dequantized value; graph outputs keep their names (the
    # producer writes NAME_float instead).
    read = {t: (t if t in graph_outputs else t + "_dequantized") for t in acts}
    write = {t: t + "_float" for t in acts if t in graph_outputs}
    for vi in g.input:
        if vi.name in acts:
            qdq(vi.name, vi.name, read[vi.name])
    for k, orig in enumerate(g.node):
        if k in plan.dropped:
            continue
        n = onnx.NodeProto()
        n.CopyFrom(orig)
        tag = orig.name or f"node{k}"
        for i, x in enumerate(orig.input):
            role = plan.weights.get((k, i))
            if role is None:
                n.input[i] = read.get(x, x)
            elif role[0] == "weight":
                q, s = weight_params(consts[x], role[1])
                n.input[i] = dequantize(q, s, np.zeros(s.shape, np.int8), f"{x}_{tag}", role[1])
            elif role[0] == "bias":
                xs = params[orig.input[0]][0]
                _, ws = weight_params(consts[orig.input[1]], plan.weights[(k, 1)][1])
                bs = (xs * ws).astype(np.float32)
                bq = np.clip(np.round(consts[x] / bs), -2**31, 2**31 - 1).astype(np.int32)
                n.input[i] = dequantize(bq, bs, np.zeros(bs.shape, np.int32), f"{x}_{tag}", 0)
            else:  # a constant input of an activation op: uint8 per tensor
                w = consts[x]
                s, zp = activation_params(float(w.min()), float(w.max()))
                q = np.clip(np.round(w / s) + zp, 0, 255).astype(np.uint8)
                n.input[i] = dequantize(q, np.array(s, np.float32), np.array(zp, np.uint8),
                                        f"{x}_{tag}")
        outs = [plan.renamed.get(o, o) for o in orig.output]
        for i, o in enumerate(outs):
            n.output[i] = write.get(o, o)
        nodes.append(n)
        for o in outs:
            if o in acts:
                qdq(o, write.get(o, o), read[o])
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    _set_initializers(out, list(g.initializer) + list(inits.values()))
    onnx.checker.check_model(out)
    return out, params


def _set_initializers(model, tensors):
    """Drops MODEL's dead nodes (those whose outputs nothing reads: the DequantizeLinear nodes a
    QOperator node replaced, the bounds of a dropped Clip) and sets its initializers: those of
    TENSORS that a node reads; value_info dropped (stale)."""
    g = model.graph
    outputs = {o.name for o in g.output}
    nodes = list(g.node)
    while True:
        used = {x for n in nodes for x in n.input} | outputs
        live = [n for n in nodes if any(o in used for o in n.output)]
        if len(live) == len(nodes):
            break
        nodes = live
    del g.node[:]
    g.node.extend(nodes)
    kept = [t for t in tensors if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    del model.graph.value_info[:]


# ---------------------------------------------------------------------------------------------
# QOperator form


def to_qoperator(model, runs):
    """The QOperator form of a QDQ model: QLinearConv, uint8 MaxPool/Flatten, QLinearMatMul for a
    Gemm (its output range from RUNS, the calibration runs' activations); the rest stays QDQ."""
    g = model.graph
    consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for x in n.input:
            readers.setdefault(x, []).append(n)

    def dq(t):
        n = producer.get(t)
        return n if n is not None and n.op_type == "DequantizeLinear" else None

    def q_after(t):
        rs = readers.get(t, [])
        return rs[0] if len(rs) == 1 and rs[0].op_type == "QuantizeLinear" else None

    gone, new_inits = set(), []
    replace = {}  # id(node) -> nodes in its place
    for n in g.node:
        x = dq(n.input[0]) if n.input else None
        qy = q_after(n.output[0])
        if x is None or qy is None:
            continue
        tag = n.name or n.output[0]
        if n.op_type == "Conv":
            w, b = dq(n.input[1]), dq(n.input[2]) if len(n.input) > 2 else None
            ins = list(x.input) + list(w.input) + list(qy.input[1:]) + ([b.input[0]] if b else [])
            replace[id(n)] = [helper.make_node("QLinearConv", ins, list(qy.output),
                                               name=tag + "_quant")]
            replace[id(n)][0].attribute.extend(n.attribute)
        elif n.op_type in ("MaxPool", "Flatten") and list(qy.input[1:]) == list(x.input[1:]):
            m = onnx.NodeProto()
            m.CopyFrom(n)
            m.input[0], m.output[0] = x.input[0], qy.output[0]
            replace[id(n)] = [m]
        elif n.op_type == "Gemm" and _attr(n, "transB", 0) == 1 and len(n.input) == 3:
            w, b = dq(n.input[1]), dq(n.input[2])
            wq, ws = consts[w.input[0]], consts[w.input[1]]
            xs, xzp = consts[x.input[1]], consts[x.input[2]]
            src = producer[x.input[0]].input[0]  # the float tensor quantized
            lo, hi = np.inf, -np.inf
            for r in runs:
                xq = np.clip(np.round(r[src.removesuffix("_float")] / xs) + xzp, 0, 255)
                mm = ((xq - xzp) * xs) @ (wq.astype(np.float32) * ws[:, None]).T
                lo, hi = min(lo, float(mm.min())), max(hi, float(mm.max()))
            ms, mzp = activation_params(lo, hi)
            base = tag + "_matmul"
            new_inits += [numpy_helper.from_array(np.ascontiguousarray(wq.T), base + "_B"),
                          numpy_helper.from_array(np.array(ms, np.float32), base + "_scale"),
                          numpy_helper.from_array(np.array(mzp, np.uint8), base + "_zero_point"),
                          numpy_helper.from_array(
                              (consts[b.input[0]] * consts[b.input[1]]).astype(np.float32),
                              base + "_bias")]
            replace[id(n)] = [
                helper.make_node("QLinearMatMul", list(x.input) + [base + "_B", w.input[1],
                                 w.input[2], base + "_scale", base + "_zero_point"],
                                 [base + "_quantized"], name=base),
                helper.make_node("DequantizeLinear", [base + "_quantized", base + "_scale",
                                                      base + "_zero_point"], [base + "_output"],
                                 name=base + "_DequantizeLinear"),
                helper.make_node("Add", [base + "_output", base + "_bias"], list(n.output),
                                 name=base + "_bias_Add")]
            continue  # the Q after the Gemm stays
        else:
            continue
        gone.add(id(qy))
    nodes = []
    for n in g.node:
        if id(n) not in gone:
            nodes.extend(replace.get(id(n), [n]))
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    _set_initializers(out, list(g.initializer) + new_inits)
    onnx.checker.check_model(out)
    return out


def output_steps(model):
    """Graph output -> the size of one quantization step in it: the scale of the
    DequantizeLinear that makes it (through ops that change it by no more than their input
    changes: Tanh, Relu, reshapes), the largest where per channel; absent where none does."""
    g = model.graph
    consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    steps = {}
    for o in g.output:
        t = o.name
        while t in producer:
            n = producer[t]
            if n.op_type == "DequantizeLinear":
                if n.input[1] in consts:
                    steps[o.name] = float(np.max(consts[n.input[1]]))
                break
            if n.op_type not in LIPSCHITZ_OPS:
                break
            t = n.input[0]
    return steps


# ---------------------------------------------------------------------------------------------


def make(name, out_dir):
    """Writes out_dir/NAME.onnx; returns its path."""
    folder = base_folder(name)
    model = onnx.load(os.path.join(folder, "model.onnx"))
    _fold_identities(model)
    plan = Plan(model)
    ref = reference_inputs(folder)
    feeds = [ref] + [random_inputs(ref, seed) for seed in range(1, CALIBRATION_RUNS + 1)]
    ranges, runs = calibrate(model, plan, feeds)
    qmodel, _ = quantize_qdq(model, ranges, plan)
    if CASES[name][1] == "qop":
        qmodel = to_qoperator(qmodel, runs)
    path = os.path.join(out_dir, name + ".onnx")
    onnx.save(qmodel, path)
    return path


def accuracy(name, path):
    """Lines comparing ONNX Runtime's outputs of the quantized model at PATH with the float
    model's: on the reference input (max and mean abs diff, the output's std, top-1), and on
    the held-out inputs (largest max abs diff, top-1 agreement), and, to judge these by, how far
    the float model's outputs for the held-out inputs are from its outputs for the reference
    input (a random-weight network can map every input to nearly the same output) and how many
    classes its top-1 takes."""
    folder = base_folder(name)
    ref = reference_inputs(folder)
    float_path = os.path.join(folder, "model.onnx")
    lines, worst, top1, spread, classes = [], {}, {}, {}, {}
    for seed in (None,) + HELD_OUT_SEEDS:
        feeds = ref if seed is None else random_inputs(ref, seed)
        want, got = run_ort(float_path, feeds), run_ort(path, feeds)
        if seed is None:
            first = want
        for k, w in want.items():
            spread[k] = max(spread.get(k, 0.0), float(np.abs(w - first[k]).max()))
            classes.setdefault(k, set()).add(int(np.argmax(w)))
            d = np.abs(got[k].astype(np.float64) - w)
            same = int(np.argmax(got[k])) == int(np.argmax(w))
            if seed is None:
                lines.append(f"{name} {k}, reference input: max abs diff {d.max():.4g}, mean "
                             f"{d.mean():.4g} (output std {w.std():.4g})" +
                             (f", top-1 {'same' if same else 'DIFFERENT'}"
                              if k in CASES[name][2] else ""))
            else:
                worst[k] = max(worst.get(k, 0.0), float(d.max()))
                top1[k] = top1.get(k, 0) + same
    for k in worst:
        lines.append(f"{name} {k}, {len(HELD_OUT_SEEDS)} held-out inputs: max abs diff "
                     f"{worst[k]:.4g}" + (f", top-1 agreement {top1[k]}/{len(HELD_OUT_SEEDS)}"
                                          if k in CASES[name][2] else "") +
                     f" (the float model's outputs for them differ from the reference input's by "
                     f"up to {spread[k]:.4g}" + (f"; {len(classes[k])} distinct top-1 classes"
                                                 if k in CASES[name][2] else "") + ")")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*")
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    ap.add_argument("--out", default=os.path.join(cache, "tern", "models"))
    ap.add_argument("--no-accuracy", action="store_true",
                    help="skip the comparison with the float model")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.names or list(CASES):
        if name not in CASES:
            sys.exit(f"quantize.py: unknown model {name} (known: {', '.join(CASES)})")
        why = missing(name)
        if why:
            print(f"{name} skipped: {why}")
            continue
        path = make(name, args.out)
        print(path)
        if not args.no_accuracy:
            print("\n".join(accuracy(name, path)))


if __name__ == "__main__":
    main()
