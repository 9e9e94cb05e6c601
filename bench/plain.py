"""Baseline (a): the decoder a user would write by hand.

Per format a straightforward loop: cut the archive into records with ``struct`` (or lines),
decode each change record on its own into ``(op, table_id, before, after)``, render the row
images with ``json.dumps`` of a dict, collect the rows and write Parquet with pyarrow.
What it reuses from the project is what a hand-writer would take from a library: the
catalog, the per-table column value readers of each format (``RowCodec.values`` & co.:
the byte layout of a value) and the layout constants. It does none of the rest: no
transactions, positions, pairing of before/after records, undo, segments, quarantine or
audit. It is a fair floor for "plain Python", not a replacement for the decoders.

``split(fmt, data, options)`` and ``RecordDecoder(fmt, source)`` are shared with baseline (b)
(the Spark UDF), which calls the same per-record function once per record.
"""

from __future__ import annotations

import json
import math
import struct
import time
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from decoders.catalog import Catalog, Table, parse_catalog

OUT_SCHEMA = pa.schema([("archive", pa.string()), ("record", pa.int64()), ("op", pa.string()),
                        ("table_id", pa.string()), ("before", pa.string()),
                        ("after", pa.string())])


# ----------------------------------------------------------------- JSON by hand

def _plain(col):
    """value -> something json.dumps renders (what a hand-writer would do per type)."""
    t = col.type
    if t in ("SMALLINT", "INTEGER", "BIGINT", "TINYINT"):
        return int
    if t == "DECIMAL":
        q = Decimal(1).scaleb(-(col.scale or 0))
        return lambda v: str(Decimal(v).quantize(q))
    if t in ("REAL", "FLOAT", "DOUBLE"):
        def f(v):
            if not math.isfinite(v):
                return str(v)
            if t == "REAL" or (t == "FLOAT" and col.length == 4):
                return float(str(np.float32(v)))      # shortest text of the single
            return float(v)
        return f
    if t in ("CHAR", "VARCHAR", "CLOB"):
        return lambda v: v if isinstance(v, str) else bytes(v).hex()
    if t in ("BINARY", "VARBINARY"):
        return lambda v: bytes(v).hex()
    if t in ("DATE", "TIME"):
        return lambda v: v.isoformat()
    if t == "TIMESTAMP":
        return lambda v: v.isoformat(timespec="microseconds")
    if t == "BLOB":
        return lambda v: {"blob_id": int(v)} if isinstance(v, int) else bytes(v).hex()
    return str


class JsonRow:
    def __init__(self, table: Table) -> None:
        self.cols = [(c.name, _plain(c)) for c in table.columns]

    def __call__(self, values) -> str:
        return json.dumps({name: (None if v is None else f(v))
                           for (name, f), v in zip(self.cols, values)}, ensure_ascii=False)


# ----------------------------------------------------------------- framing

def split(fmt: str, data: bytes, options: dict | None = None) -> list[bytes]:
    """The archive's records, each as its own bytes."""
    options = options or {}
    if fmt in ("soliddb", "informix"):
        lines = data.split(b"\n")
        if fmt == "soliddb":
            return [ln for ln in lines[1:] if ln.strip()]
        return [ln for ln in lines if ln.strip() and not ln[:1].isspace()
                and not ln.lstrip().startswith(b"addr")]
    out = []
    pos, n = 0, len(data)
    if fmt == "db2luw":
        lm = struct.Struct(("<" if options.get("byte_order", "little") == "little" else ">") + "I")
        while pos + 10 <= n:
            end = pos + 6 + lm.unpack_from(data, pos + 6)[0]
            out.append(data[pos:end])
            pos = end
    elif fmt == "rdb":
        hdr = struct.Struct("<c31sIHH")
        while pos + 40 <= n:
            action, _, _, dlen, nbits = hdr.unpack_from(data, pos)
            end = pos + (72 if action == b"C" else 74) + dlen + (nbits + 7) // 8
            out.append(data[pos:end])
            pos = end
    elif fmt == "lldf":
        rdw = struct.Struct(">H")
        while pos + 4 <= n:
            end = pos + rdw.unpack_from(data, pos)[0]
            out.append(data[pos:end])
            pos = end
    else:
        raise ValueError(fmt)
    return out


# ----------------------------------------------------------------- one record

