"""The calling thread's CPUs while process pools are open (bind_caller).

A process pool (procs.py) moves the thread that created it off its worker
processes' CPUs. Several pools may be open at once on one thread (a
training and an evaluation pool, a pool restored beside the one that
wrote the checkpoint): each records the CPUs it took, the thread keeps
what none of them took, and gets its own set back when the last one
closes. A pool being created must see the thread's own set, not what an
earlier pool left it (the placement plan reads it: with 2 CPUs the
second pool would find 1), so creation runs under caller_unplaced().
State is per thread (native id: a pool may be closed from another
thread); a set the user changed meanwhile is theirs: it becomes the
thread's own set and is never overwritten with an older one.

This module imports nothing of stepring: both env classes (vector.py,
procs.py) use it.
"""
import contextlib
import os
import threading

_callers = {}  # native thread id -> {"own": set, "applied": set or None, "taken": {key: set}}
_callers_lock = threading.Lock()


def _caller_apply(tid, st):
    try:
        cur = os.sched_getaffinity(tid)
    except OSError:  # the thread is gone
        _callers.pop(tid, None)
        return
    if st["applied"] is not None and cur != st["applied"]:
        st["own"], st["applied"] = cur, None  # changed by the user: theirs now
    own = st["own"]
    taken = set().union(*st["taken"].values()) if st["taken"] else set()
    left = own - taken
    want = left if taken and left and left != own else None
    try:
        if want is not None and want != cur:
            os.sched_setaffinity(tid, want)
        elif want is None and st["applied"] is not None:
            os.sched_setaffinity(tid, own)
    except OSError:
        want = None
    st["applied"] = want
    if not st["taken"]:
        _callers.pop(tid, None)


def caller_place(key, cpus):
    """Pool @key runs worker processes on @cpus: keep this thread off them
    (while another CPU is left for it)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    tid = threading.get_native_id()
    with _callers_lock:
        st = _callers.get(tid)
        if st is None:
            st = _callers[tid] = {"own": os.sched_getaffinity(tid), "applied": None,
                                  "taken": {}}
        st["taken"][key] = set(cpus)
        _caller_apply(tid, st)
    return tid


def caller_unplace(key, tid):
    """Pool @key is closed: the thread of @tid (from caller_place) may use
    its CPUs again."""
    if tid is None:
        return
    with _callers_lock:
        st = _callers.get(tid)
        if st is not None and st["taken"].pop(key, None) is not None:
            _caller_apply(tid, st)


@contextlib.contextmanager
def caller_unplaced():
    """Around the creation of a pool: this thread's own CPUs, as they were
    before any open process pool moved it."""
    tid = threading.get_native_id() if hasattr(os, "sched_setaffinity") else None
    moved = False
    with _callers_lock:
        st = _callers.get(tid)
        if st is not None and st["applied"] is not None:
            try:
                if os.sched_getaffinity(0) == st["applied"]:
                    os.sched_setaffinity(0, st["own"])
                    moved = True
            except OSError:
                pass
    try:
        yield
    finally:
        if moved:
            with _callers_lock:
                st = _callers.get(tid)
                if st is not None:
                    st["applied"] = st["own"]  # what is set now
                    _caller_apply(tid, st)
