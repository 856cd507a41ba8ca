"""_placement: a process pool closed by the garbage collector while the
thread is inside one of the module's locked sections (its __del__ runs at
any allocation there) must not deadlock, and its CPUs come back when the
section ends."""
import os
import threading

import pytest

from stepring import _placement


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_close_inside_a_locked_section_is_applied_when_it_ends():
    out = {}

    def run():
        own = os.sched_getaffinity(0)
        cpus = {min(own)} if len(own) > 1 else set()
        tid = _placement.caller_place("pool-a", cpus)
        out["placed"] = os.sched_getaffinity(0)
        # What the garbage collector does when it runs a pool's __del__
        # inside caller_place's section: close while the lock is held.
        _placement._callers_lock.acquire()
        _placement.caller_unplace("pool-a", tid)  # waited for the lock before: a deadlock
        out["during"] = os.sched_getaffinity(0)
        _placement._unlock()
        out["after"] = os.sched_getaffinity(0)
        out["own"] = own

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "caller_unplace waited for a lock its own thread holds"
    own = out["own"]
    if len(own) > 1:
        assert out["placed"] == own - {min(own)}
        assert out["during"] == out["placed"]  # queued, not applied under the lock
    assert out["after"] == own
    assert not _placement._deferred


def test_close_from_another_thread_while_the_lock_is_held():
    """A close queued while another thread holds the lock is applied by that
    thread when it lets go."""
    tid = _placement.caller_place("pool-b", set())
    held, go = threading.Event(), threading.Event()

    def holder():
        _placement._callers_lock.acquire()
        held.set()
        go.wait(30)
        _placement._unlock()

    t = threading.Thread(target=holder, daemon=True)
    t.start()
    assert held.wait(30)
    _placement.caller_unplace("pool-b", tid)  # returns at once
    assert _placement._deferred
    go.set()
    t.join(30)
    assert not t.is_alive()
    assert not _placement._deferred
