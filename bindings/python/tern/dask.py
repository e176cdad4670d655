"""Scale a model out over a Dask cluster: one tern.Session per worker process, made the first
time that process needs it and reused for every block or partition after.

    import dask.array as da, tern.dask
    x = da.from_array(images, chunks=(64, 3, 48, 192))        # batch dim chunked
    probs = tern.dask.map_blocks("model.onnx", x, output="softmax_0.tmp_0", threads=1)
    probs.compute()                                        # on whatever scheduler is active

    bag = dask.bag.from_sequence(list_of_arrays, npartitions=8)
    tern.dask.map_bag("model.onnx", bag, threads=1).compute()   # one output dict per item

The same code runs on a multi-machine cluster: start `dask-scheduler` on one machine and
`dask-worker tcp://SCHEDULER:8786 --nthreads 1 --nworkers N` on each; make the model path
readable on every worker (a shared file system, or the same path on each), install this package
and libtern on each (or set TERN_LIBRARY in the workers' environment); then create
`distributed.Client("tcp://SCHEDULER:8786")` in the program above. Sessions are cached per
process, keyed by the model path and the session options, so each worker process loads a model
once however many tasks it runs.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from . import Model, Session

_sessions: dict = {}
_lock = threading.Lock()
loads = 0  # sessions this process has created (what the tests check per worker)


def _key(model_path, options: dict):
    return (os.path.abspath(os.fspath(model_path)),
            tuple(sorted((k, repr(v)) for k, v in options.items())))


def session(model_path, **options) -> Session:
    """This process's session for the model and options, created on first use. options are
    tern.Session's keyword arguments (backends, threads, interop_threads, flags, ...)."""
    global loads
    key = _key(model_path, options)
    s = _sessions.get(key)
    if s is None:
        with _lock:
            s = _sessions.get(key)
            if s is None:
                s = Session(Model(os.fspath(model_path)), **options)
                _sessions[key] = s
                loads += 1
    return s


def process_info() -> dict:
    """{"pid": ..., "loads": sessions created in this process, "cached": sessions held}: for
    client.run(tern.dask.process_info) on every worker."""
    return {"pid": os.getpid(), "loads": loads, "cached": len(_sessions)}


def clear() -> None:
    """Drops this process's cached sessions."""
    with _lock:
        _sessions.clear()


def run_block(block: np.ndarray, model_path, input_name=None, output=None, **options):
    """One block through this process's session: the input `input_name` (default: the model's
    only input) fed with `block`, the output `output` (default: the first) returned."""
    s = session(model_path, **options)
    name = input_name or s.inputs[0].name
    out = output or s.outputs[0].name
    if block.size == 0:
        return np.empty((0,) + tuple(d or 0 for d in s.outputs[0].shape[1:]), np.float32)
    return s.run({name: np.ascontiguousarray(block)}, [out])[0]


def map_blocks(model_path, x, input_name=None, output=None, out_shape=None, dtype=None,
               **options):
    """The model over a Dask array chunked along its first (batch) dim only: one task per chunk,
    each run as one batch. out_shape: the output's dims after the batch dim (default: the
    model's declared ones, which must then be static); dtype: the output's (default: declared).
    Returns a Dask array with x's batch chunks."""
    import dask.array as da

    if any(len(c) != 1 for c in x.chunks[1:]):
        x = x.rechunk({i: -1 for i in range(1, x.ndim)})
    if out_shape is None or dtype is None:
        m = Model(os.fspath(model_path))
        info = next((o for o in m.outputs if o.name == output), m.outputs[0])
        if out_shape is None:
            if info.shape is None or any(d is None for d in info.shape[1:]):
                raise ValueError(f"output {info.name} has dims unknown before a run "
                                 f"{info.shape}: give out_shape")
            out_shape = tuple(info.shape[1:])
        dtype = dtype or info.dtype
    chunks = (x.chunks[0],) + tuple((d,) for d in out_shape)
    drop = tuple(range(len(out_shape) + 1, x.ndim)) if x.ndim > len(out_shape) + 1 else ()
    new = tuple(range(x.ndim, len(out_shape) + 1)) if len(out_shape) + 1 > x.ndim else ()
    return da.map_blocks(run_block, x, model_path, input_name, output, dtype=dtype,
                         chunks=chunks, drop_axis=drop, new_axis=new, meta=np.empty((0,) * (len(out_shape) + 1), dtype),
                         **options)


def _run_item(item, model_path, input_name, outputs, options):
    s = session(model_path, **options)
    feeds = item if isinstance(item, dict) else {input_name or s.inputs[0].name: item}
    res = s.run(feeds, outputs)
    # Copies: results travel between processes, and a copy pickles without the tern.Tensor.
    if isinstance(res, dict):
        return {k: np.array(v) for k, v in res.items()}
    return [np.array(v) for v in res]


def map_bag(model_path, bag, input_name=None, outputs=None, **options):
    """The model over each item of a Dask bag: an array (fed to `input_name`, default the only
    input) or a {name: array} dict; each result is a {name: array} dict (or a list for a list of
    output names)."""
    return bag.map(_run_item, model_path, input_name, outputs, options)
