"""Python filelock 4.2.11 as a peer process for swaplock's interop tests.

    soft_peer.py hold KIND PATH [LEASE HEARTBEAT]   acquire, print a JSON line, hold until stdin closes
    soft_peer.py try KIND PATH TIMEOUT [LEASE]      one acquire with a timeout; print a JSON line
    soft_peer.py owner PATH                         what filelock reads from the marker, as JSON
    soft_peer.py identity PID                       host_name() and process_start_token(PID), as JSON
    soft_peer.py exchange A B                       filelock's own exchange of two names

KIND is soft, marker or lease; for hold, also filelock (FileLock, a kernel lock)
or rw (a SoftReadWriteLock writer).
"""

from __future__ import annotations

import json
import os
import sys
import time

from filelock import FileLock, MarkerSoftFileLock, SoftFileLease, SoftFileLock, SoftReadWriteLock, Timeout
from filelock import _identity, _util


def make(kind: str, path: str, lease: float | None = None, heartbeat: float | None = None, **kw):
    if kind == "soft":
        return SoftFileLock(path, **kw)
    if kind == "marker":
        return MarkerSoftFileLock(path, **kw)
    if kind == "filelock":
        return FileLock(path, **kw)
    if kind == "rw":
        return SoftReadWriteLock(path, **kw)
    events = []

    def on_compromise(c) -> None:
        print(json.dumps({"compromise": c.reason}), flush=True)

    lock = SoftFileLease(
        path, lease_duration=lease or 30.0, heartbeat_interval=heartbeat, on_compromise=on_compromise, **kw
    )
    lock._events = events
    return lock


def main() -> None:
    cmd, *args = sys.argv[1:]
    if cmd == "hold":
        kind, path = args[0], args[1]
        lease = float(args[2]) if len(args) > 2 else None
        heartbeat = float(args[3]) if len(args) > 3 else None
        lock = make(kind, path, lease, heartbeat)
        if kind == "rw":
            lock.acquire_write()
        else:
            lock.acquire()
        start = _identity.process_start_token(os.getpid())
        print(json.dumps({"pid": os.getpid(), "start": None if start is None else str(start),
                          "host": _identity.host_name(), "token": getattr(lock, "token", None)}), flush=True)
        sys.stdin.readline()
        lock.release()
        print(json.dumps({"released": True}), flush=True)
    elif cmd == "try":
        kind, path, timeout = args[0], args[1], float(args[2])
        lease = float(args[3]) if len(args) > 3 else None
        lock = make(kind, path, lease, poll_interval=0.01)
        began = time.monotonic()
        try:
            lock.acquire(timeout=timeout)
        except Timeout as error:
            print(json.dumps({"result": "timeout", "elapsed": time.monotonic() - began, "message": str(error)}))
            return
        except Exception as error:  # noqa: BLE001  the test reads the type
            print(json.dumps({"result": "error", "type": type(error).__name__, "message": str(error)}))
            return
        elapsed = time.monotonic() - began
        content = open(path, "rb").read().decode()
        lock.release()
        print(json.dumps({"result": "acquired", "elapsed": elapsed, "content": content}))
    elif cmd == "owner":
        path = args[0]
        owner = MarkerSoftFileLock(path).owner
        print(json.dumps({
            "owner": None if owner is None else {
                "pid": owner.pid, "host": owner.hostname, "mode": owner.mode, "token": owner.token,
                "duration": owner.lease_duration, "start": None if owner.start is None else str(owner.start)},
            "soft_pid": SoftFileLock(path).pid,
        }))
    elif cmd == "identity":
        pid = int(args[0])
        start = _identity.process_start_token(pid)
        print(json.dumps({"host": _identity.host_name(), "start": None if start is None else str(start)}))
    elif cmd == "exchange":
        print(json.dumps({"exchanged": _util.exchange_names(args[0], args[1])}))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
