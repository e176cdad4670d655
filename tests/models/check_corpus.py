#!/usr/bin/python3
"""Checks Tern on the model corpus against ONNX Runtime's outputs, from the ONNX file and from the
model converted to .tern (ctest `model_corpus`).

  tests/models/check_corpus.py BUILD_DIR [--models DIR] [NAME ...]

For each model: exports it with tests/models/export.py and makes ONNX Runtime's reference outputs
(../shared/tools/ort_reference/make_reference.py) into DIR/NAME/ (default ~/.cache/tern/corpus),
again only when the scripts it is made by changed (its own key: export.py and its module); then runs BUILD_DIR/tern on the reference inputs, from
model.onnx and from model.tern (`tern convert`), and compares every output with the reference:
rtol 1e-3, atol 1e-4 (the real-model tolerance), or, where larger, twice the largest difference
between PyTorch's and ONNX Runtime's outputs (the model's own noise floor, measured at export).
bfloat16 models, which ONNX Runtime cannot run, are checked against PyTorch's bfloat16 outputs
instead, their floor the distance between PyTorch's bfloat16 and float32 outputs.
Quantized models (tests/models/quantize.py's CASES: int8 QDQ and QOperator forms of the trained
models in ../shared/models, skipped with a message where those are absent) are made by that script
instead of exported, their reference ONNX Runtime's outputs on the quantized model for the shared
reference input (graph optimisation 'basic': QuantizeLinear/DequantizeLinear run as float ops).
Their tolerance is one quantization step, or, where larger, twice ONNX Runtime's own distance
from that reference when it runs the model on int8 kernels (optimisation 'all', measured when the
case is made: the noise floor of a quantized model): an output made by a DequantizeLinear
(directly or through Tanh/reshapes) takes values on a grid of its scale s, and an engine that
rounds one value of an earlier layer the other way (float summation order, or int32 accumulation
against float QDQ ops) moves the output to the neighbouring grid point, so |tern - ort| <= s
(+ the float tolerance above) is allowed; in deep networks such a flip spreads, layer by layer,
to more values (tiny_bert: 3-5 steps between ONNX Runtime's two modes), hence the floor.
Classifier outputs must also keep their arg-max (top-1).
A detector's detections are compared as a set of rows (box, score, label) in score order, where
rows whose scores differ by less than the tolerance may come in either order.
Prints a line per model and form, and "N passed, N failed".
--backends and --flag pass tern run's options to every run (a GPU check: --backends cuda,cpu
--flag cudnn.allow_tf32=0); --cached checks a copied cache without making anything; --optimized
adds a third form, "opt": the model converted with `tern convert --optimize` (a CPU session's
optimized graph, planned for the reference inputs: fused ops, packed weights, planned constants),
which is what a saved optimized model runs, on the CPU or on --backends.
Needs python3-torch, python3-torchvision, python3-onnx, python3-numpy, node and onnxruntime-node
(installed into ~/.cache/tern/ort on first use, as tests/bench/compare_ort does).
"""
import argparse
import concurrent.futures
import hashlib
import json
import importlib.machinery
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import torch  # noqa: F401  (export.py's)
    import torchvision  # noqa: F401
