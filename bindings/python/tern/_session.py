"""tern.Model, tern.Session and tern.RunOptions over the C ABI."""
from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, byref, c_char_p, c_int, c_int64, c_size_t, c_void_p
from typing import NamedTuple

import numpy as np

from . import _lib
from ._errors import InvalidArgument
from ._tensor import DTYPE_NAMES, Tensor, _TO_NUMPY, from_dlpack, tensor_from_array

SDP_BACKENDS = {"MATH": 0, "FLASH_ATTENTION": 1, "FLASH": 1, "EFFICIENT_ATTENTION": 2,
                "MEM_EFFICIENT": 2, "CUDNN_ATTENTION": 3, "CUDNN": 3}


class ValueInfo(NamedTuple):
    """A model input or output: its name, NumPy dtype (None for a dtype NumPy lacks), Tern's
    dtype name, and shape (None for a dim not known before a run; None for the whole shape when
    the model declares none)."""
    name: str
    dtype: object
    tern_dtype: str
    shape: tuple | None


def _flag_text(v) -> bytes:
    if isinstance(v, bool):
        return b"true" if v else b"false"
    return str(v).encode()


class Model:
    """A loaded model (tern_model): Model("model.onnx" | "model.tern" | pathlib.Path | bytes).
    Immutable; may be shared by any number of sessions and threads."""

    def __init__(self, path_or_bytes):
        out = c_void_p()
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            buf = bytes(path_or_bytes)
            _lib.check(_lib.lib.tern_model_load_memory(buf, len(buf), byref(out)))
            self.path = None
        else:
            path = os.fspath(path_or_bytes)
            _lib.check(_lib.lib.tern_model_load_file(path.encode(), byref(out)))
            self.path = path
        self._p = out.value
        self.inputs = self._infos(_lib.lib.tern_model_input_count, _lib.lib.tern_model_input_name,
                                  _lib.lib.tern_model_input_info)
        self.outputs = self._infos(_lib.lib.tern_model_output_count,
                                   _lib.lib.tern_model_output_name,
                                   _lib.lib.tern_model_output_info)

    def _infos(self, count, name, info) -> list:
        out = []
        for i in range(count(self._p)):
            dt, rank, dims = c_int(), c_size_t(), POINTER(c_int64)()
            _lib.check(info(self._p, i, byref(dt), byref(rank), byref(dims)))
            shape = (tuple(None if dims[j] < 0 else int(dims[j]) for j in range(rank.value))
                     if dims else None)
            np_dt = np.dtype(_TO_NUMPY[dt.value]) if dt.value in _TO_NUMPY else None
            out.append(ValueInfo(_lib.text(name(self._p, i)), np_dt,
                                 DTYPE_NAMES.get(dt.value, str(dt.value)), shape))
        return out

    def save(self, path) -> None:
        """Writes the model as .tern."""
        _lib.check(_lib.lib.tern_model_save(self._p, os.fspath(path).encode()))

    def __del__(self):
        p, self._p = getattr(self, "_p", None), None
        if p and _lib.lib is not None:
            _lib.lib.tern_model_destroy(p)

    def __repr__(self) -> str:
        return (f"tern.Model(inputs={[i.name for i in self.inputs]}, "
                f"outputs={[o.name for o in self.outputs]})")


class RunOptions:
    """Options for runs (tern_run_options): a deadline, run-scoped flags, the attention backends
    allowed, and cancel() — which any thread may call while runs using these options are in
    flight (they raise tern.Cancelled). Cancel is sticky until clear_cancel()."""

    def __init__(self, timeout_ms: int | None = None, flags: dict | None = None,
                 sdp_backends=None):
        out = c_void_p()
        _lib.check(_lib.lib.tern_run_options_create(byref(out)))
        self._p = out.value
        if timeout_ms is not None:
            self.set_timeout_ms(timeout_ms)
        for k, v in (flags or {}).items():
            self.set_flag(k, v)
        if sdp_backends is not None:
            self.set_sdp_backends(sdp_backends)

    def set_timeout_ms(self, ms: int) -> None:
        """A deadline per run, from its start (0: none); a run past it raises
        tern.DeadlineExceeded."""
        _lib.check(_lib.lib.tern_run_options_set_deadline_ms(self._p, int(ms)))

    def set_flag(self, name: str, value) -> None:
        _lib.check(_lib.lib.tern_run_options_set_flag(self._p, name.encode(), _flag_text(value)))

    def set_sdp_backends(self, backends) -> None:
        codes = [sdp_backend_code(b) for b in backends]
        arr = (c_int * max(len(codes), 1))(*codes)
        _lib.check(_lib.lib.tern_run_options_set_sdp_backends(self._p, arr, len(codes)))

    def cancel(self) -> None:
        _lib.check(_lib.lib.tern_run_options_cancel(self._p))

    def clear_cancel(self) -> None:
        _lib.check(_lib.lib.tern_run_options_clear_cancel(self._p))

    def __del__(self):
        p, self._p = getattr(self, "_p", None), None
        if p and _lib.lib is not None:
            _lib.lib.tern_run_options_destroy(p)


