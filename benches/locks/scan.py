"""Python filelock 4.2.11's soft classes in a directory full of files
(benches/locks/scan.rs): for each, the takeover of a marker whose holder,
a Python process, was killed (SIGKILL) while this process waited, from the
kill to the return of acquire; then the mean uncontended acquire and
release.

Arguments: the directory, the kills, the cycles. Prints, per class,
"takeover CLASS SECONDS..." and "cycle CLASS SECONDS".
"""

import os
import subprocess
import sys
import threading
import time

import filelock

directory, kills, cycles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

HOLDER = """
import sys, filelock
lock = getattr(filelock, sys.argv[1])(sys.argv[2])
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""

for name in ("SoftFileLock", "MarkerSoftFileLock", "SoftFileLease"):
    cls = getattr(filelock, name)
    path = os.path.join(directory, "py-" + name + ".lock")
    times = []
    for _ in range(kills):
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, name, path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if holder.stdout.readline().strip() != "held":
            sys.exit(f"filelock {name}: the holder did not take the lock")
        killed = []

        def kill(holder=holder, killed=killed):
            # The waiter below is in its first pause by now (a pause, not
            # synchronisation: a late waiter only shortens the figure).
            time.sleep(0.02)
            killed.append(time.monotonic())
            holder.kill()
            # Reaped, as its parent would: a zombie's PID still runs.
            holder.wait()

        killer = threading.Thread(target=kill)
        killer.start()
        lock = cls(path)
        lock.acquire(timeout=60)
        got = time.monotonic()
        killer.join()
        lock.release()
        times.append(got - killed[0])
    print("takeover", name, *times)
    lock = cls(path)
    for _ in range(max(cycles // 10, 1)):
        lock.acquire()
        lock.release()
    began = time.perf_counter()
    for _ in range(cycles):
        lock.acquire()
        lock.release()
    print("cycle", name, (time.perf_counter() - began) / cycles, flush=True)
