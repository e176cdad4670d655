#!/usr/bin/python3
"""The op types models need, for a selective build (TERN_SELECTED_OPS_FROM, README's mobile part).

Reads .onnx models (Debian's python3-onnx) and .tern models (the FlatBuffers of
serialization/tern.fbs, read here without the flatbuffers module), walks every subgraph (If
branches, Loop and Scan bodies), and adds the ops Tern's optimizer makes of what it finds
(core/opt/optimizer.h: FusedConv from Conv, HardSwish from x * Clip(x + 3, 0, 6) / 6 ...), so a
selective build runs the models as fast as a full one. The optimizer also checks that a fusion's
op is built before making it (core/opt/graph_util.h, op_built).

Usage: scripts/selected_ops.py [--cmake] [--no-fusions] [--dtypes] MODEL...
  prints "domain op_type" lines (the domain "ai.onnx" for ONNX's default one), or with --cmake
  one CMake list ("Add;Conv;..."), as CMakeLists.txt reads it.
  --dtypes: the element types instead (float32, int64, ...: every tensor's of every graph, by
  ONNX's type inference), with float32 and int64 always (widened half kernels, shapes); "all"
  when a model is a .tern file, whose intermediate values' types only Tern's planner knows.
"""
import argparse
import struct
import sys

# The ops the optimizer's passes make, and the ops a model must have for a pass to match: a
# selective build of a model with all of `needs` gets `makes` too.
FUSIONS = [
    ({"Conv"}, {"FusedConv"}),  # conv_activation_fusion, residual_fusion
    ({"BatchNormalization", "Relu"}, {"FusedBatchNormalization"}),  # norm_activation_fusion
    ({"Mul", "Clip", "Div"}, {"HardSwish"}),  # hardswish_fusion
    ({"Mul", "HardSigmoid"}, {"HardSwish"}),
    ({"Mul", "Sigmoid"}, {"Swish"}),  # swish_fusion
    ({"Erf", "Mul"}, {"Gelu"}),  # gelu_fusion
    ({"ReduceMean", "Sub", "Div"}, {"LayerNormalization"}),  # layer_norm_fusion
    ({"InstanceNormalization", "Reshape"}, {"GroupNormalization"}),  # group_norm_fusion
    ({"MatMul", "Add"}, {"FusedMatMul"}),  # matmul_epilogue_fusion
    ({"Pad"}, {"Identity"}),  # pad_folding
    ({"Dropout"}, {"Identity"}),
    ({"MatMul", "Softmax", "Transpose"}, {"Attention"}),  # attention_fusion
    ({"DequantizeLinear", "QuantizeLinear", "Conv"}, {"QLinearConv"}),  # qdq_fusion
    ({"DequantizeLinear", "QuantizeLinear", "Conv", "Relu"}, {"FusedQLinearConv"}),
    ({"DequantizeLinear", "QuantizeLinear", "MatMul"}, {"QLinearMatMul"}),
    ({"DequantizeLinear", "QuantizeLinear", "Gemm"}, {"QLinearMatMul", "FusedQLinearMatMul"}),
    ({"DequantizeLinear", "QuantizeLinear", "Add"}, {"QLinearAdd"}),
]


# Ops the ONNX importer turns into something else (serialization/onnx_importer.cpp): a Constant
# node becomes a constant value, no op.
IMPORTED = {"Constant"}


def onnx_ops(path):
    import onnx

    ops = set()

    def walk(graph):
        for node in graph.node:
            if node.op_type not in IMPORTED or node.domain not in ("", "ai.onnx"):
                ops.add((node.domain or "ai.onnx", node.op_type))
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
                for sub in attr.graphs:
                    walk(sub)

    walk(onnx.load(path, load_external_data=False).graph)
    return ops


class FlatTable:
    """A FlatBuffers table: its fields by index (serialization/tern.fbs order)."""

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vsize = struct.unpack_from("<H", buf, vtable)[0]
        self.vtable = vtable

    def _field(self, index):
        entry = 4 + 2 * index
        if entry >= self.vsize:
            return None
        off = struct.unpack_from("<H", self.buf, self.vtable + entry)[0]
        return self.pos + off if off else None

    def _deref(self, at):
        return at + struct.unpack_from("<I", self.buf, at)[0]

    def string(self, index):
        at = self._field(index)
        if at is None:
            return ""
        s = self._deref(at)
        n = struct.unpack_from("<I", self.buf, s)[0]
        return self.buf[s + 4 : s + 4 + n].decode()

    def table(self, index):
        at = self._field(index)
        return None if at is None else FlatTable(self.buf, self._deref(at))

    def tables(self, index):
        at = self._field(index)
        if at is None:
            return []
        v = self._deref(at)
        n = struct.unpack_from("<I", self.buf, v)[0]
        return [FlatTable(self.buf, self._deref(v + 4 + 4 * i)) for i in range(n)]


