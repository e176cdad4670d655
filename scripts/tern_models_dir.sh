#!/usr/bin/env bash
# Fills DIR with .tern conversions of ../shared/models made by a full build, and their reference
# inputs and outputs as .npy (NAME.tern, NAME.input_I.npy, NAME.output_I.npy), for builds without
# the ONNX importer: TERN_TEST_TERN_MODELS=DIR tern_unit_tests runs them (models suite).
# Usage: scripts/tern_models_dir.sh FULL_BUILD_DIR DIR [MODEL ...]   (default: ppocr_cls)
set -euo pipefail
cd "$(dirname "$0")/.."
full="$1" out="$2"
shift 2
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(ppocr_cls)
shared="$(pwd)/../shared/models"
mkdir -p "$out"
for m in "${models[@]}"; do
  "$full/tern" convert "$shared/$m/model.onnx" "$out/$m.tern" > /dev/null
  /usr/bin/python3 - "$shared/$m/test_data_set_0" "$out" "$m" <<'PY'
import glob, os, sys
import numpy as np
from onnx import TensorProto, numpy_helper
src, out, name = sys.argv[1:]
for kind in ("input", "output"):
    for path in sorted(glob.glob(os.path.join(src, kind + "_*.pb"))):
        t = TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        i = os.path.basename(path)[len(kind) + 1:-3]
        np.save(os.path.join(out, f"{name}.{kind}_{i}.npy"), numpy_helper.to_array(t))
PY
done
ls "$out"
