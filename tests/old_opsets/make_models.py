#!/usr/bin/python3
"""Small models of opsets 7-10 (ops whose form changed after), with ONNX Runtime's outputs.

    /usr/bin/python3 tests/old_opsets/make_models.py OUT_DIR [--run BUILD_DIR]

OUT_DIR/<name>/ gets model.onnx and test_data_set_0 (ONNX's node-test layout) from
../shared/tools/ort_reference/make_reference.py, with onnxruntime-node installed as
tests/bench/compare_ort does; they are made again only when this script changed. With --run,
BUILD_DIR/tern-conformance then runs them (ctest `old_opsets`; skipped, 77, without ../shared,
Node.js or npm). Nothing here is kept in git: the models are a few lines each.
"""
import argparse
import hashlib
import importlib.machinery
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAKE_REFERENCE = os.environ.get("MAKE_REFERENCE", os.path.join(
    os.path.dirname(ROOT), "shared", "tools", "ort_reference", "make_reference.py"))


def model(opset, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 5

    return m


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def i64(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


CASES = {}

for opset in (7, 8):
    for mode, sc in (("nearest", [1, 1, 2, 3]), ("linear", [1, 1, 2, 2]),
                     ("linear", [1, 1, 1.5, 2.5])):
        name = "upsample_v%d_%s_%s" % (opset, mode, "x".join(str(s) for s in sc[2:]))
        CASES[name] = model(opset, [helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=[float(s) for s in sc])],
                            [f32("x", [1, 2, 3, 4])], [f32("y", None)])
for mode, sc in (("nearest", [1, 1, 2, 2]), ("nearest", [1, 1, 1.5, 2.5]), ("linear", [1, 1, 2, 3])):
    name = "upsample_v9_%s_%s" % (mode, "x".join(str(s) for s in sc[2:]))
    CASES[name] = model(9, [helper.make_node("Upsample", ["x", "s"], ["y"], mode=mode)],
                        [f32("x", [1, 2, 3, 4])], [f32("y", None)],
                        [const("s", np.array(sc, np.float32))])
for opset in (7, 10):
    CASES["pad_value_v%d" % opset] = model(
        opset, [helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 2, 0, 2, 1], value=-3.5)],
        [f32("x", [2, 3, 4])], [f32("y", None)])
    CASES["pad_reflect_v%d" % opset] = model(
        opset, [helper.make_node("Pad", ["x"], ["y"], mode="reflect", pads=[0, 1, 2, 0, 2, 1])],
        [f32("x", [2, 3, 4])], [f32("y", None)])
for opset in (7, 9):
    CASES["prelu_channel_v%d" % opset] = model(
        opset, [helper.make_node("PRelu", ["x", "slope"], ["y"])], [f32("x", [2, 3, 2, 2])],
        [f32("y", None)], [const("slope", np.array([[[0.1]], [[-0.5]], [[2.0]]], np.float32))])
CASES["gemm_v7"] = model(
    7, [helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0, transB=1)],
    [f32("a", [3, 4])], [f32("y", None)],
    [const("b", np.arange(20, dtype=np.float32).reshape(5, 4) / 10),
     const("c", np.arange(5, dtype=np.float32))])
CASES["slice_attrs_v9"] = model(
    9, [helper.make_node("Slice", ["x"], ["y"], starts=[1, -3], ends=[100, -1], axes=[0, 2])],
    [f32("x", [3, 4, 5])], [f32("y", None)])
CASES["topk_k_attr_v9"] = model(
    9, [helper.make_node("TopK", ["x"], ["v", "i"], k=2, axis=1)], [f32("x", [3, 5])],
    [f32("v", None), i64("i", None)])
CASES["clip_attrs_v7"] = model(7, [helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.7)],
                               [f32("x", [3, 4])], [f32("y", None)])
CASES["reduce_axes_attr_v7"] = model(
    7, [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0)], [f32("x", [2, 3, 4])],
    [f32("y", None)])
CASES["split_attr_v7"] = model(
    7, [helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 3])], [f32("x", [2, 4])],
    [f32("a", None), f32("b", None)])
CASES["batchnorm_spatial_v7"] = model(
    7, [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=1,
                         epsilon=1e-3, momentum=0.8)],
    [f32("x", [2, 3, 2, 2])], [f32("y", None)],
    [const("s", np.array([1, 2, 3], np.float32)), const("b", np.array([0, 1, -1], np.float32)),
     const("m", np.array([0.5, 0, -0.5], np.float32)), const("v", np.array([1, 4, 0.25], np.float32))])
CASES["dropout_ratio_v7"] = model(7, [helper.make_node("Dropout", ["x"], ["y"], ratio=0.3)],
                                  [f32("x", [3, 4])], [f32("y", None)])
CASES["softmax_2d_coerce_v9"] = model(9, [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                                      [f32("x", [2, 3, 4])], [f32("y", None)])
CASES["mod_fmod_v10"] = model(10, [helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)],
                              [f32("a", [3, 4])], [f32("y", None)],
                              [const("b", np.array([1.5, -2.0, 0.7, -0.3], np.float32))])
CASES["maxpool_ceil_v10"] = model(
    10, [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
    [f32("x", [1, 2, 6, 6])], [f32("y", None)])
CASES["avgpool_pad_v7"] = model(
    7, [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         count_include_pad=1)],
    [f32("x", [1, 2, 5, 5])], [f32("y", None)])


def ort_package():
    loader = importlib.machinery.SourceFileLoader(
        "compare_ort", os.path.join(ROOT, "tests", "bench", "compare_ort"))
    return loader.load_module().ensure_ort()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--run", metavar="BUILD_DIR")
    a = ap.parse_args()
    if not os.path.exists(MAKE_REFERENCE):
        print(f"old_opsets skipped: {MAKE_REFERENCE} is absent (../shared)")
        sys.exit(77)
    if shutil.which("node") is None or shutil.which("npm") is None:
        print("old_opsets skipped: node and npm are needed for ONNX Runtime's references")
        sys.exit(77)
    stamp = hashlib.sha256(open(os.path.abspath(__file__), "rb").read()).hexdigest()
    stamp_file = os.path.join(a.out, "stamp")
    if not (os.path.exists(stamp_file) and open(stamp_file).read() == stamp):
        shutil.rmtree(a.out, ignore_errors=True)
        os.makedirs(a.out)
        env = dict(os.environ, ORT_NODE=ort_package())
        with tempfile.TemporaryDirectory() as tmp:
            for name, m in sorted(CASES.items()):
                path = os.path.join(tmp, name + ".onnx")
                onnx.save(m, path)
                subprocess.run([sys.executable, MAKE_REFERENCE, path, os.path.join(a.out, name)],
                               check=True, env=env, stdout=subprocess.DEVNULL)
        open(stamp_file, "w").write(stamp)
    print("%d cases in %s" % (len(CASES), a.out))
    if a.run:
        r = subprocess.run([os.path.join(a.run, "tern-conformance"), "--dir", a.out, "--strict"])
        sys.exit(r.returncode)


if __name__ == "__main__":
    main()
