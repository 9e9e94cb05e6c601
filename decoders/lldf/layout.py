"""Log Master logical log data file (LLDF): the record layouts and code tables, as data.

``HEADER`` is the logical log header of ``formats/lldf-logmaster-db2.txt`` ("Data change
record (LLDF)") in the one layout language (``decoders/layout.py``): our name, offset, type,
the vendor's name and a kind (``bin`` integer, ``char`` EBCDIC text in the header
``codepage``, ``raw`` bytes kept as hex). SPEC section 3 ("lldf") adds the ORDERVALUE at
offset 188 (the field the vendor table lists as reserved). The header is 288 bytes up to
DATA; a record's LENGTH may be larger (later product versions): the bytes beyond are
ignored. ``RDW`` is the z/OS record descriptor word before each record when ``rdw: true``;
``LEN2`` every BIN(2) length of the DATA area (the area's own length, which includes
itself; a row image's, which does not; a VARCHAR's; the exchange record's names').
"""

from __future__ import annotations

from ..layout import Field, Layout

HEADER = Layout("lldf logical log header", (
    Field("len_header", 0, "u2", "LENGTH", "bin"),
    Field("system_id", 2, "b4", "SYSTEMID", "char"),
    Field("dbid", 6, "u2", "DBID", "bin"),
    Field("psid", 8, "u2", "PSID", "bin"),
    Field("tbobid", 10, "u2", "TBOBID", "bin"),
    Field("len_owner", 12, "u2", "TBOWNERLEN", "bin"),
    Field("len_name", 14, "u2", "TBNAMELEN", "bin"),
    Field("dbname", 16, "b8", "DBNAME", "char"),
    Field("tsname", 24, "b8", "TSNAME", "char"),
    Field("owner", 32, "b8", "TABLEOWNER", "char"),
    Field("name", 40, "b18", "TABLENAME", "char"),
    Field("partnum", 58, "u2", "PARTNUM", "bin"),
    Field("timestamp", 60, "b17", "TIMESTAMP", "raw"),
    Field("log_lrsn", 77, "b10", "LOGLRSN", "raw"),
    Field("log_rba", 87, "b10", "LOGRBA", "raw"),
    Field("member_id", 97, "u2", "MEMBERID", "bin"),
    Field("rid", 99, "b5", "RID", "raw"),
    Field("change_type", 104, "b2", "CHANGE TYPE", "char"),
    Field("sql_type", 106, "b1", "SQLTYPE", "char"),
    Field("log_rec_disp", 107, "b1", "LOGRECDISP", "char"),
    Field("sql_src_type", 108, "b1", "SQLSRCTYPE", "char"),
    Field("log_bytes", 109, "u4", "LOGBYTES", "bin"),
    Field("log_delta", 113, "u2", "LOGDELTA", "bin"),
    Field("anomaly_row_id", 115, "u1", "ANOMALYROWID", "bin"),
    Field("anomaly_type", 116, "b1", "ANOMALYTYPE", "char"),
    Field("anomaly_rba", 117, "b10", "ANOMALYRBA", "raw"),
    Field("uor_timestamp", 127, "b17", "UORTIMESTAMP", "raw"),
    Field("uor_commit_timestamp", 144, "b17", "UORCOMMITTIMESTAMP", "raw"),
    Field("uor_disp", 161, "b1", "UORDISP", "char"),
    Field("uor_id_lrsn", 162, "b10", "UORIDLRSN", "raw"),
    Field("uor_id", 172, "b10", "UORID", "raw"),
    Field("len_segment", 182, "u2", "SEGLEN", "bin"),
    Field("num_segments", 184, "u2", "TOTALSEGS", "bin"),
    Field("segment_no", 186, "u2", "SEGNUM", "bin"),
    Field("order_value", 188, "u4", "ORDERVALUE (vendor: reserved)", "bin"),
    Field("uor_commit_lrsn", 192, "b10", "UORCOMMITLRSN", "raw"),
    Field("uor_commit_point", 202, "b10", "UORCOMMITPOINT", "raw"),
    Field("connection_type", 212, "b2", "CONNECTIONTYPE", "char"),
    Field("connect_id", 214, "b8", "CONNECTID", "char"),
    Field("correlation_id", 222, "b12", "CORRELATIONID", "char"),
    Field("auth_id", 234, "b8", "AUTHID", "char"),
    Field("plan", 242, "b8", "PLAN", "char"),
    Field("luw_network_id", 250, "b8", "LUWNETWORKID", "char"),
    Field("luw_name", 258, "b8", "LUWNAME", "char"),
    Field("luw_instance_no", 266, "b6", "LUWINSTANCENO", "raw"),
    Field("luw_sequence_no", 272, "u2", "LUWSEQUENCENO", "bin"),
    Field("incomplete_trans", 274, "b1", "INCOMPLETETRANS", "char"),
    Field("incomplete_dep", 275, "b1", "INCOMPLETEDEP", "char"),
    Field("uor_has_comp", 276, "b1", "UORHASCOMP", "char"),
    Field("sql_ri_rba", 277, "b10", "SQLRIRBA", "raw"),
    Field("pagenum_fmt", 287, "b1", "PAGENUMFMT", "char"),
), size=288)


def _contiguous() -> None:
    """The vendor table leaves no gap: every field starts where the one before it ends."""
    pos = 0
    for f in HEADER.fields:
        if f.offset != pos:
            raise AssertionError(f"lldf header: {f.name} at {f.offset}, expected {pos}")
        pos = f.end
    if pos != HEADER.size:
        raise AssertionError(f"lldf header: {pos} bytes, expected {HEADER.size}")


_contiguous()

MIN_HEADER = HEADER.size    # offset of DATA in the vendor table; a smaller LENGTH is corrupt
MAX_HEADER = 4096           # our plausibility bound: a larger LENGTH is taken as garbage

RDW = Layout("z/OS record descriptor word", (
    Field("len_record", 0, "u2", "RDW length (includes the RDW)"),
    Field("flags", 2, "u2", "RDW segment flags (zero: not spanned)"),
))
RDW_LEN = RDW.size
LEN2 = Layout("BIN(2) length", (Field("length", 0, "u2", "halfword length"),))

BIN10_HEX = 20                   # BIN(10) LRSN/RBA -> 20 hex digits

# CHANGE TYPE -> what the record is
ROW_TYPES = {"UB": "u", "I ": "c", "IL": "c", "D ": "d"}
TRUNCATE_TYPES = {"DM", "DT", "DR"}           # op t
DDL_TYPES = {"CO", "E "}                      # op ddl (catalog object, exchange)
CONTROL_TYPES = {"CM": "lldf_command", "SC": "lldf_status_change"}
CHANGE_TYPES = set(ROW_TYPES) | TRUNCATE_TYPES | DDL_TYPES | set(CONTROL_TYPES)
IMAGES = {"UB": (True, True), "I ": (False, True), "IL": (False, True), "D ": (True, False)}
# LOGRECDISP values of the vendor table (and blank / X00): resynchronisation checks them
LOGRECDISPS = ("C", "A", "S", "O", " ", "\x00")

# dispositions
LOGRECDISP_COMMITTED = "C"       # others (A aborted, S savepoint rollback, O reversed) skipped
UOR_DISPS = {"C", "A", " ", "\x00"}

# DDL / exchange renderings
EXCHANGE_DDL = "EXCHANGE DATA BETWEEN TABLE {table} AND {clone}"
CATALOG_OBJECT_DDL = "CATALOG OBJECT {table}"
