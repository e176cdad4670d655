#!/usr/bin/python3
"""Writes the benchmark models of the backends API into a directory (default /tmp/tern_bench):
two_branch.onnx  two independent MatMul chains joined by Add (inter-op threads)
attention_S.onnx ONNX Attention (opset 23), batch 1, 8 heads, head size 64, S = 512 and 2048
Uses Debian's python3-onnx (onnx.helper only; no checker, which predates opset 23)."""
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/tern_bench"
rng = np.random.default_rng(0)


def two_branch():
    n, d, depth = 256, 512, 6
    nodes, inits = [], []
    for br in "ab":
        prev = "x"
        for i in range(depth):
            w = f"w_{br}{i}"
            inits.append(numpy_helper.from_array(
                (rng.standard_normal((d, d)) * 0.04).astype(np.float32), w))
            nodes.append(helper.make_node("MatMul", [prev, w], [f"{br}{i}"]))
            nodes.append(helper.make_node("Relu", [f"{br}{i}"], [f"{br}{i}r"]))
            prev = f"{br}{i}r"
    nodes.append(helper.make_node("Add", ["a%dr" % (depth - 1), "b%dr" % (depth - 1)], ["y"]))
    g = helper.make_graph(nodes, "two_branch",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, d])], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
         f"{out}/two_branch.onnx")


def attention(s):
    shape = [1, 8, s, 64]
    g = helper.make_graph(
        [helper.make_node("Attention", ["q", "k", "v"], ["y"])], f"attention_{s}",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "qkv"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]),
         f"{out}/attention_{s}.onnx")


import os
os.makedirs(out, exist_ok=True)
two_branch()
for s in (512, 2048):
    attention(s)
print("wrote models to", out)
