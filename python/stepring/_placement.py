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

The lock is never waited for by a close: a pool may be closed by the
garbage collector (its __del__) while this very thread is inside one of the
locked sections below, at any allocation there; waiting would deadlock.
caller_unplace queues the close instead, and whoever holds the lock applies
the queue before it lets go (_unlock), this thread or another.

This module imports nothing of stepring: both env classes (vector.py,
procs.py) use it.
"""
import contextlib
import os
import threading

_callers = {}  # native thread id -> {"own": set, "applied": set or None, "taken": {key: set}}
_callers_lock = threading.Lock()
_deferred = []  # (key, tid) of pools closed while the lock was held (append/pop are atomic)


def _drain():
    """Under the lock: the closes that were queued meanwhile."""
    while _deferred:
        key, tid = _deferred.pop()
        st = _callers.get(tid)
        if st is not None and st["taken"].pop(key, None) is not None:
            _caller_apply(tid, st)


def _unlock():
    """Apply the queued closes, then release; a close queued after the
    last look is applied by its own caller (its acquire then succeeds) or
    by the next holder, which looks again here."""
    try:
        _drain()
    finally:
        _callers_lock.release()
    while _deferred and _callers_lock.acquire(False):
        try:
            _drain()
        finally:
            _callers_lock.release()


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
    _callers_lock.acquire()
    try:
        st = _callers.get(tid)
        if st is None:
            st = _callers[tid] = {"own": os.sched_getaffinity(tid), "applied": None,
                                  "taken": {}}
        st["taken"][key] = set(cpus)
        _caller_apply(tid, st)
    finally:
        _unlock()
    return tid


def caller_unplace(key, tid):
    """Pool @key is closed: the thread of @tid (from caller_place) may use
    its CPUs again."""
    if tid is None:
        return
    _deferred.append((key, tid))
    # Never wait (see the module's docstring): the holder applies it.
    if _callers_lock.acquire(False):
        _unlock()


@contextlib.contextmanager
def caller_unplaced():
    """Around the creation of a pool: this thread's own CPUs, as they were
    before any open process pool moved it."""
    tid = threading.get_native_id() if hasattr(os, "sched_setaffinity") else None
    moved = False
    _callers_lock.acquire()
    try:
        st = _callers.get(tid)
        if st is not None and st["applied"] is not None:
            try:
                if os.sched_getaffinity(0) == st["applied"]:
                    os.sched_setaffinity(0, st["own"])
                    moved = True
            except OSError:
                pass
    finally:
        _unlock()
    try:
        yield
    finally:
        if moved:
            _callers_lock.acquire()
            try:
                st = _callers.get(tid)
                if st is not None:
                    st["applied"] = st["own"]  # what is set now
                    _caller_apply(tid, st)
            finally:
                _unlock()
