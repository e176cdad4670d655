"""tern.Model / tern.Session: the PP-OCR classifier bitwise equal to `tern run`, zero-copy inputs
and outputs, errors, run options, threads."""
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import tern
from conftest import matmul_model, tern_cli


def cls_input(batch=1, seed=0):
    return np.random.default_rng(seed).random((batch, 3, 48, 192), dtype=np.float32)


def test_version_and_library():
    assert tern.__version__.count(".") == 2
    assert os.path.exists(tern.library_path)
    assert "Tern" in tern.config_show()
    assert "threads" in tern.parallel_info().lower()
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from_source = os.path.abspath(tern.__file__).startswith(source + os.sep)
    assert from_source == (os.environ.get("TERN_PY_INSTALLED") != "1"), tern.__file__


def test_ppocr_cls_bitwise_equal_to_tern_run(cls_path, tmp_path):
    cli = tern_cli()
    model = tern.Model(cls_path)
    assert [i.name for i in model.inputs] == ["x"]
    assert model.inputs[0].shape[1] == 3 and model.inputs[0].dtype == np.float32
    x = cls_input(batch=2)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([cli, "run", cls_path, "--input", f"x={tmp_path / 'x.npy'}", "--threads", "1",
                    "--runs", "1", "--output-dir", str(tmp_path / "out")], check=True,
                   stdout=subprocess.DEVNULL)
    session = tern.Session(model, threads=1)
    out = session.run({"x": x})
    assert list(out) == [o.name for o in model.outputs]
    for name, got in out.items():
        want = np.load(tmp_path / "out" / (name.replace("/", "_").replace(":", "_") + ".npy"))
        assert got.dtype == want.dtype and got.shape == want.shape == (2, 2)
        assert got.tobytes() == want.tobytes(), f"{name}: differs from tern run"
        np.testing.assert_allclose(got.sum(axis=1), 1, rtol=1e-5)
    # From bytes too, with the outputs as a list.
    with open(cls_path, "rb") as f:
        again = tern.Session(tern.Model(f.read()), threads=1).run({"x": x}, ["softmax_0.tmp_0"])
    assert again[0].tobytes() == out["softmax_0.tmp_0"].tobytes()


def test_inputs_zero_copy_and_non_contiguous_copied_once():
    model = tern.Model(matmul_model())
    session = tern.Session(model, threads=1)
    name = model.inputs[0].name
    x = np.arange(24, dtype=np.float32).reshape(3, 8) / 10
    # A tensor borrowed from an array shares its memory (the path Session.run takes).
    from tern._tensor import tensor_from_array
    h, arr = tensor_from_array(x)
    t = tern.Tensor(h)
    assert arr is x and t.data_ptr == x.ctypes.data
    assert np.shares_memory(t.numpy(), x)
    del t
    # Non-contiguous: copied into a contiguous array, same results as the explicit copy.
    wide = np.zeros((3, 16), dtype=np.float32)
    wide[:, ::2] = x
    view = wide[:, ::2]
    assert not view.flags.c_contiguous
    h2, arr2 = tensor_from_array(view)
    assert arr2.flags.c_contiguous and not np.shares_memory(arr2, wide)
    tern.Tensor(h2)
    a = session.run({name: view})
    b = session.run({name: x.copy()})
    for k in a:
        assert a[k].tobytes() == b[k].tobytes()
    # A read-only array is fine as an input (runs only read their inputs).
    ro = x.copy()
    ro.flags.writeable = False
    assert session.run({name: ro})[model.outputs[0].name].tobytes() == b[model.outputs[0].name].tobytes()


def test_outputs_are_tern_memory_and_outlive_the_session():
    model = tern.Model(matmul_model())
    session = tern.Session(model, threads=1)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    out = session.run({model.inputs[0].name: x}, as_tensors=True)
    t = next(iter(out.values()))
    assert isinstance(t, tern.Tensor)
    arr = t.numpy()
    assert arr.ctypes.data == t.data_ptr  # no copy
    assert arr.base is t
    want = arr.copy()
    y = session.run({model.inputs[0].name: x})[model.outputs[0].name]
    assert isinstance(y.base, tern.Tensor) and y.ctypes.data == y.base.data_ptr
    del session, model, t, out
    assert arr.tobytes() == want.tobytes()  # the array keeps its tensor alive
    assert y.tobytes() == want.tobytes()


