"""DLPack both ways: NumPy arrays and PyTorch tensors into Tern and Tern's tensors and outputs out,
sharing memory, with each side's memory alive as long as the other uses it."""
import gc

import numpy as np
import pytest

import tern
from conftest import matmul_model


def test_numpy_into_tern_zero_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tern.from_dlpack(a)
    assert t.shape == (3, 4) and t.dtype == np.float32
    assert t.data_ptr == a.ctypes.data
    view = t.numpy()
    assert np.shares_memory(view, a)
    a[1, 1] = 42
    assert view[1, 1] == 42


def test_tern_tensor_into_numpy_and_back():
    session = tern.Session(tern.Model(matmul_model()), threads=1)
    x = np.linspace(0, 1, 16, dtype=np.float32).reshape(2, 8)
    t = next(iter(session.run({session.inputs[0].name: x}, as_tensors=True).values()))
    want = t.numpy().copy()
    a = np.from_dlpack(t)  # NumPy < 2 asks for an unversioned capsule (and marks a read-only)
    assert a.ctypes.data == t.data_ptr
    back = tern.from_dlpack(t.__dlpack__())  # an unversioned capsule back into Tern
    assert back.data_ptr == t.data_ptr
    del t, session
    gc.collect()
    assert a.tobytes() == want.tobytes() and back.numpy().tobytes() == want.tobytes()
    # The versioned protocol, as a DLPack 1.x consumer asks for it.
    cap = back.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    again = tern.from_dlpack(cap)
    assert again.data_ptr == back.data_ptr
    with pytest.raises(tern.InvalidArgument):
        tern.from_dlpack(cap)  # consumed
    assert back.__dlpack_device__() == (1, 0)


def test_unconsumed_capsules_free_their_memory():
    t = tern.from_dlpack(np.ones(4, np.float32))
    for v in (None, (1, 0)):
        cap = t.__dlpack__(max_version=v)
        del cap  # the capsule's destructor runs the deleter; nothing leaks or crashes
    gc.collect()
    assert t.numpy().sum() == 4


def test_output_arrays_export_dlpack_to_torch():
    torch = pytest.importorskip("torch")
    session = tern.Session(tern.Model(matmul_model()), threads=1)
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(3, 8)
    y = session.run({session.inputs[0].name: x})[session.outputs[0].name]
    ty = torch.from_dlpack(y)  # NumPy's own __dlpack__, over Tern's memory
    assert ty.data_ptr() == y.ctypes.data
    t = session.run({session.inputs[0].name: x}, as_tensors=True)[session.outputs[0].name]
    tt = torch.from_dlpack(t)  # a tern.Tensor's __dlpack__
    assert tt.data_ptr() == t.data_ptr
    want = t.numpy().copy()
    del t, session
    gc.collect()
    assert np.array_equal(tt.numpy(), want)


def test_torch_into_tern_and_as_a_run_input():
    torch = pytest.importorskip("torch")
    session = tern.Session(tern.Model(matmul_model()), threads=1)
    name, out = session.inputs[0].name, session.outputs[0].name
    x = torch.linspace(-1, 1, 16, dtype=torch.float32).reshape(2, 8)
    t = tern.from_dlpack(x)
    assert t.data_ptr == x.data_ptr() and t.shape == (2, 8)
    a = session.run({name: x})[out]  # a torch tensor as an input, in place
    b = session.run({name: x.numpy()})[out]
    assert a.tobytes() == b.tobytes()
    del x
    gc.collect()
    assert t.numpy()[0, 0] == -1  # Tern keeps the torch storage alive
    for dt, npdt in ((torch.int64, np.int64), (torch.float16, np.float16),
                     (torch.uint8, np.uint8), (torch.float64, np.float64)):
        src = torch.zeros(3, dtype=dt)
        assert tern.from_dlpack(src).dtype == npdt


def test_views_tern_cannot_represent_are_refused():
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with pytest.raises(tern.Unsupported) as e:
        tern.from_dlpack(x.t())
    assert "contiguous" in e.value.message
    with pytest.raises(tern.Unsupported):
        tern.from_dlpack(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(tern.InvalidArgument):
        tern.from_dlpack(object())
    # As a run input, a view is copied instead (like a non-contiguous NumPy array).
    session = tern.Session(tern.Model(matmul_model()), threads=1)
    name = session.inputs[0].name
    v = torch.arange(16, dtype=torch.float32).reshape(8, 2).t()
    got = session.run({name: v.numpy()})
    want = session.run({name: v.contiguous().numpy()})
    for k in got:
        assert got[k].tobytes() == want[k].tobytes()
