"""Python filelock 4.2.11 as a peer process for swaplock's interop tests.

    soft_peer.py hold KIND PATH [LEASE HEARTBEAT]   acquire, print a JSON line, hold until stdin closes
    soft_peer.py try KIND PATH TIMEOUT [LEASE]      one acquire with a timeout; print a JSON line
    soft_peer.py owner PATH                         what filelock reads from the marker, as JSON
    soft_peer.py identity PID                       host_name() and process_start_token(PID), as JSON
    soft_peer.py exchange A B                       filelock's own exchange of two names
    soft_peer.py strict-hold PATH                   StrictSoftFileLock: acquire, print a JSON line, hold until stdin closes
    soft_peer.py strict-try PATH TIMEOUT [POLL]     StrictSoftFileLock: one acquire with a timeout; print a JSON line
    soft_peer.py strict-claims PATH                 StrictSoftFileLock(PATH).claims and lock_path_occupant, as JSON
    soft_peer.py strict-break PATH NAME             StrictSoftFileLock(PATH).force_break(NAME)
    soft_peer.py strict-storm PATH WITNESS N POLL LOG
                                                    N holds, each creating WITNESS with O_EXCL for 5 ms and
                                                    appending the PID to LOG, 0-10 ms apart; print collisions

KIND is soft, marker or lease; for hold, also filelock (FileLock, a kernel lock)
or rw (a SoftReadWriteLock writer).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

from filelock import FileLock, MarkerSoftFileLock, SoftFileLease, SoftFileLock, SoftReadWriteLock, StrictSoftFileLock, Timeout
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
    elif cmd.startswith("strict-"):
        strict(cmd, args)
    else:
        raise SystemExit(f"unknown command {cmd}")


def claim_json(c) -> dict:
    return {"name": c.name, "state": c.state, "token": c.token, "pid": c.pid, "host": c.hostname,
            "start": None if c.start is None else str(c.start)}


def strict(cmd: str, args: list[str]) -> None:
    path = args[0]
    if cmd == "strict-hold":
        lock = StrictSoftFileLock(path)
        lock.acquire()
        start = _identity.process_start_token(os.getpid())
        print(json.dumps({"pid": os.getpid(), "start": None if start is None else str(start),
                          "host": _identity.host_name()}), flush=True)
        sys.stdin.readline()
        lock.release()
        print(json.dumps({"released": True}), flush=True)
    elif cmd == "strict-try":
        poll = float(args[2]) if len(args) > 2 else 0.01
        lock = StrictSoftFileLock(path, poll_interval=poll)
        began = time.monotonic()
        try:
            lock.acquire(timeout=float(args[1]))
        except Timeout as error:
            print(json.dumps({"result": "timeout", "elapsed": time.monotonic() - began, "message": str(error)}))
            return
        except Exception as error:  # noqa: BLE001  the test reads the type
            print(json.dumps({"result": "error", "elapsed": time.monotonic() - began, "type": type(error).__name__,
                              "message": str(error)}))
            return
        elapsed = time.monotonic() - began
        claims = [claim_json(c) for c in lock.claims]
        lock.release()
        print(json.dumps({"result": "acquired", "elapsed": elapsed, "claims": claims}))
    elif cmd == "strict-claims":
        lock = StrictSoftFileLock(path)
        try:
            claims = [claim_json(c) for c in lock.claims]
        except Exception as error:  # noqa: BLE001  the test reads the type
            claims = {"error": type(error).__name__, "message": str(error)}
        print(json.dumps({"claims": claims, "occupant": lock.lock_path_occupant}))
    elif cmd == "strict-break":
        StrictSoftFileLock(path).force_break(args[1])
        print(json.dumps({"broken": args[1]}))
    elif cmd == "strict-storm":
        witness, holds, poll, log = args[1], int(args[2]), float(args[3]), args[4]
        lock = StrictSoftFileLock(path, poll_interval=poll)
        collisions = 0
        entry = f"{os.getpid()}\n".encode()
        for _ in range(holds):
            with lock:
                try:
                    os.close(os.open(witness, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    collisions += 1
                    continue
                fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                os.write(fd, entry)
                os.close(fd)
                time.sleep(0.005)  # the critical section's length, not a synchronisation
                os.unlink(witness)
            time.sleep(random.uniform(0, 0.01))  # time between holds, so that others get in
        print(json.dumps({"holds": holds, "collisions": collisions}))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
