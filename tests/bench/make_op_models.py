#!/usr/bin/python3
"""Single-op benchmark models, each with a reference test case made by ONNX Runtime.

  /usr/bin/python3 tests/bench/make_op_models.py OUT_DIR [NAME ...] [--list] [--no-reference]

Writes OUT_DIR/NAME/model.onnx and OUT_DIR/NAME/test_data_set_0 (inputs and ONNX Runtime's
outputs, through ../shared/tools/ort_reference/make_reference.py) for each model in MODELS (all
by default), so that tests/bench/compare_ort can time them:

  tests/bench/compare_ort --build build --threads 1,2 --rounds 3 --runs 20 --no-cold OUT_DIR/*

OUT_DIR belongs outside git. Inputs whose values matter (a grid's range, box coordinates) are
generated here; the rest are left to make_reference.py (standard normal, seeded). To add an op,
add an entry to MODELS: a function returning (node, inputs, outputs, opset, arrays[, consts]),
where inputs/outputs are (name, elem type, shape), arrays maps input names to the numpy values to
use, and consts maps names to numpy values stored as initializers (Resize's sizes). Needs Debian's python3-onnx and python3-numpy, node, and onnxruntime-node (ORT_NODE, default
~/.cache/tern/ort/node_modules/onnxruntime-node).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAKE_REFERENCE = os.path.join(os.path.dirname(ROOT), "shared", "tools", "ort_reference",
                              "make_reference.py")
F32 = TensorProto.FLOAT


def grid_sample(mode, padding="zeros", align_corners=0, x=(1, 256, 64, 64), out=(64, 64),
                flow=False):
    """GridSample (opset 16 names) of X at a grid uniform in [-1.1, 1.1] (some points outside,
    each point anywhere in the image), or with flow=True at an optical-flow warp: each output
    pixel's own location (the identity grid) moved by up to 2 pixels."""
    def make():
        grid_shape = (x[0], *out, len(x) - 2)
        rng = np.random.default_rng(1)
        if flow:
            axes = [(2 * np.arange(n) + 1) / n - 1 for n in out]  # align_corners=0 centres
            ident = np.stack(np.meshgrid(*axes, indexing="ij")[::-1], axis=-1)
            shift = rng.uniform(-2, 2, size=grid_shape) * 2 / np.array(x[:1:-1])
            grid = (ident[None] + shift).astype(np.float32)
        else:
            grid = rng.uniform(-1.1, 1.1, size=grid_shape).astype(np.float32)
        node = helper.make_node("GridSample", ["X", "grid"], ["Y"], mode=mode,
                                padding_mode=padding, align_corners=align_corners)
        return (node, [("X", F32, x), ("grid", F32, grid_shape)],
                [("Y", F32, (x[0], x[1], *out))], 16, {"grid": grid})
    return make


def resize(mode, x, out, **attrs):
    """Resize of X to `out` (sizes a constant, as exporters write them)."""
    def make():
        node = helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], mode=mode, **attrs)
        return (node, [("X", F32, x)], [("Y", F32, out)], 19, {},
                {"sizes": np.array(out, np.int64)})
    return make


def roi_align(x=(1, 256, 50, 50), rois=300, out=7, scale=1 / 16):
    """RoiAlign (average, 2x2 samples per bin) of `rois` boxes over a detector's feature map
    (an 800x800 image at stride 16), boxes 16 to 300 pixels wide anywhere in the image."""
    def make():
        rng = np.random.default_rng(2)
        xy = rng.uniform(0, 700, (rois, 2))
        boxes = np.concatenate([xy, np.minimum(xy + rng.uniform(16, 300, (rois, 2)), 799)], 1)
        node = helper.make_node("RoiAlign", ["X", "rois", "batch_indices"], ["Y"],
                                output_height=out, output_width=out, sampling_ratio=2,
                                spatial_scale=scale, mode="avg")
        return (node, [("X", F32, x), ("rois", F32, (rois, 4))],
                [("Y", F32, (rois, x[1], out, out))], 16, {"rois": boxes.astype(np.float32)},
                {"batch_indices": np.zeros(rois, np.int64)})
    return make


MODELS = {
    "gridsample_bilinear_zeros": grid_sample("bilinear"),
    "gridsample_bicubic_zeros": grid_sample("bicubic"),
    "gridsample_nearest_border": grid_sample("nearest", "border"),
    "gridsample_bilinear_reflection_ac1": grid_sample("bilinear", "reflection", 1),
    "gridsample_bilinear_flow": grid_sample("bilinear", "border", flow=True),
    # Pre-processing: a camera frame to a classifier's input, antialiased as PIL/torchvision do.
    "resize_antialias_linear": resize("linear", (1, 3, 480, 640), (1, 3, 224, 224), antialias=1),
    "resize_antialias_cubic": resize("cubic", (1, 3, 480, 640), (1, 3, 224, 224), antialias=1),
    "resize_linear_down": resize("linear", (1, 3, 480, 640), (1, 3, 224, 224)),
    # Decoders: 2x upsampling of a feature map (FPN, U-Net, super-resolution).
    "resize_nearest_up": resize("nearest", (1, 64, 56, 56), (1, 64, 112, 112)),
    "resize_linear_up": resize("linear", (1, 64, 56, 56), (1, 64, 112, 112)),
    "resize_cubic_up": resize("cubic", (1, 16, 64, 64), (1, 16, 128, 128)),
    "roi_align": roi_align(),
}


def write_model(name, make, out_dir, reference):
    node, inputs, outputs, opset, arrays, *rest = make()
    consts = rest[0] if rest else {}
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in outputs],
        [numpy_helper.from_array(v, n) for n, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="tern make_op_models")
    model.ir_version = 8
    dest = os.path.join(out_dir, name)
    os.makedirs(dest, exist_ok=True)
    if not reference:
        onnx.save(model, os.path.join(dest, "model.onnx"))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path)
        cmd = [sys.executable, MAKE_REFERENCE, path, dest]
        for input_name, value in arrays.items():
            npy = os.path.join(tmp, input_name + ".npy")
            np.save(npy, value)
            cmd += ["--input", f"{input_name}={npy}"]
        env = dict(os.environ)
        env.setdefault("ORT_NODE", os.path.expanduser(
            "~/.cache/tern/ort/node_modules/onnxruntime-node"))
        subprocess.run(cmd, check=True, env=env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("names", nargs="*", help="models to make (default: all)")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--no-reference", action="store_true",
                    help="write model.onnx only (no ONNX Runtime needed)")
    a = ap.parse_args()
    if a.list:
        print("\n".join(MODELS))
        return
    if not a.out_dir:
        ap.error("OUT_DIR is required")
    unknown = [n for n in a.names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; --list shows them")
    for name in a.names or MODELS:
        write_model(name, MODELS[name], a.out_dir, not a.no_reference)
        print(os.path.join(a.out_dir, name))


if __name__ == "__main__":
    main()
