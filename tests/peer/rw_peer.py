"""Python filelock 4.2.11's SoftReadWriteLock as a peer process for swaplock's read-write interop tests.

    rw_peer.py hold MODE PATH [OPTS]            acquire, print a JSON line, hold until stdin closes, release
    rw_peer.py try MODE PATH TIMEOUT [OPTS]     one acquire with a timeout (0: one poll); print a JSON line
    rw_peer.py storm PATH N WITNESS [OPTS]      N write holds, each creating WITNESS with O_EXCL; print a JSON line
    rw_peer.py loop MODE PATH LOG ROUNDS WAIT HOLD [OPTS]
                                                ROUNDS holds in MODE, each waited for at most WAIT s; inside each,
                                                a line `E MODE python WHO GENERATION NS` appended to LOG, a pause of up to
                                                HOLD ms, and `X ...`; print a JSON line
    rw_peer.py latest PATH                      the latest snapshot filelock reads, as JSON
    rw_peer.py bytes                            records as filelock encodes them, for given inputs on stdin

OPTS: --heartbeat S --stale S --poll S. MODE is read or write. A compromise is printed as {"compromise": reason}
when it happens.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sys
import time
import traceback

import filelock
from filelock import SoftReadWriteLock, Timeout
from filelock._soft_rw._protocol import GenerationLog, Snapshot, encode_holder
from filelock._soft_rw._storage import OsFiles

assert filelock.__version__ == "4.2.11", filelock.__version__


def options(args: list[str]) -> dict[str, float]:
    names = {"--heartbeat": "heartbeat_interval", "--stale": "stale_threshold", "--poll": "poll_interval"}
    out = {}
    for i in range(0, len(args), 2):
        out[names[args[i]]] = float(args[i + 1])
    return out


def say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def make(path: str, opts: dict[str, float]) -> SoftReadWriteLock:
    return SoftReadWriteLock(
        path,
        is_singleton=False,
        on_compromise=lambda c: say({"compromise": c.reason, "at": time.monotonic()}),
        **opts,
    )


def acquire(lock: SoftReadWriteLock, mode: str, timeout: float) -> None:
    if mode == "read":
        lock.acquire_read(timeout=timeout, blocking=timeout != 0)
    else:
        lock.acquire_write(timeout=timeout, blocking=timeout != 0)


def note(log: int, line: str) -> None:
    # One write(2) on an O_APPEND descriptor: the lines of every member stay whole and in the order they were made.
    os.write(log, line.encode())


def loop(mode: str, path: str, log_path: str, rounds: int, wait: float, hold_ms: float, opts: dict[str, float]) -> None:
    """The read-write chaos's member (tests/common/rw_chaos.rs): the witness lines of each hold, in LOG."""
    who = f"{socket.gethostname()}:{os.getpid()}"
    compromises = []
    lock = SoftReadWriteLock(
        path, is_singleton=False, on_compromise=lambda c: compromises.append(c.reason), **opts
    )
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    rng = random.Random(os.getpid())
    done, errors, waited = 0, [], 0.0
    for _ in range(rounds):
        began = time.monotonic()
        try:
            acquire(lock, mode, wait)
        except Exception as error:  # noqa: BLE001  every failed wait is counted, whatever its type
            errors.append(f"{who}: {type(error).__name__}: {error}")
            continue
        waited = max(waited, time.monotonic() - began)
        generation = lock.generation
        note(log, f"E {mode} python {who} {generation} {time.monotonic_ns()}\n")
        time.sleep(rng.random() * hold_ms / 1000)
        note(log, f"X {mode} python {who} {generation} {time.monotonic_ns()}\n")
        done += 1
        try:
            lock.release()
        except Exception as error:  # noqa: BLE001  reported with its type: the conductor judges it
            # Ended here: what filelock left of its hold ages out once this process is gone.
            errors.append(f"{who}: release: {type(error).__name__}: {error}")
            break
    say({"who": who, "rounds": done, "errors": errors, "compromises": compromises, "longest_wait": waited})


def main() -> None:
    cmd, *args = sys.argv[1:]
    if cmd == "hold":
        mode, path, opts = args[0], args[1], options(args[2:])
        lock = make(path, opts)
        began = time.monotonic()
        acquire(lock, mode, -1)
        token = lock._hold.participant.token
        say({"generation": lock.generation, "token": token, "pid": os.getpid(), "waited": time.monotonic() - began,
             "at": time.monotonic()})
        sys.stdin.readline()
        lock.release()
        say({"released": True})
    elif cmd == "try":
        mode, path, timeout, opts = args[0], args[1], float(args[2]), options(args[3:])
        lock = make(path, opts)
        began = time.monotonic()
        try:
            acquire(lock, mode, timeout)
        except Timeout as error:
            say({"result": "timeout", "elapsed": time.monotonic() - began, "message": str(error)})
            return
        except Exception as error:  # noqa: BLE001  the test reads the type
            say({"result": "error", "type": type(error).__name__, "message": str(error)})
            return
        elapsed = time.monotonic() - began
        generation = lock.generation
        lock.release()
        say({"result": "acquired", "elapsed": elapsed, "generation": generation})
    elif cmd == "storm":
        path, count, witness, opts = args[0], int(args[1]), args[2], options(args[3:])
        lock = make(path, opts)
        generations, collisions = [], 0
        for _ in range(count):
            lock.acquire_write()
            generations.append(lock.generation)
            try:
                fd = os.open(witness, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                collisions += 1
            else:
                time.sleep(0.005)
                os.close(fd)
                os.unlink(witness)
            lock.release()
        say({"generations": generations, "collisions": collisions})
    elif cmd == "loop":
        mode, path, log, rounds, wait, hold = args[0], args[1], args[2], int(args[3]), float(args[4]), float(args[5])
        loop(mode, path, log, rounds, wait, hold, options(args[6:]))
    elif cmd == "latest":
        files = OsFiles(args[0])
        log = GenerationLog(files, args[0], os.path.realpath(os.path.dirname(args[0]) or ".") + "/" +
                            os.path.basename(args[0]) + ".rw")
        try:
            s = log.latest()
        except Exception as error:  # noqa: BLE001  the test reads the type
            say({"error": type(error).__name__, "message": str(error)})
            return
        say({"generation": s.generation, "writer": s.writer, "readers": sorted(s.readers)})
    elif cmd == "bytes":
        request = json.load(sys.stdin)
        out = {
            "snapshots": [Snapshot(generation=g, writer=w, readers=frozenset(r)).encode().hex()
                          for g, w, r in request["snapshots"]],
            "holders": [encode_holder(t, n, lease).hex() for t, n, lease in request["holders"]],
        }
        say(out)
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    try:
        main()
    except Exception:
        # On standard output too: the conductors quote a failed member's output.
        traceback.print_exc(file=sys.stdout)
        raise