def test_errors_carry_status_and_message(tmp_path):
    with pytest.raises(tern.IOError) as e:
        tern.Model(str(tmp_path / "missing.onnx"))
    assert e.value.status == 6 and "missing.onnx" in e.value.message
    assert isinstance(e.value, tern.TernError) and isinstance(e.value, OSError)
    assert str(e.value).startswith("TERN_ERR_IO: ")
    with pytest.raises((tern.InvalidModel, tern.Unsupported)):
        tern.Model(b"definitely not a model")
    model = tern.Model(matmul_model())
    session = tern.Session(model)
    name = model.inputs[0].name
    with pytest.raises(tern.InvalidArgument) as e:
        session.run({name: np.zeros((2, 5), np.float32)})
    assert name in e.value.message and e.value.status == 1
    with pytest.raises(tern.InvalidArgument):
        session.run({"nope": np.zeros((2, 8), np.float32)})
    with pytest.raises(tern.Unsupported):
        session.run({name: np.zeros((2, 8), np.complex64)})
    with pytest.raises(tern.InvalidArgument):
        tern.Session(model, backends="nosuchbackend")
    with pytest.raises(tern.InvalidArgument) as e:
        tern.Session(model, flags={"no.such.flag": 1})
    with pytest.raises(tern.InvalidArgument):
        tern.set_num_threads(0)


def test_run_options_deadline_and_cancel(cls_path):
    session = tern.Session(tern.Model(cls_path), threads=1)
    x = cls_input(batch=8)
    session.run({"x": x}, timeout_ms=60_000)  # generous: passes
    opts = tern.RunOptions()
    opts.cancel()
    with pytest.raises(tern.Cancelled):
        session.run({"x": x}, run_options=opts)
    opts.clear_cancel()
    session.run({"x": x}, run_options=opts)
    # A cancel from another thread during runs stops them.
    opts = tern.RunOptions()
    errors = []

    def loop():
        try:
            for _ in range(10_000):
                session.run({"x": x}, run_options=opts)
        except tern.Cancelled as e:
            errors.append(e)

    th = threading.Thread(target=loop)
    th.start()
    time.sleep(0.2)
    opts.cancel()
    th.join(60)
    assert errors and errors[0].status == 8
    with pytest.raises(tern.InvalidArgument):
        session.run({"x": x}, timeout_ms=5, run_options=opts)


def test_gil_released_during_runs(cls_path):
    """While another Python thread is inside Session.run, this one keeps running Python code:
    with the GIL held for the call it would stand still for the call's length."""
    session = tern.Session(tern.Model(cls_path), threads=1)
    x = cls_input(batch=64)
    session.run({"x": x})
    t0 = time.perf_counter()
    session.run({"x": x})
    one_run = time.perf_counter() - t0
    inside = threading.Event()
    done = threading.Event()

    def worker():
        inside.set()
        for _ in range(3):
            session.run({"x": x})
        done.set()

    th = threading.Thread(target=worker)
    th.start()
    inside.wait()
    ticks, t_start = 0, time.perf_counter()
    longest_gap, last = 0.0, t_start
    while not done.is_set():
        now = time.perf_counter()
        longest_gap = max(longest_gap, now - last)
        last = now
        ticks += 1
    th.join()
    # Held, this thread would see no tick for a whole run (one_run seconds); released, its
    # longest pause is a scheduling slice. Loose bound for a loaded machine.
    assert longest_gap < 0.8 * one_run, (longest_gap, one_run, ticks)


def test_two_threads_share_one_session(cls_path):
    session = tern.Session(tern.Model(cls_path), threads=1)
    xs = [cls_input(batch=2, seed=s) for s in range(2)]
    want = [session.run({"x": x})["softmax_0.tmp_0"].tobytes() for x in xs]
    got = [[], []]

    def run(i):
        for _ in range(5):
            got[i].append(session.run({"x": xs[i]})["softmax_0.tmp_0"].tobytes())

    ths = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    for i in range(2):
        assert all(g == want[i] for g in got[i])


def test_session_metadata():
    model = tern.Model(matmul_model())
    session = tern.Session(model, backends=["cpu"], threads=1, interop_threads=1,
                           flags={"graph.optimize": False})
    assert [i.name for i in session.inputs] == [i.name for i in model.inputs]
    assert session.inputs[0].shape[1] == 8 and session.inputs[0].tern_dtype == "float32"
    assert len(session.outputs) == 1
