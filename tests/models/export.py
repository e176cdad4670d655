#!/usr/bin/python3
"""Exports the model corpus with Debian's python3-torch (random weights, seeded) into a folder
outside git, default ~/.cache/tern/models, and, with --reference, makes an ONNX Runtime reference
case for each (../shared/tools/ort_reference/make_reference.py; needs node and onnxruntime-node).

  tests/models/export.py [--out DIR] [--reference] [NAME ...]

NAME: gpt_decoder (prefill and decode graphs, KV cache as inputs/outputs), var_encoder (any
sequence length up to 512), lstm and gru (2 layers, bidirectional, initial states), greedy_loop
(a data-dependent Loop), streaming_vad (an If on the sample rate, LSTM state in and out),
paste_masks (Mask R-CNN's mask pasting: a Loop appending to its carried tensor),
ssdlite and faster_rcnn (torchvision detectors on MobileNetV3), and the vision models and
building blocks of vision.py and blocks.py (their CASES).
Without NAME, every model. Prints each file written.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

MODELS = {
    "gpt_decoder": ("transformers", "export_gpt_decoder", {"seq": 32, "past": 40}),
    "var_encoder": ("transformers", "export_var_encoder", {"seq": 77}),
    "lstm": ("recurrent", "export_lstm", {"batch": 1, "seq": 200}),
    "gru": ("recurrent", "export_gru", {"batch": 1, "seq": 200}),
    "greedy_loop": ("recurrent", "export_greedy_loop", {}),
    "streaming_vad": ("recurrent", "export_streaming_vad", {}),
    "paste_masks": ("recurrent", "export_paste_masks", {}),
    "ssdlite": ("detection", "export_ssdlite", {}),
    "faster_rcnn": ("detection", "export_faster_rcnn", {}),
}
# torchvision classifiers, segmenters, video networks and a detection backbone (vision.py), and
# torch.nn building blocks (blocks.py): export(name, out_dir) each.
for _module in ("vision", "blocks"):
    for _name in __import__(_module).CASES:
        MODELS[_name] = (_module, "export", {})


def default_out():
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.path.join(cache, "tern", "models")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--out", default=default_out())
    ap.add_argument("--reference", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.names or list(MODELS):
        if name not in MODELS:
            sys.exit(f"export.py: unknown model {name} (known: {', '.join(MODELS)})")
        module, fn, dims = MODELS[name]
        mod = __import__(module)
        paths = getattr(mod, fn)(name, args.out) if fn == "export" else getattr(mod, fn)(args.out)
        for p in paths:
            print(p)
            if args.reference:
                case = os.path.splitext(p)[0]
                tool = os.path.join(ROOT, "..", "shared", "tools", "ort_reference",
                                    "make_reference.py")
                cmd = ["/usr/bin/python3", tool, p, case]
                for d, v in dims.items():
                    cmd += ["--dim", f"{d}={v}"]
                subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