except ImportError as e:
    print(f"model_corpus skipped: {e} (scripts/setup.sh installs python3-torch, "
          "python3-torchvision, python3-onnx, python3-numpy)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RTOL, ATOL = 1e-3, 1e-4

# name -> (reference inputs: NAME=VALUE arrays or file names under the export folder, dims for
# generated inputs, output names compared as detection rows).
CORPUS = {
    "lstm": ({}, {"batch": 1, "seq": 200}, None),
    "gru": ({}, {"batch": 1, "seq": 200}, None),
    "greedy_loop": ({"h": ("normal", (1, 96)), "first": np.array([3], np.int64),
                     "max_len": np.array(40, np.int64)}, {}, None),
    "streaming_vad": ({"x": ("normal", (1, 512)), "sr": np.array(16000, np.int64),
                       "h": ("normal", (1, 1, 64)), "c": ("normal", (1, 1, 64))}, {}, None),
    "paste_masks": ({"masks": ("normal", (60, 1, 28, 28)), "boxes": ("normal", (60, 4))}, {},
                    None),
    "ssdlite": ({"images": "ssdlite.images.npy"}, {}, ("boxes", "scores", "labels")),
    "faster_rcnn": ({"images": "faster_rcnn.images.npy"}, {}, ("boxes", "scores", "labels")),
}
sys.path.insert(0, HERE)
import blocks  # noqa: E402
import quantize  # noqa: E402
import vision  # noqa: E402

# Their export writes the inputs PyTorch's outputs were computed from: the reference uses them.
for _name in vision.CASES:
    CORPUS[_name] = ({"input": f"{_name}.input.npy"}, {}, None)
for _name in blocks.CASES:
    CORPUS[_name] = ({k: f"{_name}.{k}.npy" for k in blocks.CASES[_name][1]}, {}, None)
# Their reference inputs are the shared models' (../shared/models/BASE/test_data_set_0).
for _name in quantize.CASES:
    CORPUS[_name] = ({}, {}, None)

# The scripts a model's export depends on (besides export.py): a change to one regenerates it.
SOURCES = {**{n: ["vision.py"] for n in vision.CASES},
           **{n: ["vision.py", "half.py"] for n in list(vision.HALF) + list(vision.BF16)},
           **{n: ["blocks.py", "vision.py"] for n in blocks.CASES},
           **{n: ["detection.py"] for n in ("ssdlite", "faster_rcnn")},
           **{n: ["recurrent.py"]
              for n in ("lstm", "gru", "greedy_loop", "streaming_vad", "paste_masks")},
           **{n: ["quantize.py", "ort_outputs.js"] for n in quantize.CASES}}


def scripts_stamp(name):
    """The content key of NAME's cached files: export.py, the scripts NAME is made by, and this
    script's reference-input table entry."""
    h = hashlib.sha256()
    for f in ["export.py"] + SOURCES[name]:
        h.update(open(os.path.join(HERE, f), "rb").read())
    h.update(repr(CORPUS[name][:2]).encode())
    return h.hexdigest()


def ort_package():
    loader = importlib.machinery.SourceFileLoader(
        "compare_ort", os.path.join(ROOT, "tests", "bench", "compare_ort"))
    return loader.load_module().ensure_ort()


def prepare(name, out, stamp):
    """Exports NAME and makes its reference case in out/NAME (model.onnx, test_data_set_0,
    inputs/*.npy) unless it is there for these scripts."""
    case = os.path.join(out, name)
    if os.path.exists(os.path.join(case, "stamp")) and \
            open(os.path.join(case, "stamp")).read() == stamp:
        return case
    shutil.rmtree(case, ignore_errors=True)
    os.makedirs(case)
    with tempfile.TemporaryDirectory(dir=out) as export:  # the case keeps a copy: model.onnx
        _make_case(name, case, export)
    open(os.path.join(case, "stamp"), "w").write(stamp)
    return case


def _make_case(name, case, export):
    if name in quantize.CASES:
        return _quantized_case(name, case, export)
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "export.py"), "--out", export, name],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    given, dims, _ = CORPUS[name]
    os.makedirs(os.path.join(case, "inputs"))
    if name in vision.BF16:
        return _torch_case(name, case, export)
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "..", "shared", "tools", "ort_reference",
                                            "make_reference.py"),
           os.path.join(export, name + ".onnx"), case]
    rng = np.random.default_rng(0)
    for input_name, value in given.items():
        if isinstance(value, str):
            arr = np.load(os.path.join(export, value))
        elif isinstance(value, tuple):
            arr = rng.standard_normal(value[1]).astype(np.float32)
        else:
            arr = value
        path = os.path.join(case, "inputs", input_name + ".npy")
        np.save(path, arr)
        cmd += ["--input", f"{input_name}={path}"]
    for d, v in dims.items():
        cmd += ["--dim", f"{d}={v}"]
    env = dict(os.environ, ORT_NODE=ort_package())
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    # The tool writes rank-0 inputs as [1] (numpy's ascontiguousarray): Tern is fed the arrays
    # given above, and every other input from the reference files.
    model = onnx.load(os.path.join(case, "model.onnx"), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    for k, input_name in enumerate(names):
        path = os.path.join(case, "inputs", input_name + ".npy")
        if not os.path.exists(path):
            t = onnx.load_tensor(os.path.join(case, "test_data_set_0", f"input_{k}.pb"))
            np.save(path, numpy_helper.to_array(t))
    # The noise floor: how far PyTorch's outputs (exported beside the model, same inputs) are
    # from ONNX Runtime's. Deep random networks amplify summation-order differences past ATOL
    # (Inception-v3's logits differ by 6e-4 between the two); Tern may differ by twice as much.
    floor = {}
    for out_name, ref in references(case).items():
        path = os.path.join(export, f"{name}.torch.{out_name}.npy")
        if os.path.exists(path):
            torch_out = np.load(path).astype(np.float64)
            if torch_out.shape == ref.shape:
                floor[out_name] = float(np.abs(torch_out - ref.astype(np.float64)).max())
    with open(os.path.join(case, "floor.json"), "w") as f:
        json.dump(floor, f)


def _torch_case(name, case, export):
    """A reference case from PyTorch's own run, for models ONNX Runtime cannot run (bfloat16
    convolutions and matmuls): the outputs of PyTorch's bfloat16 run, and as the noise floor their
    distance from its float32 run of the same weights."""
    shutil.copy(os.path.join(export, name + ".onnx"), os.path.join(case, "model.onnx"))
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data)
    x = np.load(os.path.join(export, f"{name}.input.npy"))
    np.save(os.path.join(case, "inputs", "input.npy"), x)
    onnx.save_tensor(numpy_helper.from_array(x, "input"), os.path.join(data, "input_0.pb"))
    model = onnx.load(os.path.join(case, "model.onnx"), load_external_data=False)
    floor = {}
    for k, vi in enumerate(model.graph.output):
        ref = np.load(os.path.join(export, f"{name}.torch.{vi.name}.npy"))
        f32 = np.load(os.path.join(export, f"{name}.torch_f32.{vi.name}.npy"))
        onnx.save_tensor(numpy_helper.from_array(ref, vi.name), os.path.join(data, f"output_{k}.pb"))
        floor[vi.name] = float(np.abs(ref.astype(np.float64) - f32).max())
    with open(os.path.join(case, "floor.json"), "w") as f:
        json.dump(floor, f)