class RecordDecoder:
    """``decoder(record_bytes) -> (op, table_id, before, after) | None`` for one source."""

    def __init__(self, fmt: str, source: dict) -> None:
        self.fmt = fmt
        self.catalog: Catalog = parse_catalog(source["catalog"], "bench catalog") \
            if isinstance(source["catalog"], dict) else source["catalog"]
        self.options = source.get("options") or {}
        self.tables: dict = {}
        self.decode = getattr(self, "_" + fmt)

    def __call__(self, rec: bytes):
        return self.decode(rec)

    def _table(self, tid: str, make):
        got = self.tables.get(tid)
        if got is None:
            table = self.catalog.table(tid)
            got = self.tables[tid] = None if table is None else (table, make(table),
                                                                 JsonRow(table))
        return got

    # solidDB: CSV line RECID,RECNAME,TRXID,STMTTRXID,RELID,FLAGS,LOGADDR,DATA(hex)
    def _soliddb(self, rec: bytes):
        from decoders.soliddb.decoder import value_decoders

        f = rec.decode("utf-8").rstrip("\r").split(",")
        recid = int(f[0])
        op = {1: "c", 3: "u", 4: "d", 5: "u"}.get(recid)
        if op is None:
            return None
        got = self._table(f[4], value_decoders)
        if got is None:
            return None
        table, decs, render = got
        data = bytes.fromhex(f[7])
        vals, pos = [], 0
        for dec in decs:
            (ln,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if ln == -1:
                vals.append(None)
            elif ln == -2:
                vals.append(struct.unpack_from(">q", data, pos)[0])
                pos += 8
            else:
                vals.append(dec(data[pos:pos + ln]))
                pos += ln
        image = render(vals)
        if recid in (4, 5):
            return op, table.id, image, None
        return op, table.id, None, image

    # Db2 LUW: LSN(6) + Log Manager header + DMS body; insert/delete/update only
    def _db2luw(self, rec: bytes):
        from tests.oracle import db2luw_layout as L      # the per-record decoder's layouts
        from tests.oracle.db2luw import RowCodec          # and its value reader (the oracle)

        st = self.__dict__.get("st")
        if st is None:
            st = self.st = L.structs(self.options.get("byte_order", "little"))
            self.codepage = self.options.get("codepage") or "utf-8"
        _, rtype, _, _, _ = st.lm_header.unpack_from(rec, 6)
        if rtype != L.NORMAL:
            return None
        body = 6 + L.LRH_LEN
        comp, func = rec[body], rec[body + 1]
        if comp != L.COMPONENT_DMS or func not in (118, 106, 120):
            return None
        _, _, ts, tb = st.dms_header.unpack_from(rec, body)
        tid = f"{ts}.{tb}"
        got = self._table(tid, lambda t: RowCodec(t, st, self.codepage))
        if got is None:
            return None
        table, codec, render = got
        img = body + st.dms_header.size + st.row_block.size

        def image(start):
            _, rlen = st.record_header.unpack_from(rec, start)
            fud, fixed_len = st.fud_header.unpack_from(rec, start + 4)
            return render(codec.values(rec, start + 8, fixed_len, start + rlen)), start + rlen

        if func == 120:
            before, end = image(img)
            after, _ = image(end + st.dms_header.size + st.row_block.size)
            return "u", tid, before, after
        one, _ = image(img)
        return ("c", tid, None, one) if func == 118 else ("d", tid, one, None)

    # Rdb: fixed header, row data, null bit vector
    def _rdb(self, rec: bytes):
        from decoders.rdb import layout as L
        from decoders.rdb.decoder import RowCodec

        if rec[:1] == b"C":
            return None
        action, _, rtype, dlen, nbits, _, _, _, _, _ = L.ROW_HEADER.unpack_from(rec, 0)
        got = self._table(str(rtype), RowCodec)
        if got is None:
            return None
        table, codec, render = got
        nulls = int.from_bytes(rec[74 + dlen:], "little")
        image = render(codec.values(rec, 74, nulls))
        return ("m", table.id, None, image) if action == b"M" else ("d", table.id, image, None)

    # Informix onlog text: a change names its tblspace and rowid, no row images
    def _informix(self, rec: bytes):
        tok = rec.decode("utf-8").split()
        op = {"HINSERT": "c", "HDELETE": "d", "HUPDATE": "u", "HUPBEF": "u"}.get(tok[2])
        if op is None:
            return None
        return op, format(int(tok[6], 16), "x"), None, None

    # Log Master: RDW + header + DATA area of row images (unsegmented records only)
    def _lldf(self, rec: bytes):
        # the per-record value readers of the decoder before the columnar one (its oracle copy)
        from tests.oracle import lldf_layout as L
        from tests.oracle.lldf import HDR, TableCodec, _render_columns

        h = HDR.unpack_from(rec, 4)
        len_header, dbid, tbobid = h[0], h[1], h[2]
        ct = h[10].decode(self.options.get("codepage") or "cp037")
        nsegs = h[16]
        images = L.IMAGES.get(ct)
        if images is None or nsegs != 1:
            return None
        tid = f"{dbid}.{tbobid}"
        got = self.tables.get(tid)
        if got is None:
            table = self.catalog.table(tid)
            got = self.tables[tid] = None if table is None else (
                table, TableCodec(table), JsonRow(Table(table.id, table.schema, table.name,
                                                        tuple(_render_columns(table)))))
        if got is None:
            return None
        table, codec, render = got
        pos = 4 + len_header + 2          # after the DATA area's length
        out = []
        for want in images:
            if want:
                (n,) = struct.unpack_from(">H", rec, pos)
                out.append(render(codec.values(rec, pos + 2, pos + 2 + n)))
                pos += 2 + n
            else:
                out.append(None)
        op = {"UB": "u", "I ": "c", "IL": "c", "D ": "d"}[ct]
        return op, tid, out[0], out[1]


# ----------------------------------------------------------------- the whole baseline

def run(fmt: str, source: dict, archives: list[Path], out: Path, batch: int = 100_000) -> dict:
    """Decode ``archives`` in this process and write ``out`` (one Parquet file)."""
    dec = RecordDecoder(fmt, source).decode
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = pq.ParquetWriter(out, OUT_SCHEMA, compression="zstd")
    cols = {name: [] for name in OUT_SCHEMA.names}
    records = rows = nbytes = 0

    def flush():
        nonlocal cols
        if cols["op"]:
            writer.write_table(pa.table(cols, schema=OUT_SCHEMA))
            cols = {name: [] for name in OUT_SCHEMA.names}

    for path in archives:
        data = path.read_bytes()
        nbytes += len(data)
        for i, rec in enumerate(split(fmt, data, source.get("options"))):
            records += 1
            got = dec(rec)
            if got is None:
                continue
            op, tid, before, after = got
            cols["archive"].append(path.name)
            cols["record"].append(i)
            cols["op"].append(op)
            cols["table_id"].append(tid)
            cols["before"].append(before)
            cols["after"].append(after)
            rows += 1
            if len(cols["op"]) >= batch:
                flush()
        del data
    flush()
    writer.close()
    return {"records": records, "rows": rows, "bytes": nbytes}
