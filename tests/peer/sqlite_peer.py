"""Python's SQLite locks as a peer process for swaplock's SQLite lock tests.

    sqlite_peer.py hold HOW PATH      acquire (waiting), print a JSON line, hold until a line on stdin
    sqlite_peer.py serve              answer lines "try HOW PATH" with one JSON line each, until EOF
    sqlite_peer.py storm PATH WITNESS ROUNDS SEED
                                      ROUNDS random holds under filelock's ReadWriteLock, each checked
                                      by O_EXCL files in WITNESS; print a JSON summary

HOW is read or write (filelock 4.2.11's ReadWriteLock), or shared, immediate or exclusive (a plain
sqlite3 connection: BEGIN and a SELECT, BEGIN IMMEDIATE, BEGIN EXCLUSIVE). A try never waits: the
lock's blocking=False, or the connection's busy timeout 0.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import sys
import time

from filelock import ReadWriteLock, Timeout

STATEMENTS = {
    "shared": "BEGIN; SELECT name FROM sqlite_master LIMIT 1;",
    "immediate": "BEGIN IMMEDIATE;",
    "exclusive": "BEGIN EXCLUSIVE;",
}


class Held:
    """One hold, by filelock's lock or a plain connection."""

    def __init__(self, how: str, path: str, timeout: float) -> None:
        self.how = how
        if how in ("read", "write"):
            self.lock = ReadWriteLock(path, timeout=timeout, is_singleton=False)
            acquire = self.lock.acquire_read if how == "read" else self.lock.acquire_write
            acquire(blocking=timeout != 0)
        else:
            self.conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
            self.conn.execute("PRAGMA busy_timeout=%d" % int(timeout * 1000))
            try:
                self.conn.executescript(STATEMENTS[how])
            except BaseException:
                self.conn.close()
                raise

    def release(self) -> None:
        if self.how in ("read", "write"):
            self.lock.release()
            self.lock.close()
        else:
            self.conn.execute("ROLLBACK")
            self.conn.close()


def attempt(how: str, path: str) -> dict:
    try:
        held = Held(how, path, 0)
    except Timeout:
        return {"result": "busy"}
    except sqlite3.OperationalError as error:
        if error.sqlite_errorcode == sqlite3.SQLITE_BUSY:
            return {"result": "busy"}
        return {"result": "error", "type": type(error).__name__, "message": str(error)}
    except Exception as error:  # noqa: BLE001  the test reads the type
        return {"result": "error", "type": type(error).__name__, "message": str(error)}
    held.release()
    return {"result": "acquired"}


def witness_enter(witness: str, how: str, me: str) -> tuple[int, int]:
    """Enter the critical section: (collisions seen, whether other readers were inside)."""
    collisions = shared = 0
    if how == "write":
        try:
            os.close(os.open(os.path.join(witness, "in-write"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            collisions += 1
        collisions += sum(1 for n in os.listdir(witness) if n.startswith("in-read-"))
    else:
        os.close(os.open(os.path.join(witness, "in-read-" + me), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        names = os.listdir(witness)
        collisions += "in-write" in names
        shared = sum(1 for n in names if n.startswith("in-read-")) > 1
    return collisions, shared


def witness_leave(witness: str, how: str, me: str) -> int:
    names = os.listdir(witness)
    if how == "write":
        collisions = sum(1 for n in names if n.startswith("in-read-"))
        os.unlink(os.path.join(witness, "in-write"))
    else:
        collisions = int("in-write" in names)
        os.unlink(os.path.join(witness, "in-read-" + me))
    return collisions


def storm(path: str, witness: str, rounds: int, seed: int) -> dict:
    rng = random.Random(seed)
    lock = ReadWriteLock(path, is_singleton=False)
    me = "py-%d" % os.getpid()
    summary = {"collisions": 0, "shared": 0, "reads": 0, "writes": 0}
    for _ in range(rounds):
        how = "write" if rng.random() < 0.3 else "read"
        (lock.acquire_write if how == "write" else lock.acquire_read)()
        collided, shared = witness_enter(witness, how, me)
        time.sleep(0.005)
        collided += witness_leave(witness, how, me)
        lock.release()
        summary["collisions"] += collided
        summary["shared"] += shared
        summary[how + "s"] += 1
    lock.close()
    return summary


def main() -> None:
    cmd, *args = sys.argv[1:]
    if cmd == "hold":
        how, path = args
        try:
            held = Held(how, path, 600)
        except Exception as error:  # noqa: BLE001  the test reads the type
            print(json.dumps({"error": type(error).__name__, "message": str(error)}), flush=True)
            raise SystemExit(1) from None
        st = os.lstat(path)
        print(json.dumps({"pid": os.getpid(), "nlink": st.st_nlink}), flush=True)
        sys.stdin.readline()
        held.release()
        print(json.dumps({"released": True}), flush=True)
    elif cmd == "serve":
        for line in sys.stdin:
            verb, how, path = line.split()
            assert verb == "try", verb
            print(json.dumps(attempt(how, path)), flush=True)
    elif cmd == "storm":
        path, witness, rounds, seed = args
        print("storm-ready", flush=True)
        sys.stdin.readline()
        print("storm: " + json.dumps(storm(path, witness, int(rounds), int(seed))), flush=True)
    else:
        raise SystemExit("unknown command " + cmd)


if __name__ == "__main__":
    main()
