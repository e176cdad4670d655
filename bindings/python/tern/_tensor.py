"""tern.Tensor: a tern_tensor owned from Python, seen by NumPy through __array_interface__ and
by DLPack consumers through __dlpack__, without copies."""
from __future__ import annotations

import ctypes

import numpy as np

from . import _dlpack, _lib
from ._errors import InvalidArgument, Unsupported

# tern_dtype code <-> NumPy dtype. bfloat16 has no NumPy type: its tensors show as uint16 bits.
_TO_NUMPY = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
             7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
             13: np.uint64, 16: np.uint16}
_FROM_NUMPY = {np.dtype(v): k for k, v in _TO_NUMPY.items() if k != 16}
DTYPE_NAMES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
               7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32",
               13: "uint64", 16: "bfloat16"}


def numpy_dtype(code: int) -> np.dtype:
    try:
        return np.dtype(_TO_NUMPY[code])
    except KeyError:
        raise Unsupported(f"tern dtype {DTYPE_NAMES.get(code, code)} has no NumPy type") from None


def tern_dtype(dt) -> int:
    dt = np.dtype(dt)
    try:
        return _FROM_NUMPY[dt if dt.isnative else dt.newbyteorder("=")]
    except KeyError:
        raise Unsupported(f"NumPy dtype {dt} has no tern dtype") from None


class Tensor:
    """A tensor in Tern's memory (a tern_tensor handle, destroyed with this object).

    `np.asarray(t)` (or `t.numpy()`) is a NumPy array over the same memory whose `.base` is `t`,
    so the memory lives as long as the array does. `t.__dlpack__()` shares it with any DLPack
    consumer (`torch.from_dlpack(t)`, `np.from_dlpack(t)`), which keeps it alive on its own.
    """

    __slots__ = ("_p", "__weakref__")

    def __init__(self, handle: int):
        if not handle:
            raise InvalidArgument("NULL tensor handle")
        self._p = handle

    @classmethod
    def _adopt(cls, handle: int) -> "Tensor":
        return cls(handle)

    def __del__(self):
        p, self._p = getattr(self, "_p", None), None
        if p and _lib is not None and _lib.lib is not None:
            _lib.lib.tern_tensor_destroy(p)

    @property
    def handle(self) -> int:
        """The tern_tensor* (for other ctypes code), valid while this object lives."""
        return self._p

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(_lib.lib.tern_tensor_dtype(self._p))

    @property
    def shape(self) -> tuple:
        rank = _lib.lib.tern_tensor_rank(self._p)
        dims = _lib.lib.tern_tensor_shape(self._p)
        return tuple(int(dims[i]) for i in range(rank))

    @property
    def nbytes(self) -> int:
        return int(_lib.lib.tern_tensor_byte_size(self._p))

    @property
    def device(self) -> str:
        return _lib.text(_lib.lib.tern_tensor_device(self._p))

    @property
    def read_only(self) -> bool:
        return bool(_lib.lib.tern_tensor_is_read_only(self._p))

    @property
    def data_ptr(self) -> int:
        return _lib.lib.tern_tensor_data(self._p) or 0

    @property
    def __array_interface__(self) -> dict:
        if self.device != "cpu":
            raise Unsupported(f"a tensor on {self.device} is not host memory")
        dt = self.dtype
        ptr = self.data_ptr
        if ptr == 0:  # empty: NumPy wants some address
            ptr = ctypes.addressof(_EMPTY)
        return {"version": 3, "shape": self.shape, "typestr": dt.str,
                "data": (ptr, self.read_only)}

    def numpy(self) -> np.ndarray:
        """A NumPy array over this tensor's memory (no copy); its .base is this tensor."""
        return np.asarray(self)

    def __dlpack__(self, stream=None, *, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("tern.Tensor exports its memory without copies (copy=True asked)")
        if dl_device is not None and tuple(dl_device)[0] != self.__dlpack_device__()[0]:
            raise BufferError(f"the tensor is on {self.device}, {dl_device} was asked")
        return _dlpack.capsule_from_tensor(self._p, _dlpack.wants_versioned(max_version))

    def __dlpack_device__(self) -> tuple:
        dev = self.device
        if dev == "cpu":
            return (_dlpack.kDLCPU, 0)
        if dev.startswith("cuda"):
            return (_dlpack.kDLCUDA, int(dev.split(":")[1]) if ":" in dev else 0)
        raise Unsupported(f"a tensor on {dev} has no DLPack device")

    def __repr__(self) -> str:
        try:
            return f"tern.Tensor(shape={self.shape}, dtype={self.dtype}, device={self.device!r})"
        except Exception:  # a dtype without a NumPy type
            return f"tern.Tensor(shape={self.shape})"


_EMPTY = ctypes.c_char(0)


def from_dlpack(obj) -> Tensor:
    """A tern.Tensor sharing the memory of any object with __dlpack__ (NumPy arrays, PyTorch
    tensors, ...) or of a DLPack capsule, without a copy. The producer's memory stays alive until
    the tensor (and any run using it) is done. CPU memory, C-contiguous (a transposed or sliced
    view raises tern.Unsupported: copy it first)."""
    return Tensor(_dlpack.tensor_from_object(obj))


def tensor_from_array(a) -> tuple:
    """A tern_tensor* over a NumPy array's memory (borrowed: the caller keeps the array alive
    while the handle is used) and the array used; non-C-contiguous arrays are copied once."""
    a = np.asarray(a)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    code = tern_dtype(a.dtype)
    shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
    out = ctypes.c_void_p()
    _lib.check(_lib.lib.tern_tensor_create_from_data(
        code, shape, a.ndim, a.ctypes.data if a.size else None, a.nbytes, None, None,
        ctypes.byref(out)))
    return out.value, a
