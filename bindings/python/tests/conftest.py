"""pytest setup: the package from this source tree (unless TERN_PY_INSTALLED=1 tests an installed
one), libtern from TERN_LIBRARY or the repository's build/, the CLI from TERN_CLI or build/tern,
and the PP-OCR classifier from ../shared (tests needing it skip with a message when absent)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
BUILD = os.environ.get("TERN_BUILD_DIR", os.path.join(ROOT, "build"))

if os.environ.get("TERN_PY_INSTALLED") != "1":
    sys.path.insert(0, os.path.dirname(HERE))
if "TERN_LIBRARY" not in os.environ and os.path.exists(os.path.join(BUILD, "libtern.so")):
    os.environ["TERN_LIBRARY"] = os.path.join(BUILD, "libtern.so")


def shared_model(name):
    root = os.environ.get("TERN_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
    path = os.path.normpath(os.path.join(root, "models", name, "model.onnx"))
    if not os.path.exists(path):
        pytest.skip(f"skipped: {path} is absent")
    return path


def tern_cli():
    path = os.environ.get("TERN_CLI", os.path.join(BUILD, "tern"))
    if not os.path.exists(path):
        pytest.skip(f"skipped: the tern CLI {path} is absent")
    return path


@pytest.fixture
def cls_path():
    return shared_model("ppocr_cls")


def matmul_model():
    """The repository's seed model: x [batch, 8] -> MatMul, Add, Reshape, Softmax."""
    return os.path.join(ROOT, "tests", "fuzz", "corpus", "tern_loader", "matmul.tern")