def _quantized_case(name, case, export):
    """A quantized model's case: quantize.py's model, ONNX Runtime's outputs for the shared
    model's reference input, and quant.json: each output's quantization step and whether it is
    compared by arg-max too."""
    path = quantize.make(name, export)
    os.makedirs(os.path.join(case, "inputs"))
    cmd = ["/usr/bin/python3", quantize.MAKE_REFERENCE, path, case]
    for input_name, arr in quantize.reference_inputs(quantize.base_folder(name)).items():
        npy = os.path.join(case, "inputs", input_name + ".npy")
        np.save(npy, arr)
        cmd += ["--input", f"{input_name}={npy}"]
    subprocess.run(cmd, check=True, env=dict(os.environ, ORT_NODE=ort_package()),
                   stdout=subprocess.DEVNULL)
    steps = quantize.output_steps(onnx.load(path, load_external_data=False))
    with open(os.path.join(case, "quant.json"), "w") as f:
        json.dump({"steps": steps, "argmax": list(quantize.CASES[name][2])}, f)
    int8 = quantize.run_ort(path, quantize.reference_inputs(case), "all")
    with open(os.path.join(case, "floor.json"), "w") as f:
        json.dump({k: float(np.abs(int8[k].astype(np.float64) - ref).max())
                   for k, ref in references(case).items()}, f)


def references(case):
    out = {}
    k = 0
    while os.path.exists(os.path.join(case, "test_data_set_0", f"output_{k}.pb")):
        t = onnx.load_tensor(os.path.join(case, "test_data_set_0", f"output_{k}.pb"))
        out[t.name] = numpy_helper.to_array(t)
        k += 1
    return out


def close(a, b, atol=ATOL):
    return a.shape == b.shape and np.allclose(a.astype(np.float64), b.astype(np.float64),
                                              rtol=RTOL, atol=atol)


def detections_match(got, want, names):
    """Rows (box, score, label) in descending score order; rows whose scores are within the
    tolerance of each other form a group compared as a set."""
    boxes, scores, labels = names
    if got[boxes].shape != want[boxes].shape:
        return f"{got[boxes].shape[0]} detections, expected {want[boxes].shape[0]}"
    rows = lambda o: np.concatenate([o[boxes], o[scores][:, None], o[labels][:, None]], axis=1)
    g, w = rows(got), rows(want)
    if not close(np.sort(g[:, 4]), np.sort(w[:, 4])):
        return "the scores differ"
    used = np.zeros(len(g), bool)
    for i, row in enumerate(w):
        near = np.where(~used & np.isclose(g[:, 4], row[4], rtol=RTOL, atol=ATOL) &
                        (g[:, 5] == row[5]) &
                        np.all(np.isclose(g[:, :4], row[:4], rtol=RTOL, atol=ATOL), axis=1))[0]
        if len(near) == 0:
            return f"reference detection {i} {row.tolist()} has no match"
        used[near[0]] = True
    return ""


def input_args(case):
    """tern's --input NAME=FILE.npy arguments for the case's reference inputs."""
    return [a for f in sorted(os.listdir(os.path.join(case, "inputs")))
            for a in ("--input", f"{f[:-4]}={os.path.join(case, 'inputs', f)}")]


def run_tern(build, model, case, out_dir, extra):
    cmd = [os.path.join(build, "tern"), "run", model, "--runs", "1", "--threads", "2",
           "--output-dir", out_dir] + extra + input_args(case)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stdout + p.stderr).strip().splitlines()[-1]
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)}, ""