def sdp_backend_code(b) -> int:
    """A tern_sdp_backend from an SDPBackend member, its name ("MATH", "FLASH_ATTENTION", ...)
    or its int."""
    if isinstance(b, int):
        return int(b)
    name = getattr(b, "name", b)
    try:
        return SDP_BACKENDS[str(name).upper()]
    except KeyError:
        raise InvalidArgument(f"unknown attention backend {b!r}; known: "
                              f"{sorted(SDP_BACKENDS)}") from None


class Session:
    """A model compiled for its backends (tern_session).

        Session(model, backends="cpu" | ["cuda", "cpu"], threads=0, interop_threads=0,
                flags={"graph.optimize": True}, cpu_fallback=True, max_memory_bytes=0)

    threads / interop_threads 0 follow the process values (tern.set_num_threads). flags are
    session-scoped flags by name (`tern info --flags`). run() may be called from many Python
    threads at once: the GIL is released for the length of each run.
    """

    def __init__(self, model, backends=None, threads: int = 0, interop_threads: int = 0,
                 flags: dict | None = None, cpu_fallback: bool = True,
                 max_memory_bytes: int = 0):
        if not isinstance(model, Model):
            model = Model(model)
        o = c_void_p()
        _lib.check(_lib.lib.tern_session_options_create(byref(o)))
        try:
            if backends is not None:
                text = backends if isinstance(backends, str) else ",".join(backends)
                _lib.check(_lib.lib.tern_session_options_set_backends(o, text.encode()))
            _lib.check(_lib.lib.tern_session_options_set_cpu_fallback(o, int(bool(cpu_fallback))))
            _lib.check(_lib.lib.tern_session_options_set_num_threads(o, int(threads)))
            _lib.check(_lib.lib.tern_session_options_set_num_interop_threads(
                o, int(interop_threads)))
            if max_memory_bytes:
                _lib.check(_lib.lib.tern_session_options_set_max_memory_bytes(
                    o, int(max_memory_bytes)))
            for k, v in (flags or {}).items():
                _lib.check(_lib.lib.tern_session_options_set_flag(o, k.encode(), _flag_text(v)))
            out = c_void_p()
            _lib.check(_lib.lib.tern_session_create(model._p, o, byref(out)))
        finally:
            _lib.lib.tern_session_options_destroy(o)
        self._p = out.value
        self.inputs = list(model.inputs)
        self.outputs = list(model.outputs)
        self._output_names = [o.name for o in self.outputs]

    def run(self, inputs: dict, outputs=None, *, timeout_ms: int | None = None,
            run_options: RunOptions | None = None, as_tensors: bool = False):
        """Runs the model.

        inputs: {name: value}; a value is a NumPy array (C-contiguous ones are used in place,
        others copied once into a contiguous array), a tern.Tensor, or any object with
        __dlpack__ such as a PyTorch tensor (used in place). outputs: None for every output,
        returned as a dict by name; or a list of names, returned as a list in that order. Each
        output is a NumPy array over Tern's memory, no copy: its .base is the tern.Tensor owning
        the memory, freed when the array goes (as_tensors=True returns the tern.Tensors).
        timeout_ms: a deadline for this run (tern.DeadlineExceeded past it); run_options: a
        RunOptions (for cancel() from another thread, flags); both may be given.
        """
        names = self._output_names if outputs is None else list(outputs)
        ro = run_options
        if timeout_ms is not None:
            if run_options is not None:
                raise InvalidArgument("give timeout_ms or run_options, not both (set the "
                                      "deadline on the RunOptions: set_timeout_ms)")
            ro = RunOptions(timeout_ms=timeout_ms)
        keep, handles, owned = [], [], []
        try:
            for name, v in inputs.items():
                if isinstance(v, Tensor):
                    handles.append(v.handle)
                    keep.append(v)
                elif isinstance(v, np.ndarray) or not hasattr(v, "__dlpack__"):
                    h, arr = tensor_from_array(v)
                    owned.append(h)
                    handles.append(h)
                    keep.append(arr)
                else:
                    t = from_dlpack(v)
                    handles.append(t.handle)
                    keep.append(t)
            n_in, n_out = len(handles), len(names)
            in_names = (c_char_p * max(n_in, 1))(*[k.encode() for k in inputs])
            in_arr = (c_void_p * max(n_in, 1))(*handles)
            out_names = (c_char_p * max(n_out, 1))(*[n.encode() for n in names])
            out_arr = (c_void_p * max(n_out, 1))()
            # ctypes releases the GIL for this call: other Python threads run meanwhile.
            _lib.check(_lib.lib.tern_session_run(self._p, ro._p if ro else None, in_names, in_arr,
                                                 n_in, out_names, n_out, out_arr))
        finally:
            for h in owned:
                _lib.lib.tern_tensor_destroy(h)
        tensors = [Tensor(out_arr[j]) for j in range(n_out)]
        results = tensors if as_tensors else [t.numpy() for t in tensors]
        return dict(zip(names, results)) if outputs is None else results

    def __del__(self):
        p, self._p = getattr(self, "_p", None), None
        if p and _lib.lib is not None:
            _lib.lib.tern_session_destroy(p)

    def __repr__(self) -> str:
        return (f"tern.Session(inputs={[i.name for i in self.inputs]}, "
                f"outputs={self._output_names})")
