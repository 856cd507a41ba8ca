"""torch consumes stepring's DLPack tensors: ring views are zero copy, device
batches keep their dtypes and shapes, and a batch held by torch tensors is
recycled only after torch frees them (backpressure). Host device only.
Usage: test_device_torch.py LIBSTEPRING.so   (exit 77 without torch)"""
import ctypes as C
import gc
import sys

try:
    import torch
    import torch.utils.dlpack as tdl
except ImportError:
    print("torch not installed: skipped")
    sys.exit(77)


class RingOpts(C.Structure):
    _fields_ = [("flags", C.c_uint32), ("obs_dim", C.c_uint32), ("act_size", C.c_uint32),
                ("reserved0", C.c_uint32), ("capacity", C.c_uint64), ("name", C.c_char_p)]


class DevOpts(C.Structure):
    _fields_ = [("flags", C.c_uint32), ("kind", C.c_uint32), ("index", C.c_int32),
                ("in_flight", C.c_uint32), ("max_rows", C.c_uint32), ("obs_dim", C.c_uint32),
                ("act_kind", C.c_uint32), ("act_dim", C.c_uint32), ("ring", C.c_void_p)]


lib = C.CDLL(sys.argv[1])
lib.sr_ring_obs_col.restype = C.POINTER(C.c_float)
lib.sr_ring_env_id_col.restype = C.POINTER(C.c_uint32)
lib.sr_ring_create.argtypes = [C.c_void_p, C.c_void_p]
capsule = C.pythonapi.PyCapsule_New
capsule.restype = C.py_object
capsule.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]


def torch_of(ptr):
    return tdl.from_dlpack(capsule(ptr, b"dltensor", None))


ring = C.c_void_p()
assert lib.sr_ring_create(C.byref(RingOpts(0, 4, 4, 0, 16, None)), C.byref(ring)) == 0
obs, ids = lib.sr_ring_obs_col(ring), lib.sr_ring_env_id_col(ring)
for i in range(64):
    obs[i] = float(i)
for i in range(16):
    ids[i] = 100 + i

t = C.c_void_p()
assert lib.sr_ring_dlpack(ring, 0, C.c_uint64(2), 4, C.byref(t)) == 0
view = torch_of(t)
assert view.shape == (4, 4) and view.dtype == torch.float32
assert view[0].tolist() == [8.0, 9.0, 10.0, 11.0]
obs[8] = -1.0
assert view[0, 0].item() == -1.0, "ring view is not zero copy"

dev = C.c_void_p()
opts = DevOpts(1, 0, 0, 2, 8, 4, 1, 1, ring.value)  # host, 2 in flight, ring set
assert lib.sr_device_open(C.byref(opts), C.byref(dev)) == 0
b = C.c_void_p()
assert lib.sr_device_submit_ring(dev, ring, C.c_uint64(0), 8, 0, C.byref(b)) == 0
want = {0: ((8, 4), torch.float32), 1: ((8,), torch.float32), 2: ((8,), torch.uint8),
        3: ((8,), torch.uint8), 4: ((8,), torch.uint8), 5: ((8,), torch.int32),
        6: ((8,), torch.int32)}
held = []
for field, (shape, dtype) in want.items():
    t = C.c_void_p()
    assert lib.sr_device_batch_dlpack(b, field, C.byref(t)) == 0
    x = torch_of(t)
    assert tuple(x.shape) == shape and x.dtype == dtype, (field, x.shape, x.dtype)
    held.append(x)
assert held[5].tolist() == list(range(100, 108))
assert held[0][1].tolist() == [4.0, 5.0, 6.0, 7.0]
assert lib.sr_device_release(dev, b) == 0

other = C.c_void_p()
assert lib.sr_device_submit_ring(dev, ring, C.c_uint64(8), 8, 0, C.byref(other)) == 0
# Both batches held: one by us, one by torch's tensors (released by us).
assert lib.sr_device_submit_ring(dev, ring, C.c_uint64(0), 8, 1, C.byref(C.c_void_p())) == -11
del held, x
gc.collect()
again = C.c_void_p()
assert lib.sr_device_submit_ring(dev, ring, C.c_uint64(0), 8, 1, C.byref(again)) == 0
assert lib.sr_device_release(dev, other) == 0
assert lib.sr_device_release(dev, again) == 0
lib.sr_device_close(dev)
del view
gc.collect()
lib.sr_ring_destroy(ring)
print("ok")