# Field indices in serialization/tern.fbs.
MODEL_GRAPH = 3
GRAPH_NODES = 1
NODE_OP_TYPE, NODE_DOMAIN, NODE_ATTRIBUTES = 1, 2, 5
ATTRIBUTE_G, ATTRIBUTE_GRAPHS = 9, 10


def check_tern_schema(schema_path):
    """Fails loudly when tern.fbs moved a field this reader uses."""
    text = open(schema_path).read()

    def fields(table):
        body = text.split("table " + table + " {", 1)[1].split("}", 1)[0]
        names = []
        for line in body.splitlines():
            line = line.split("//", 1)[0].strip()
            if ":" in line:
                names.append(line.split(":", 1)[0].strip())
        return names

    want = {
        "Model": {"graph": MODEL_GRAPH},
        "Graph": {"nodes": GRAPH_NODES},
        "Node": {"op_type": NODE_OP_TYPE, "domain": NODE_DOMAIN, "attributes": NODE_ATTRIBUTES},
        "Attribute": {"g": ATTRIBUTE_G, "graphs": ATTRIBUTE_GRAPHS},
    }
    for table, expected in want.items():
        names = fields(table)
        for name, index in expected.items():
            if name not in names or names.index(name) != index:
                sys.exit(f"selected_ops.py: {schema_path}: {table}.{name} is not field {index}")


def tern_ops(path):
    import os

    check_tern_schema(os.path.join(os.path.dirname(__file__), "..", "serialization", "tern.fbs"))
    buf = open(path, "rb").read()
    if buf[4:8] != b"TERN":
        sys.exit(f"selected_ops.py: {path} is not a .tern file")
    ops = set()

    def walk(graph):
        for node in graph.tables(GRAPH_NODES):
            ops.add((node.string(NODE_DOMAIN) or "ai.onnx", node.string(NODE_OP_TYPE)))
            for attr in node.tables(NODE_ATTRIBUTES):
                sub = attr.table(ATTRIBUTE_G)
                if sub is not None:
                    walk(sub)
                for g in attr.tables(ATTRIBUTE_GRAPHS):
                    walk(g)

    model = FlatTable(buf, struct.unpack_from("<I", buf, 0)[0])
    graph = model.table(MODEL_GRAPH)
    if graph is not None:
        walk(graph)
    return ops


# ONNX's TensorProto.DataType numbers as Tern's dtype_name spells them (core/dtype.cpp).
DTYPE_NAMES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
               7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32",
               13: "uint64", 16: "bfloat16"}


def onnx_dtypes(path):
    """The element types of every value of every graph, or None for a type Tern has no name for."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(path, load_external_data=False))
    found = set()

    def elem(t):
        which = t.WhichOneof("value")
        if which == "tensor_type":
            found.add(t.tensor_type.elem_type)
        elif which == "sequence_type":
            elem(t.sequence_type.elem_type)
        elif which == "optional_type":
            elem(t.optional_type.elem_type)

    def walk(graph):
        for v in list(graph.input) + list(graph.output) + list(graph.value_info):
            elem(v.type)
        for i in graph.initializer:
            found.add(i.data_type)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    found.add(attr.t.data_type)
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
                for sub in attr.graphs:
                    walk(sub)
                if node.op_type == "Cast" and attr.name == "to":
                    found.add(attr.i)

    walk(model.graph)
    found.discard(0)  # (a value ONNX could not type: its producer's type is among the others)
    if any(t not in DTYPE_NAMES for t in found):
        return None
    return {DTYPE_NAMES[t] for t in found}


def model_ops(path):
    with open(path, "rb") as f:
        head = f.read(8)
    return tern_ops(path) if head[4:8] == b"TERN" else onnx_ops(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cmake", action="store_true", help="print one CMake list of op types")
    ap.add_argument("--no-fusions", action="store_true", help="leave out the optimizer's ops")
    ap.add_argument("--dtypes", action="store_true", help="print the element types instead")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    if args.dtypes:
        dtypes = {"float32", "int64"}
        for path in args.models:
            with open(path, "rb") as f:
                found = None if f.read(8)[4:8] == b"TERN" else onnx_dtypes(path)
            if found is None:
                print("all")
                return
            dtypes |= found
        print((";" if args.cmake else "\n").join(sorted(dtypes)))
        return
    ops = set()
    for path in args.models:
        ops |= model_ops(path)
    other = sorted(f"{d} {t}" for d, t in ops if d != "ai.onnx")
    if other:
        # Tern runs the default domain only (serialization/model_loader.cpp refuses the others).
        sys.exit("selected_ops.py: ops of domains Tern does not run: " + ", ".join(other))
    if not args.no_fusions:
        types = {t for _, t in ops}
        for needs, makes in FUSIONS:
            if needs <= types:
                ops |= {("ai.onnx", t) for t in makes}
    if args.cmake:
        print(";".join(sorted(t for _, t in ops)))
    else:
        for d, t in sorted(ops, key=lambda x: x[1]):
            print(d, t)


if __name__ == "__main__":
    main()
