"""Seeded mutation fuzzing of every format's decoder, and the robustness measurement.

    python -m tests.fuzz [--cases 5000] [--target rdb ...] [--seed 0] [--timeout 10] [--json]
    python -m tests.fuzz --target rdb --case 17 --show      # one case, its rows and problems

Samples: each target (a format with its options) writes one small night with the format's
own generator (``Synth``); every archive of it is a sample. A case takes one sample and
damages it once, chosen by a seed that depends only on (target, seed, case number):

``field``     one length or type field of one record set to another value (a field-aware
              single-field damage: where the fields are comes from SPEC section 3, not from
              the decoder; values: 0, all ones, +-1, doubled, random)
``bitflip``   one bit anywhere          ``byte``      one byte anywhere
``truncate``  the archive cut short     ``insert``    1-16 random bytes (soliddb: a ``"``) put in
``delete``    1-16 bytes taken out

Each case is decoded (twice) in a worker process and checked:

* no exception escapes ``decode`` (a *crash*); the case ends within ``--timeout`` seconds of
  CPU (else a *hang*: the worker is killed and replaced; on a machine without ``/proc``,
  seconds of wall time);
* every row's ``record_offset`` lies inside the archive (a line number of it for informix),
  its kind is known, ``n_records`` >= 0, a quarantine row says its error class and message,
  and its ``raw_hex`` is the archive's own bytes;
* bytes add up: the rows' ``n_bytes`` sum to the archive's size (when the events carry
  ``n_bytes``, contract 2);
* the same bytes give the same rows (decoded twice).

The measurement: for ``field`` cases, the share that *lose half or more of the archive*:
records the clean archive decodes (rows other than quarantine, by offset) that the damaged
one no longer decodes make up half or more of its records (and, with ``n_bytes``,
quarantined bytes make up half or more of its bytes). The target after resynchronisation
is <= 2% (issue 15). ``tests/test_fuzz.py`` runs a bounded number of cases in CI;
``make fuzz`` runs 5,000 per target.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import multiprocessing as mp
import os
import random
import sys
import time
import traceback
from dataclasses import dataclass, field

from decoders import get as get_format
from decoders.base import DecodeContext
from decoders.events import EVENT_COLUMNS, KINDS, EventSink

DATE = _dt.date(2026, 11, 1)
SOURCE = "fuzz_src"
KINDS_OF_DAMAGE = ("field", "bitflip", "byte", "truncate", "insert", "delete")
WEIGHTS = (40, 12, 12, 12, 12, 12)
HAS_BYTES = "n_bytes" in EVENT_COLUMNS
WALL_FACTOR = 30            # a case is a hang after this many times the timeout in wall time


@dataclass(frozen=True)
class Target:
    name: str
    format: str
    options: dict
    transactions: int = 40


TARGETS = {t.name: t for t in (
    Target("soliddb", "soliddb", {}),
    Target("db2luw", "db2luw", {"byte_order": "little", "codepage": "utf-8"}),
    Target("db2luw_big", "db2luw", {"byte_order": "big", "codepage": "utf-8"}),
    Target("informix", "informix", {}),
    Target("rdb", "rdb", {}),
    Target("lldf", "lldf", {"codepage": "cp037", "rdw": False}),
    Target("lldf_rdw", "lldf", {"codepage": "cp037", "rdw": True}),
)}

# length and type fields per format, relative to where a record's events say it starts
# (``record_offset``): (name, offset, width, byte order). SPEC section 3.
BINARY_FIELDS = {
    "rdb": [("ACTION", 0, 1, "little"), ("RECORD_TYPE", 32, 4, "little"),
            ("DATA_LEN", 36, 2, "little"), ("NBV_LEN", 38, 2, "little")],
    "db2luw": [("record length", 6, 4, None), ("record type", 10, 2, None)],
    "lldf": [("LENGTH", 0, 2, "big"), ("CHANGE TYPE", 104, 2, "big"), ("SEGLEN", 182, 2, "big"),
             ("TOTALSEGS", 184, 2, "big"), ("SEGNUM", 186, 2, "big")],
}


# ----------------------------------------------------------------- samples

@dataclass
class Sample:
    name: str
    data: bytes
    carry: dict | None
    clean: list[dict]                 # rows of the clean decode


@dataclass
class Prepared:
    target: Target
    catalog: object
    timezone: str
    samples: list[Sample] = field(default_factory=list)


def prepare(target: Target, seed: int = 0) -> Prepared:
    fmt = get_format(target.format)
    gen = fmt.Synth(SOURCE, options=dict(target.options), seed=seed)
    night = gen.night(DATE, target.transactions)
    names = sorted(night.archives, key=fmt.archive_sort_key)
    prep = Prepared(target, gen.catalog, gen.timezone)
    carry = None
    for name in names:
        data = night.archives[name]
        rows, carry_out = decode_rows(prep, name, data, carry)
        prep.samples.append(Sample(name, data, carry, rows))
        carry = carry_out if fmt.SEQUENTIAL else None
    return prep


def decode_rows(prep: Prepared, name: str, data: bytes, carry) -> tuple[list[dict], object]:
    t = prep.target
    ctx = DecodeContext(SOURCE, t.format, prep.catalog, f"{SOURCE}/{DATE}/{name}",
                        dict(t.options), prep.timezone, carry)
    sink = EventSink(SOURCE, t.format, ctx.archive)
    out = get_format(t.format).decode(data, ctx, sink)
    return sink.rows(), out


# ----------------------------------------------------------------- damage

def _int_values(rng: random.Random, old: int, width: int) -> int:
    top = (1 << (8 * width)) - 1
    choice = rng.choice(("zero", "ones", "plus", "minus", "double", "random", "random"))
    value = {"zero": 0, "ones": top, "plus": old + 1, "minus": old - 1, "double": old * 2,
             "random": rng.randint(0, top)}[choice] & top
    return value if value != old else (old ^ (1 << rng.randrange(8 * width))) & top


def record_starts(sample: Sample) -> list[int]:
    return sorted({r["record_offset"] for r in sample.clean
                   if r["kind"] != "carry" and r["record_offset"] is not None and r["record_offset"] >= 0})


def damage_field(rng: random.Random, prep: Prepared, sample: Sample) -> tuple[bytes, str, tuple | None]:
    """(damaged bytes, what was done, (offset, shift): record offsets after ``offset`` moved by
    ``shift`` (a text field written with another length), or None)."""
    data = bytearray(sample.data)
    fmt, opts = prep.target.format, prep.target.options
    starts = record_starts(sample)
    if fmt in BINARY_FIELDS:
        fields = list(BINARY_FIELDS[fmt])
        shift = 0
        if fmt == "lldf" and opts.get("rdw"):
            shift = 4
            fields = [("RDW length", -4, 2, "big")] + fields
        for _ in range(20):
            start = rng.choice(starts) + shift
            name, off, width, order = rng.choice(fields)
            order = order or opts.get("byte_order", "little")
            at = start + off
            if 0 <= at and at + width <= len(data):
                old = int.from_bytes(data[at:at + width], order)
                new = _int_values(rng, old, width)
                data[at:at + width] = new.to_bytes(width, order)
                return bytes(data), f"field {name} of the record at {start - shift}: {old} -> {new}", None
        return bytes(data), "field: no record to damage", None
    lines = bytes(data).split(b"\n")
    if fmt == "soliddb":
        offsets = set(starts)
        pos, rows = 0, []
        for i, line in enumerate(lines):
            if pos in offsets:
                rows.append(i)
            pos += len(line) + 1
        if not rows:
            return bytes(data), "field: no row to damage", None
        i = rng.choice(rows)
        cols = lines[i].rstrip(b"\r").split(b",")
        which = rng.choice(("RECID", "column length", "TRXID", "RELID", "stray quote"))
        if which == "stray quote":     # one character of one field becomes a '"'
            c = rng.randrange(len(cols))
            if cols[c]:
                k = rng.randrange(len(cols[c]))
                cols[c] = cols[c][:k] + b'"' + cols[c][k + 1:]
            else:
                cols[c] = b'"'
        elif which == "RECID":
            cols[0] = str(rng.choice((0, 99, rng.randint(0, 30)))).encode()
        elif which == "TRXID":
            cols[2] = str(rng.randint(0, 1 << 40)).encode()
        elif which == "RELID":
            cols[4] = str(rng.randint(0, 1 << 31)).encode()
        elif len(cols) > 7 and len(cols[7]) >= 8:
            cols[7] = f"{rng.randint(0, 0xFFFFFFFF):08x}".encode() + cols[7][8:]
        end = b"\r" if lines[i].endswith(b"\r") else b""
        new = b",".join(cols) + end
        at = sum(len(line) + 1 for line in lines[:i])
        shift = len(new) - len(lines[i])
        lines[i] = new
        return b"\n".join(lines), f"field {which} of row {i + 1}", (at, shift)
    # informix: a record line's len, type, xid or link column
    rows = [n - 1 for n in starts if 0 < n <= len(lines)]
    if not rows:
        return bytes(data), "field: no record line to damage", None
    i = rng.choice(rows)
    tokens = lines[i].split()
    if len(tokens) < 6:
        return bytes(data), "field: record line too short", None
    col = rng.choice((1, 2, 3, 5, -1))
    if col == -1:                  # the record line indented like a dump line
        lines[i] = b"        " + lines[i]
        return b"\n".join(lines), f"record line {i + 1} indented", None
    tokens[col] = {1: str(rng.choice((0, 1, rng.randint(0, 1 << 20)))).encode(),
                   2: rng.choice((b"HINSERT", b"COMMIT", b"BEGIN", b"XYZZY", b"HUPAFT", b"")) or b"-",
                   3: str(rng.randint(0, 1 << 16)).encode(),
                   5: f"{rng.randint(0, 1 << 24):x}".encode()}[col]
    lines[i] = b"  ".join(tokens)
    # informix offsets are line numbers: an edit inside a line moves none
    return (b"\n".join(lines), f"field {('addr', 'len', 'type', 'xid', 'id', 'link')[col]} of line {i + 1}",
            None)


def damage(rng: random.Random, prep: Prepared, sample: Sample, kind: str) -> tuple[bytes, str, tuple | None]:
    data = sample.data
    n = len(data)
    if kind == "field":
        return damage_field(rng, prep, sample)
    data, what = _damage_bytes(rng, prep, data, n, kind)
    return data, what, None


def _damage_bytes(rng: random.Random, prep: Prepared, data: bytes, n: int, kind: str) -> tuple[bytes, str]:
    if n == 0:
        return data, f"{kind}: empty archive"
    at = rng.randrange(n)
    if kind == "bitflip":
        bit = rng.randrange(8)
        return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1:], f"bit {bit} of byte {at}"
    if kind == "byte":
        value = rng.randrange(256)
        return data[:at] + bytes([value]) + data[at + 1:], f"byte {at} = 0x{value:02X}"
    if kind == "truncate":
        return data[:at], f"cut at {at} of {n}"
    if kind == "insert":
        extra = b'"' if prep.target.format == "soliddb" and rng.random() < 0.5 else \
            rng.randbytes(rng.randint(1, 16))
        return data[:at] + extra + data[at:], f"{len(extra)} bytes put in at {at}"
    k = rng.randint(1, 16)
    return data[:at] + data[at + k:], f"{k} bytes taken out at {at}"


def make_case(prep: Prepared, seed: int, case: int) -> tuple[Sample, str, bytes, str, tuple | None]:
    rng = random.Random(f"{prep.target.name}:{seed}:{case}")
    sample = rng.choice(prep.samples)
    kind = rng.choices(KINDS_OF_DAMAGE, WEIGHTS)[0]
    data, what, moved = damage(rng, prep, sample, kind)
    return sample, kind, data, what, moved


# ----------------------------------------------------------------- checks

def check_rows(prep: Prepared, data: bytes, rows: list[dict]) -> list[str]:
    problems = []
    informix = prep.target.format == "informix"
    limit = data.count(b"\n") + 1 if informix else len(data)
    low = 1 if informix else 0
    for r in rows:
        if r["kind"] not in KINDS:
            problems.append(f"unknown kind {r['kind']!r}")
        if r["kind"] == "carry":
            continue
        off = r["record_offset"]
        if off is None or not low <= off < max(limit, 1) + (1 if informix else 0):
            problems.append(f"{r['kind']} row at offset {off}: outside the archive (0..{limit})")
        if r["n_records"] is None or r["n_records"] < 0:
            problems.append(f"row at {off}: n_records {r['n_records']}")
        if r["kind"] == "quarantine":
            if not r.get("error_class") or not r.get("message"):
                problems.append(f"quarantine row at {off} without error class or message")
            raw = r.get("raw_hex")
            if raw and bytes.fromhex(raw) not in data:
                problems.append(f"quarantine row at {off}: raw_hex is not the archive's bytes")
    if HAS_BYTES:
        total = sum(r.get("n_bytes") or 0 for r in rows)
        if any((r.get("n_bytes") or 0) < 0 for r in rows):
            problems.append("negative n_bytes")
        if total != len(data):
            problems.append(f"bytes do not add up: rows account for {total} of {len(data)}")
    return problems[:5]


def loss(sample: Sample, data: bytes, rows: list[dict], moved: tuple | None = None) -> tuple[float, float | None]:
    """(share of the clean archive's records no longer decoded, share of bytes quarantined).
    ``moved``: (offset, shift) of a damage that moved the records after it."""
    at, shift = moved or (0, 0)

    def where(off):
        return off + shift if off > at else off

    good = {(where(r["record_offset"]), r["kind"]): r["n_records"] for r in sample.clean
            if r["kind"] not in ("quarantine", "carry") and r["n_records"]}
    total = sum(good.values()) or 1
    kept = {(r["record_offset"], r["kind"]) for r in rows if r["kind"] not in ("quarantine", "carry")}
    lost = sum(n for k, n in good.items() if k not in kept)
    byte_share = None
    if HAS_BYTES and data:
        byte_share = sum(r.get("n_bytes") or 0 for r in rows if r["kind"] == "quarantine") / len(data)
    return lost / total, byte_share


def run_case(prep: Prepared, seed: int, case: int) -> dict:
    sample, kind, data, what, moved = make_case(prep, seed, case)
    out = {"case": case, "kind": kind, "archive": sample.name, "damage": what, "problems": []}
    t0 = time.perf_counter()
    try:
        rows, _ = decode_rows(prep, sample.name, data, sample.carry)
    except Exception as exc:  # noqa: BLE001 - what the fuzzer is looking for
        out["crash"] = traceback.format_exception_only(type(exc), exc)[-1].strip()
        out["where"] = traceback.format_exc().strip().splitlines()[-3].strip()
        out["seconds"] = time.perf_counter() - t0
        return out
    out["seconds"] = time.perf_counter() - t0
    out["problems"] = check_rows(prep, data, rows)
    try:
        again, _ = decode_rows(prep, sample.name, data, sample.carry)
        if again != rows:
            out["problems"].append("the same bytes gave different rows")
    except Exception as exc:  # noqa: BLE001
        out["problems"].append(f"second decode raised {exc!r}")
    out["lost_records"], out["lost_bytes"] = loss(sample, data, rows, moved)
    return out


# ----------------------------------------------------------------- workers and the run

def _worker(target_name: str, seed: int, conn) -> None:
    prep = prepare(TARGETS[target_name])
    conn.send("ready")
    while True:
        case = conn.recv()
        if case is None:
            return
        conn.send(run_case(prep, seed, case))


class Runner:
    """Cases of one target in a worker process; a case over ``timeout`` is a hang (the
    worker is killed and a new one started)."""

    def __init__(self, target: str, seed: int, timeout: float) -> None:
        self.target, self.seed, self.timeout = target, seed, timeout
        self.ctx = mp.get_context("spawn")
        self.proc = None
        self._start()

    def _start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(self.target, self.seed, child), daemon=True)
        self.proc.start()
        self.conn = parent
        if not parent.poll(300) or parent.recv() != "ready":
            raise RuntimeError(f"fuzz worker for {self.target} did not start")

    def _cpu(self) -> float | None:
        """CPU seconds the worker has used (Linux ``/proc``), or None where unknown."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def run(self, case: int) -> dict:
        """One case. A hang is a case that used ``timeout`` seconds of CPU (or, where that is
        not known, of wall time), or ``WALL_FACTOR`` times that in wall time: a machine
        loaded by others slows a case down without making it a hang."""
        self.conn.send(case)
        cpu0, t0 = self._cpu(), time.monotonic()
        died = None
        while True:
            if self.conn.poll(0.25):
                try:
                    return self.conn.recv()
                except EOFError:
                    died = f"worker died (exit code {self.proc.exitcode})"
                    break
            if not self.proc.is_alive():
                died = f"worker died (exit code {self.proc.exitcode})"
                break
            cpu, wall = self._cpu(), time.monotonic() - t0
            used = (cpu - cpu0) if cpu is not None and cpu0 is not None else wall
            if used > self.timeout or wall > WALL_FACTOR * self.timeout:
                break
        self.proc.kill()
        self.proc.join()
        self._start()
        if died:
            return {"case": case, "crash": died, "problems": []}
        return {"case": case, "hang": f"no answer after {self.timeout:g} s of CPU", "problems": []}

    def close(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def fuzz_target(target: str, cases: int, seed: int = 0, timeout: float = 10.0,
                first: int = 0) -> dict:
    """Run ``cases`` cases of one target; returns the summary (and the failing cases)."""
    runner = Runner(target, seed, timeout)
    results = []
    t0 = time.monotonic()
    try:
        for case in range(first, first + cases):
            results.append(runner.run(case))
    finally:
        runner.close()
    return summarize(target, results, time.monotonic() - t0)


def summarize(target: str, results: list[dict], seconds: float) -> dict:
    field_cases = [r for r in results if r.get("kind") == "field" and "lost_records" in r]
    half = [r for r in field_cases if r["lost_records"] >= 0.5]
    half_bytes = [r for r in field_cases if (r.get("lost_bytes") or 0) >= 0.5]
    failing = [r for r in results if r.get("crash") or r.get("hang") or r.get("problems")]
    return {
        "target": target, "cases": len(results), "seconds": round(seconds, 1),
        "crashes": sum(1 for r in results if r.get("crash")),
        "hangs": sum(1 for r in results if r.get("hang")),
        "violations": sum(1 for r in results if r.get("problems")),
        "field_cases": len(field_cases),
        "field_lose_half": len(half),
        "field_lose_half_share": round(len(half) / len(field_cases), 4) if field_cases else None,
        "field_lose_half_bytes_share": (round(len(half_bytes) / len(field_cases), 4)
                                        if field_cases and HAS_BYTES else None),
        "slowest_case_s": round(max((r.get("seconds") or 0) for r in results), 3) if results else 0,
        "failing": failing[:20],
    }


def describe(s: dict) -> str:
    share = s["field_lose_half_share"]
    line = (f"{s['target']:<11} {s['cases']:>6} cases {s['seconds']:>7.1f} s  crashes {s['crashes']:>4}  "
            f"hangs {s['hangs']:>3}  check violations {s['violations']:>4}  single-field damages losing "
            f">= half: {s['field_lose_half']}/{s['field_cases']}"
            + (f" = {share:.1%}" if share is not None else ""))
    if s["field_lose_half_bytes_share"] is not None:
        line += f" (by bytes {s['field_lose_half_bytes_share']:.1%})"
    return line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=5000, help="cases per target (default 5000)")
    p.add_argument("--target", action="append", choices=sorted(TARGETS), help="default: all")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per case before it is a hang")
    p.add_argument("--case", type=int, help="run this one case (with --show: print its rows)")
    p.add_argument("--show", action="store_true")
    p.add_argument("--json", action="store_true", help="print the summaries as JSON")
    args = p.parse_args(argv)
    targets = args.target or list(TARGETS)
    if args.case is not None:
        for t in targets:
            prep = prepare(TARGETS[t])
            res = run_case(prep, args.seed, args.case)
            print(json.dumps(res, indent=1, default=str))
            if args.show:
                sample, _kind, data, _what, _moved = make_case(prep, args.seed, args.case)
                rows, _ = decode_rows(prep, sample.name, data, sample.carry)
                for r in rows:
                    print({k: v for k, v in r.items() if v is not None and k not in ("before", "after")})
        return 0
    summaries = []
    for t in targets:
        s = fuzz_target(t, args.cases, args.seed, args.timeout)
        summaries.append(s)
        if not args.json:
            print(describe(s), flush=True)
            for r in s["failing"][:5]:
                print(f"    case {r['case']}: {r.get('damage', '')} -> "
                      f"{r.get('crash') or r.get('hang') or '; '.join(r['problems'])}", flush=True)
    if args.json:
        print(json.dumps(summaries, indent=1, default=str))
    bad = sum(s["crashes"] + s["hangs"] + s["violations"] for s in summaries)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
