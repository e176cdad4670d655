"""tern.dask on a LocalCluster of 2 worker processes: a few hundred inputs through the PP-OCR
classifier (or a small generated ONNX model when ../shared is absent), every result equal to a
single-process run, and each worker process loading its session once."""
import os

import numpy as np
import pytest

import tern
import tern.dask as tdask
from conftest import ROOT

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")


def model_and_inputs(tmp_path, n):
    path = os.path.normpath(os.path.join(os.environ.get("TERN_SHARED_DIR",
                                                        os.path.join(ROOT, "..", "shared")),
                                         "models", "ppocr_cls", "model.onnx"))
    rng = np.random.default_rng(7)
    if os.path.exists(path):
        return path, rng.random((n, 3, 48, 192), dtype=np.float32), "softmax_0.tmp_0"
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["y"])],
        "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = str(tmp_path / "small.onnx")
    onnx.save(model, path)
    return path, rng.random((n, 8), dtype=np.float32), "y"


@pytest.fixture(scope="module")
def client():
    # Worker processes import this package and find libtern as this process does.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(tern.__file__))] +
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=40)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_map_blocks_and_bag_on_two_worker_processes(client, tmp_path):
    n, chunk = 320, 16
    path, x, out = model_and_inputs(tmp_path, n)
    opts = {"threads": 1}
    # The single-process reference: one batch at a time, the same batches.
    ref_session = tern.Session(tern.Model(path), threads=1)
    want = np.concatenate([ref_session.run({ref_session.inputs[0].name: x[i:i + chunk]}, [out])[0]
                           for i in range(0, n, chunk)])
    arr = da.from_array(x, chunks=(chunk,) + x.shape[1:])
    got = tdask.map_blocks(path, arr, output=out, **opts).compute()
    assert got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    info = client.run(tdask.process_info)
    assert len(info) == 2 and len({v["pid"] for v in info.values()}) == 2
    assert all(v["pid"] != os.getpid() for v in info.values())
    # Every worker that ran a task loaded the session exactly once (16+ tasks, 2 workers).
    assert sorted(v["loads"] for v in info.values()) == [1, 1], info

    # A bag of single inputs through the same cached sessions: one output dict per item.
    items = [x[i:i + 1] for i in range(0, 64)]
    bag = db.from_sequence(items, npartitions=8)
    res = tdask.map_bag(path, bag, **opts).compute()
    assert len(res) == 64
    for i, r in enumerate(res):
        single = ref_session.run({ref_session.inputs[0].name: items[i]}, [out])[0]
        assert r[out].tobytes() == single.tobytes()
    info = client.run(tdask.process_info)
    assert sorted(v["loads"] for v in info.values()) == [1, 1], info
