"""Oracle: the Log Master (lldf) header layout as it was before the one layout language
(decoders/lldf/layout.py at commit a37ebf5), unchanged; used by tests/oracle/lldf.py.

Offsets and vendor names are those of ``formats/lldf-logmaster-db2.txt`` ("Data change
record (LLDF)"); SPEC section 3 ("lldf") adds the ORDERVALUE at offset 188.
"""

from __future__ import annotations

import struct

# (our name, offset, struct code, vendor name, kind)
#   kind: "bin" integer, "char" EBCDIC text (codepage), "raw" binary bytes kept as hex
FIELDS: tuple[tuple[str, int, str, str, str], ...] = (
    ("len_header", 0, "H", "LENGTH", "bin"),
    ("system_id", 2, "4s", "SYSTEMID", "char"),
    ("dbid", 6, "H", "DBID", "bin"),
    ("psid", 8, "H", "PSID", "bin"),
    ("tbobid", 10, "H", "TBOBID", "bin"),
    ("len_owner", 12, "H", "TBOWNERLEN", "bin"),
    ("len_name", 14, "H", "TBNAMELEN", "bin"),
    ("dbname", 16, "8s", "DBNAME", "char"),
    ("tsname", 24, "8s", "TSNAME", "char"),
    ("owner", 32, "8s", "TABLEOWNER", "char"),
    ("name", 40, "18s", "TABLENAME", "char"),
    ("partnum", 58, "H", "PARTNUM", "bin"),
    ("timestamp", 60, "17s", "TIMESTAMP", "raw"),
    ("log_lrsn", 77, "10s", "LOGLRSN", "raw"),
    ("log_rba", 87, "10s", "LOGRBA", "raw"),
    ("member_id", 97, "H", "MEMBERID", "bin"),
    ("rid", 99, "5s", "RID", "raw"),
    ("change_type", 104, "2s", "CHANGE TYPE", "char"),
    ("sql_type", 106, "1s", "SQLTYPE", "char"),
    ("log_rec_disp", 107, "1s", "LOGRECDISP", "char"),
    ("sql_src_type", 108, "1s", "SQLSRCTYPE", "char"),
    ("log_bytes", 109, "I", "LOGBYTES", "bin"),
    ("log_delta", 113, "H", "LOGDELTA", "bin"),
    ("anomaly_row_id", 115, "B", "ANOMALYROWID", "bin"),
    ("anomaly_type", 116, "1s", "ANOMALYTYPE", "char"),
    ("anomaly_rba", 117, "10s", "ANOMALYRBA", "raw"),
    ("uor_timestamp", 127, "17s", "UORTIMESTAMP", "raw"),
    ("uor_commit_timestamp", 144, "17s", "UORCOMMITTIMESTAMP", "raw"),
    ("uor_disp", 161, "1s", "UORDISP", "char"),
    ("uor_id_lrsn", 162, "10s", "UORIDLRSN", "raw"),
    ("uor_id", 172, "10s", "UORID", "raw"),
    ("len_segment", 182, "H", "SEGLEN", "bin"),
    ("num_segments", 184, "H", "TOTALSEGS", "bin"),
    ("segment_no", 186, "H", "SEGNUM", "bin"),
    ("order_value", 188, "I", "ORDERVALUE (vendor: reserved)", "bin"),
    ("uor_commit_lrsn", 192, "10s", "UORCOMMITLRSN", "raw"),
    ("uor_commit_point", 202, "10s", "UORCOMMITPOINT", "raw"),
    ("connection_type", 212, "2s", "CONNECTIONTYPE", "char"),
    ("connect_id", 214, "8s", "CONNECTID", "char"),
    ("correlation_id", 222, "12s", "CORRELATIONID", "char"),
    ("auth_id", 234, "8s", "AUTHID", "char"),
    ("plan", 242, "8s", "PLAN", "char"),
    ("luw_network_id", 250, "8s", "LUWNETWORKID", "char"),
    ("luw_name", 258, "8s", "LUWNAME", "char"),
    ("luw_instance_no", 266, "6s", "LUWINSTANCENO", "raw"),
    ("luw_sequence_no", 272, "H", "LUWSEQUENCENO", "bin"),
    ("incomplete_trans", 274, "1s", "INCOMPLETETRANS", "char"),
    ("incomplete_dep", 275, "1s", "INCOMPLETEDEP", "char"),
    ("uor_has_comp", 276, "1s", "UORHASCOMP", "char"),
    ("sql_ri_rba", 277, "10s", "SQLRIRBA", "raw"),
    ("pagenum_fmt", 287, "1s", "PAGENUMFMT", "char"),
)

