"""One process of the contention curves (benches/locks/curves.rs), for a
Python filelock 4.2.11 class: the loop of the bench's own child processes
(curves::child), acquire, the overlap witness, release, for a fixed time.

Arguments: the class's name, the lock path, the witness path, the seconds.
"""

import os
import sys
import time

import filelock

# The exit status of a process that found another holder inside
# (curves::OVERLAP).
OVERLAP = 3

name, lock_path, witness, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
lock = getattr(filelock, name)(lock_path)
# The read-write lock's writer, or the lock itself.
acquire = lock.acquire_write if name == "SoftReadWriteLock" else lock.acquire

print("ready", flush=True)
# The barrier: the standard input ends once every process is ready.
sys.stdin.buffer.read()


def overlap(what):
    sys.stderr.write(f"filelock {name}: two holders at once: the witness {witness} {what}\n")
    sys.stderr.flush()
    os._exit(OVERLAP)


clock = time.monotonic_ns
waits = []
count = 0
deadline = clock() + int(seconds * 1e9)
while True:
    asked = clock()
    if asked >= deadline:
        break
    acquire()
    got = clock()
    try:
        fd = os.open(witness, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        overlap("was there already")
    os.close(fd)
    try:
        os.unlink(witness)
    except FileNotFoundError:
        overlap("was gone before its unlink")
    lock.release()
    waits.append(got - asked)
    if got < deadline:
        count += 1

print("count", count)
print("waits", *waits, flush=True)
