"""Golden cases of the read-write lock's records, from the real Python filelock 4.2.11.

Run as ``python rw_golden.py OUT.json``. filelock's own ``_soft_rw`` functions give every answer: its snapshot
parser's verdicts (the observed vectors and thousands of mutations of valid records), the bytes its encoder writes
for random snapshots, its holder records for many leases as a user gives them, its reading of a record's lease, and
the generation it takes from HEAD under a given epoch. The Rust test compares swaplock-core with every case.
"""

from __future__ import annotations

import json
import os
import random
import struct
import sys

import filelock
from filelock._identity import host_name
from filelock._soft_rw._protocol import GenerationLog, Snapshot, encode_holder, holder_lease, parse_snapshot

assert filelock.__version__ == "4.2.11", filelock.__version__

rng = random.Random(int(os.environ.get("GOLDEN_SEED", "20261201")))
out: dict[str, object] = {"pid": os.getpid(), "host": host_name()}


def token() -> str:
    return "%032x" % rng.getrandbits(128)


def verdict(data: bytes) -> object:
    s = parse_snapshot(data)
    if s is None:
        return None
    return {"generation": str(s.generation), "writer": s.writer, "readers": sorted(s.readers), "encoded": s.encode().hex()}


W, R1, R2 = "95fd9e24e6472ecd9484c2c53e72e1f4", "59cda89a64791d2d56804c3160d38f39", "7a396102a69a9bf370e9f3b87692aa8b"
g = "filelock-rw/1\ngeneration=3\n"
vectors = [
    f"filelock-rw/1\ngeneration=2\nreader={R2}\nreader={R1}\n",
    f"filelock-rw/1\nreader={R1}\ngeneration=5\n",
    f"{g}writer={W}\nreader={W}\n",
    "filelock-rw/1\ngeneration=0\n",
    "filelock-rw/1\ngeneration=99999999999999999999\n",
    "garbage",
    "filelock-rw/1\ngeneration=03\n",
    "filelock-rw/1\ngeneration=+3\n",
    "filelock-rw/1\ngeneration= 3\n",
    "filelock-rw/1\ngeneration=100000000000000000000\n",
    f"{g}reader=ABC\n",
    "filelock-rw/1\ngeneration=3",
    f"{g}foo=bar\n",
    f"{g}writer={W}\nwriter={R1}\n",
    f"{g}reader={R1}\nreader={R1}\n",
    "filelock-rw/1\r\ngeneration=3\r\n",
    f"{g}\n",
    f"{g}writer=\n",
    "filelock-rw/1\ngeneration=2\n".replace("/1", "/2"),
    " filelock-rw/1\ngeneration=3\n",
    "",
]
inputs = [v.encode() for v in vectors]
# Mutations of valid records: lines from a pool in any order, repeated, truncated, a byte changed.
pool = [
    "generation=7", "generation=0", "generation=07", "generation=18446744073709551616", f"writer={W}", f"writer={R1}",
    f"reader={R1}", f"reader={R2}", f"reader={W}", "reader=", "writer", "", "x=y", "generation=99999999999999999999",
    f"reader={W.upper()}", "generation=1\r",
]
for _ in range(3000):
    lines = ["filelock-rw/1"] + [rng.choice(pool) for _ in range(rng.randint(0, 5))]
    data = ("\n".join(lines) + "\n").encode()
    roll = rng.random()
    if roll < 0.2 and data:
        data = data[: rng.randrange(len(data))]
    elif roll < 0.4 and data:
        i = rng.randrange(len(data))
        data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
    inputs.append(data)
out["snapshots"] = [{"bytes": d.hex(), "verdict": verdict(d)} for d in inputs]

# Snapshots as filelock encodes them, readers given in any order.
encodes = []
for _ in range(500):
    generation = rng.choice([0, 1, rng.randrange(10**6), rng.randrange(10**20), 10**20 - 1])
    writer = token() if rng.random() < 0.5 else None
    readers = frozenset(token() for _ in range(rng.randint(0, 6)))
    data = Snapshot(generation=generation, writer=writer, readers=readers).encode()
    encodes.append({"generation": str(generation), "writer": writer, "readers": list(readers), "bytes": data.hex()})
out["encodes"] = encodes

# Holder records for leases as a user gives them: whole and decimal seconds, milliseconds, and the observed ones.
leases = [90.0, 4.5, 1e-05, 1.5, 0.1, 0.25, 3.0, 1e20, 2.5e-07, 1e16, 1e15, 123.456, 0.3, 1.1]
leases += [rng.randint(1, 10**6) / 10 ** rng.randint(0, 4) for _ in range(1500)]
leases += [rng.randint(1, 10**7) / 1000 for _ in range(1500)]
leases += [float(rng.randint(1, 10**5)) for _ in range(200)]
leases += [struct.unpack(">d", struct.pack(">Q", rng.getrandbits(62) + (1 << 62)))[0] for _ in range(300)]
leases = [x for x in leases if x == x and x not in (float("inf"),) and x > 0]
holders = []
for lease in leases:
    t, n = token(), token()
    holders.append({"token": t, "nonce": n, "lease": struct.pack(">d", lease).hex(), "bytes": encode_holder(t, n, lease).hex()})
out["holders"] = holders

lines = ["lease=90.0", "lease=1e+20", "lease=1e-05", "lease=90", "lease=1_0.0", "lease= 90.0", "lease=inf", "lease=0.0",
         "lease=-1.0", "lease=0.00001", "lease=nan", "lease=+90.0", "lease=9e+15", "lease=1.0\nlease=2.0", "lease=x",
         "lease=٣.0", "lease=90.0\r", "lease=1E+20", "lease=0.1", "lease=.5", "lease=5.", "release=3.0"]
lines += ["lease=" + repr(rng.randint(1, 10**6) / 10 ** rng.randint(0, 6)) for _ in range(500)]
lines += ["lease=" + rng.choice(["1", "2.5", "1e", "e5", "0x10", "1e+05", "1e5", "10.00", "3.14159", "7e-10"]) for _ in range(100)]
records = [f"filelock-rw/1\ntoken={W}\n{line}\nnonce={R1}\n".encode("utf-8") for line in lines]
records += [b"lease=90.0\n\xff", b"", b"lease=4.5"]
out["leases"] = [{"bytes": r.hex(), "lease": None if (v := holder_lease(r)) is None else struct.pack(">d", v).hex()} for r in records]


# HEAD: the generation a log takes from it under a remembered epoch.
class Files:
    def __init__(self, head: bytes) -> None:
        self.head = head

    def read(self, path: str) -> bytes | None:
        return self.head if path.endswith("/HEAD") else None


epoch = b"5e210ab54e14cb9b9798c552ff0af2de\n"
body = b"filelock-rw/1\ngeneration=41\nwriter=95fd9e24e6472ecd9484c2c53e72e1f4\n"
heads = []
for e in [epoch, epoch[:-1], b"", b"0" * 33, b"5E210AB54E14CB9B9798C552FF0AF2DE\n", None, epoch + b"\n"]:
    for h in [epoch + body, epoch + body[:30], epoch, b"", body, b"00000000000000000000000000000000\n" + body,
              epoch[:-1] + body, epoch + b"filelock-rw/1\ngeneration=0\n"]:
        log = GenerationLog(Files(h), "L", "/nowhere")
        log._epoch = e
        g = log._head_generation()
        heads.append({"epoch": None if e is None else e.hex(), "head": h.hex(), "generation": None if g is None else str(g),
                      "bound": log._head_record() is not None})
out["heads"] = heads

with open(sys.argv[1], "w") as f:
    json.dump(out, f)