MIN_HEADER = 288            # offset of DATA in the vendor table; LENGTH below this is corrupt
MAX_HEADER = 4096           # our plausibility bound: a larger LENGTH is taken as garbage
NAMES = tuple(f[0] for f in FIELDS)
KIND = {f[0]: f[4] for f in FIELDS}
OFFSET = {f[0]: f[1] for f in FIELDS}


def _size(code: str) -> int:
    return struct.calcsize(">" + code)


def _check() -> None:
    pos = 0
    for name, off, code, _vendor, _kind in FIELDS:
        if off != pos:
            raise AssertionError(f"lldf layout: {name} at {off}, expected {pos}")
        pos += _size(code)
    if pos != MIN_HEADER:
        raise AssertionError(f"lldf layout: header is {pos} bytes, expected {MIN_HEADER}")


_check()

HEADER = struct.Struct(">" + "".join(f[2] for f in FIELDS))   # every field, in order


def header_struct(names: tuple[str, ...]) -> struct.Struct:
    """A struct over the 288 known header bytes that yields only ``names`` (in layout
    order; unnamed fields become pad bytes)."""
    wanted = set(names)
    unknown = wanted - set(NAMES)
    if unknown:
        raise KeyError(f"lldf layout has no fields {sorted(unknown)}")
    codes = []
    for name, _off, code, _vendor, _kind in FIELDS:
        codes.append(code if name in wanted else f"{_size(code)}x")
    return struct.Struct(">" + "".join(codes))


# RDW (z/OS record descriptor word): length including the RDW, then two zero bytes
RDW = struct.Struct(">HH")
RDW_LEN = RDW.size
LEN_AREA = struct.Struct(">H")   # DATA area length (includes itself), row image length,
LEN2 = LEN_AREA                  # VARCHAR length, exchange name lengths: all BIN(2)

BIN10_HEX = 20                   # BIN(10) LRSN/RBA -> 20 hex digits
BIN17_HEX = 34                   # BIN(17) timestamp -> 34 hex digits
ORDER_HEX = 8                    # ORDERVALUE BIN(4) -> 8 hex digits
RID_HEX = 10                     # RID BIN(5)

# CHANGE TYPE -> what the record is
ROW_TYPES = {"UB": "u", "I ": "c", "IL": "c", "D ": "d"}
TRUNCATE_TYPES = {"DM", "DT", "DR"}           # op t
DDL_TYPES = {"CO", "E "}                      # op ddl (catalog object, exchange)
CONTROL_TYPES = {"CM": "lldf_command", "SC": "lldf_status_change"}
CHANGE_TYPES = set(ROW_TYPES) | TRUNCATE_TYPES | DDL_TYPES | set(CONTROL_TYPES)
IMAGES = {"UB": (True, True), "I ": (False, True), "IL": (False, True), "D ": (True, False)}

# dispositions
LOGRECDISP_COMMITTED = "C"       # others (A aborted, S savepoint rollback, O reversed) skipped
UOR_COMMITTED, UOR_ABORTED, UOR_OPEN = "C", "A", " "
UOR_DISPS = {"C", "A", " ", "\x00"}

# DDL / exchange renderings
EXCHANGE_DDL = "EXCHANGE DATA BETWEEN TABLE {table} AND {clone}"
CATALOG_OBJECT_DDL = "CATALOG OBJECT {table}"
