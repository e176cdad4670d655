"""DLPack between Python objects and Tern, over the C ABI's tern_tensor_from_dlpack /
tern_tensor_to_dlpack (versioned DLPack 1.x structs).

Producers that predate DLPack 1.0 (NumPy < 2.1, PyTorch < 2.4) hand out capsules named "dltensor"
holding the unversioned DLManagedTensor; consumers of that age ask for one. Both directions are
bridged here: an unversioned tensor is wrapped in a versioned struct whose deleter calls the
original's, and an export asked for without max_version >= (1, 0) is wrapped the other way.
"""
from __future__ import annotations

import ctypes
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_int64,
                    c_uint8, c_uint16, c_uint32, c_uint64, c_void_p)

from . import _lib
from ._errors import InvalidArgument, Unsupported

kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3
READ_ONLY = 1


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensor(Structure):
    pass


_LegacyDeleter = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p),
                            ("deleter", _LegacyDeleter)]


class DLManagedTensorVersioned(Structure):
    pass


_VersionedDeleter = CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p),
                                     ("deleter", _VersionedDeleter), ("flags", c_uint64),
                                     ("dl_tensor", DLTensor)]

# The Python C API's capsule functions. A capsule's destructor gets the capsule while it is being
# freed, so those calls take a raw pointer; the others a Python object.
_api = ctypes.pythonapi


def _capi(name, restype, argtypes):
    f = _api[name]  # a fresh function object: signatures here do not clash with others'
    f.restype, f.argtypes = restype, argtypes
    return f


_new_capsule = _capi("PyCapsule_New", ctypes.py_object, [c_void_p, c_char_p, c_void_p])
_get_pointer = _capi("PyCapsule_GetPointer", c_void_p, [ctypes.py_object, c_char_p])
_is_valid = _capi("PyCapsule_IsValid", c_int, [ctypes.py_object, c_char_p])
_set_name = _capi("PyCapsule_SetName", c_int, [ctypes.py_object, c_char_p])
_raw_is_valid = _capi("PyCapsule_IsValid", c_int, [c_void_p, c_char_p])
_raw_get_pointer = _capi("PyCapsule_GetPointer", c_void_p, [c_void_p, c_char_p])

# Capsule names must outlive their capsules: module constants.
_VERSIONED = b"dltensor_versioned"
_USED_VERSIONED = b"used_dltensor_versioned"
_LEGACY = b"dltensor"
_USED_LEGACY = b"used_dltensor"

# Structs made here live until their deleter runs: kept by address.
_alive: dict[int, object] = {}
_alive_lock = threading.Lock()


def _keep(struct) -> int:
    addr = ctypes.addressof(struct)
    with _alive_lock:
        _alive[addr] = struct
    return addr


def _release(addr: int):
    with _alive_lock:
        return _alive.pop(addr, None)


# ---- consuming --------------------------------------------------------------------------------

@_VersionedDeleter
def _wrapped_legacy_deleter(self_p):
    """The deleter of a versioned struct wrapping an unversioned tensor: calls the original's."""
    addr = ctypes.cast(self_p, c_void_p).value
    legacy_addr = self_p.contents.manager_ctx
    _release(addr)
    legacy = ctypes.cast(legacy_addr, POINTER(DLManagedTensor))
    if legacy.contents.deleter:
        legacy.contents.deleter(legacy)


def _versioned_from_legacy(legacy_addr: int) -> int:
    legacy = ctypes.cast(legacy_addr, POINTER(DLManagedTensor)).contents
    v = DLManagedTensorVersioned()
    v.version = DLPackVersion(1, 0)
    v.manager_ctx = legacy_addr
    v.deleter = _wrapped_legacy_deleter
    v.flags = 0
    v.dl_tensor = legacy.dl_tensor
    return _keep(v)