def check(build, name, case, extra, optimized):
    want = references(case)
    floor_file = os.path.join(case, "floor.json")
    floor = json.load(open(floor_file)) if os.path.exists(floor_file) else {}
    quant_file = os.path.join(case, "quant.json")
    quant = json.load(open(quant_file)) if os.path.exists(quant_file) else {"steps": {},
                                                                             "argmax": []}
    forms = [("onnx", os.path.join(case, "model.onnx"), None)]
    converted = [("tern", [])] + ([("opt", ["--optimize"] + input_args(case))] if optimized else [])
    for form, flags in converted:
        tern_file = os.path.join(case, "model.tern" if form == "tern" else "model.opt.tern")
        p = subprocess.run([os.path.join(build, "tern"), "convert", os.path.join(case, "model.onnx"),
                            tern_file] + flags, capture_output=True, text=True)
        forms.append((form, tern_file, None if p.returncode == 0 else
                      "convert failed: " + (p.stdout + p.stderr).strip()))
    results = []
    for form, model, convert_error in forms:
        if convert_error:
            results.append((form, convert_error))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            got, err = run_tern(build, model, case, tmp, extra)
        if got is None:
            results.append((form, err))
            continue
        why = ""
        rows = CORPUS[name][2]
        if rows:
            why = detections_match(got, want, rows)
        for out_name, ref in want.items():
            if why or (rows and out_name in rows):
                continue
            if out_name not in got:
                why = f"no output '{out_name}'"
            elif not close(got[out_name], ref, max(ATOL, 2 * floor.get(out_name, 0.0),
                                                   ATOL + quant["steps"].get(out_name, 0.0))):
                d = np.abs(got[out_name].astype(np.float64) - ref)
                why = (f"output '{out_name}': max abs diff {d.max():.3g}" if got[out_name].shape ==
                       ref.shape else f"output '{out_name}' is {got[out_name].shape}, expected "
                       f"{ref.shape}")
                if out_name in quant["steps"] and got[out_name].shape == ref.shape:
                    why += f" ({d.max() / quant['steps'][out_name]:.3g} quantization steps)"
            elif out_name in quant["argmax"] and \
                    np.argmax(got[out_name]) != np.argmax(ref):
                why = (f"output '{out_name}': arg-max {np.argmax(got[out_name])}, expected "
                       f"{np.argmax(ref)}")
        results.append((form, why))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("names", nargs="*")
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    ap.add_argument("--models", default=os.path.join(cache, "tern", "corpus"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="models exported and checked at once")
    ap.add_argument("--backends", help="tern run's --backends for every run (e.g. cuda,cpu)")
    ap.add_argument("--flag", action="append", default=[], metavar="NAME=VALUE",
                    help="a session flag for every run (repeatable)")
    ap.add_argument("--cached", action="store_true",
                    help="check the cases under --models as they are, making none (no export, "
                         "no ONNX Runtime): for a machine the cache was copied to; the names "
                         "default to the cases there")
    ap.add_argument("--optimized", action="store_true",
                    help="also check the model converted with tern convert --optimize (form opt)")
    args = ap.parse_intermixed_args()
    if not args.cached and (shutil.which("node") is None or shutil.which("npm") is None):
        print("model_corpus skipped: node and npm are needed for ONNX Runtime's references")
        return 77
    extra = (["--backends", args.backends] if args.backends else []) + \
        [a for f in args.flag for a in ("--flag", f)]
    names = args.names or ([n for n in CORPUS if os.path.exists(
        os.path.join(args.models, n, "test_data_set_0"))] if args.cached else list(CORPUS))
    unknown = [n for n in names if n not in CORPUS]
    if unknown:
        sys.exit(f"check_corpus.py: unknown model {', '.join(unknown)} (known: {', '.join(CORPUS)})")
    build = os.path.abspath(args.build)
    if args.cached:
        missing = [n for n in names if not os.path.exists(os.path.join(args.models, n, "stamp"))]
        if missing:
            sys.exit(f"check_corpus.py: no cached case for {', '.join(missing)} in {args.models}")
    else:
        for n in [n for n in names if n in quantize.CASES and quantize.missing(n)]:
            print(f"{n:16s} skipped: {quantize.missing(n)}")
            names.remove(n)
        # Installed once, before the workers need it (quantize.py's runs too).
        os.environ.setdefault("ORT_NODE", ort_package())

    def one(name):
        if args.cached:
            return check(build, name, os.path.join(args.models, name), extra, args.optimized)
        try:
            case = prepare(name, args.models, scripts_stamp(name))
        except subprocess.CalledProcessError as e:
            return [("onnx", f"export or reference failed: {' '.join(e.cmd[:3])}... exit "
                             f"{e.returncode}")]
        except RuntimeError as e:  # quantize.py's ONNX Runtime runs
            return [("onnx", f"quantization failed: {e}")]
        return check(build, name, case, extra, args.optimized)

    passed = failed = 0
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = pool.map(one, names)
    for name, result in zip(names, results):
        for form, why in result:
            print(f"{name:16s} {form:5s} {'ok' if not why else 'FAIL: ' + why}")
            passed += not why
            failed += bool(why)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
