"""``dblog synth``: write sample nights of archives into the landing zone.

Uses each configured source's own catalog and the format's generator (which writes with
the project's encoders). Besides the archives it writes what the generator wrote as
``synth/<source>/<date>.expected.jsonl`` (the changes that must be published that night,
in commit order), so a run can be checked against the generator rather than the decoder.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from pathlib import Path

from decoders import get as get_format

from .config import Config, Source
from .paths import DataRoot


def synth_source(src: Source, root: DataRoot, first: _dt.date, days: int, transactions: int,
                 seed: int = 0) -> list[dict]:
    fmt = get_format(src.format)
    gen = fmt.Synth(src.name, catalog=src.catalog(), options=src.options, seed=seed,
                    timezone=src.timezone)
    written = []
    for night in gen.nights(first, days, transactions):
        date = night.date.isoformat()
        target = root.landing_night(src.name, date)
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for name, data in night.archives.items():
            (target / name).write_bytes(data)
        exp_dir = root.root / "synth" / src.name
        exp_dir.mkdir(parents=True, exist_ok=True)
        with open(exp_dir / f"{date}.expected.jsonl", "w", encoding="utf-8") as fh:
            for e in night.expected:
                d = e.as_dict()
                d["commit_ts"] = d["commit_ts"].isoformat() if d["commit_ts"] else None
                fh.write(json.dumps(d) + "\n")
        if night.mirror:      # each keyed table as the generator knows it wrote it
            (exp_dir / f"{date}.mirror.json").write_text(json.dumps(night.mirror), encoding="utf-8")
        written.append({"source": src.name, "date": date, "archives": len(night.archives),
                        "bytes": sum(len(v) for v in night.archives.values()),
                        "expected_changes": len(night.expected)})
    return written


def synth(config: Config, sources: list[Source], root: DataRoot, first: _dt.date, days: int,
          transactions: int, seed: int = 0) -> list[dict]:
    out = []
    for i, src in enumerate(sources):
        out.extend(synth_source(src, root, first, days, transactions, seed + i))
    return out


def read_expected(root: DataRoot, source: str, date: str) -> list[dict]:
    path = root.root / "synth" / source / f"{date}.expected.jsonl"
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]