def tensor_from_capsule(capsule) -> int:
    """A new tern_tensor* over a DLPack capsule's tensor, which Tern now owns (the capsule is
    marked used). Raises TernError (and leaves the capsule to its producer) on failure."""
    out = c_void_p()
    if _is_valid(capsule, _VERSIONED):
        ptr = _get_pointer(capsule, _VERSIONED)
        _lib.check(_lib.lib.tern_tensor_from_dlpack(ptr, ctypes.byref(out)))
        _set_name(capsule, _USED_VERSIONED)
        return out.value
    if _is_valid(capsule, _LEGACY):
        legacy = _get_pointer(capsule, _LEGACY)
        addr = _versioned_from_legacy(legacy)
        status = _lib.lib.tern_tensor_from_dlpack(addr, ctypes.byref(out))
        if status != 0:
            _release(addr)
            _lib.check(status)
        _set_name(capsule, _USED_LEGACY)
        return out.value
    raise InvalidArgument("not a DLPack capsule, or one already consumed (a capsule named "
                          "'dltensor_versioned' or 'dltensor' is needed)")


def tensor_from_object(obj) -> int:
    """A new tern_tensor* sharing the memory of any object with __dlpack__ (a NumPy array, a
    PyTorch tensor, ...), or of a DLPack capsule."""
    if type(obj).__name__ == "PyCapsule":
        return tensor_from_capsule(obj)
    if not hasattr(obj, "__dlpack__"):
        raise InvalidArgument(f"{type(obj).__name__} has no __dlpack__")
    if hasattr(obj, "__dlpack_device__"):
        dev = tuple(obj.__dlpack_device__())
        if int(dev[0]) not in (kDLCPU, kDLCUDAHost):
            raise Unsupported(f"DLPack device {dev}: Tern takes memory the CPU reads in place "
                              "(kDLCPU, kDLCUDAHost); copy the tensor to the CPU first")
    try:
        capsule = obj.__dlpack__(max_version=(1, 1))
    except TypeError:  # a producer from before DLPack 1.0: no max_version
        capsule = obj.__dlpack__()
    return tensor_from_capsule(capsule)


# ---- producing --------------------------------------------------------------------------------

def _call_versioned_deleter(addr: int):
    m = ctypes.cast(addr, POINTER(DLManagedTensorVersioned))
    if m.contents.deleter:
        m.contents.deleter(m)


_CapsuleDestructor = CFUNCTYPE(None, c_void_p)


@_CapsuleDestructor
def _versioned_capsule_destructor(capsule_p):
    # Still named "dltensor_versioned": nobody consumed it, so the producer deletes it.
    if _raw_is_valid(capsule_p, _VERSIONED):
        _call_versioned_deleter(_raw_get_pointer(capsule_p, _VERSIONED))


@_LegacyDeleter
def _legacy_export_deleter(self_p):
    addr = ctypes.cast(self_p, c_void_p).value
    versioned = self_p.contents.manager_ctx
    _release(addr)
    _call_versioned_deleter(versioned)


@_CapsuleDestructor
def _legacy_capsule_destructor(capsule_p):
    if _raw_is_valid(capsule_p, _LEGACY):
        p = ctypes.cast(_raw_get_pointer(capsule_p, _LEGACY), POINTER(DLManagedTensor))
        p.contents.deleter(p)


_VERSIONED_DESTRUCTOR = ctypes.cast(_versioned_capsule_destructor, c_void_p).value
_LEGACY_DESTRUCTOR = ctypes.cast(_legacy_capsule_destructor, c_void_p).value


def capsule_from_tensor(tensor_p: int, versioned: bool):
    """A DLPack capsule sharing a tern_tensor's memory (tern_tensor_to_dlpack); it keeps the
    memory alive until its consumer deletes it, whatever happens to the tern_tensor."""
    out = c_void_p()
    _lib.check(_lib.lib.tern_tensor_to_dlpack(tensor_p, ctypes.byref(out)))
    if versioned:
        return _new_capsule(out.value, _VERSIONED, _VERSIONED_DESTRUCTOR)
    m = ctypes.cast(out.value, POINTER(DLManagedTensorVersioned)).contents
    legacy = DLManagedTensor()
    legacy.dl_tensor = m.dl_tensor
    legacy.manager_ctx = out.value
    legacy.deleter = _legacy_export_deleter
    return _new_capsule(_keep(legacy), _LEGACY, _LEGACY_DESTRUCTOR)


def wants_versioned(max_version) -> bool:
    return max_version is not None and int(tuple(max_version)[0]) >= 1
