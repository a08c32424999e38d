"""A DLPack producer written with ctypes, for what real arrays on this machine cannot show: a
tensor that claims to live on a CUDA device (or an unknown one), or has an unusual dtype code."""
import ctypes

import numpy as np


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

CPU, CUDA, VULKAN = 1, 2, 7
INT, FLOAT, BFLOAT = 0, 2, 4


class FakeTensor:
    """Looks like an array of `backing`'s memory with the given DLPack device and dtype (no deleter:
    this object owns everything, and must outlive the call that reads it)."""

    def __init__(self, backing, device_type=CPU, device_id=0, code=FLOAT, bits=32):
        self.backing = np.ascontiguousarray(backing)
        self.shape_c = (ctypes.c_int64 * self.backing.ndim)(*self.backing.shape)
        strides = [s // self.backing.itemsize for s in self.backing.strides]
        self.strides_c = (ctypes.c_int64 * self.backing.ndim)(*strides)
        self.managed = _Managed()
        t = self.managed.dl_tensor
        t.data = self.backing.ctypes.data
        t.device = _Device(device_type, device_id)
        t.ndim = self.backing.ndim
        t.dtype = _DataType(code, bits, 1)
        t.shape = self.shape_c
        t.strides = self.strides_c
        t.byte_offset = 0
        self.device_type, self.device_id = device_type, device_id

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, stream=None):
        return _new_capsule(ctypes.addressof(self.managed), b"dltensor", None)
