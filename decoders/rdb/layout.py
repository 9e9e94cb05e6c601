"""Oracle Rdb LogMiner binary output: record layouts and column layouts, as data.

Vendor document: ``formats/rdb-logminer-output.txt`` (RMU /UNLOAD /AFTER_JOURNAL, "Output
Fields"); offsets and the commit record from ``formats/NOTES.md`` section 3; framing from
SPEC section 3 ("rdb"). Everything is little-endian (OpenVMS).

Row record (ACTION ``M``/``D``), 74 bytes, then DATA_LEN bytes of row data, then
ceil(NBV_LEN / 8) bytes of null bit vector:

==== ==== ================= ================================ =====================
 off  len  ours              vendor                           type
==== ==== ================= ================================ =====================
   0    1  action            ACTION (RDB$LM_ACTION)           CHAR(1)
   1   31  relation_name     RELATION_NAME                    CHAR(31), space padded
  32    4  record_type       RECORD_TYPE                      longword
  36    2  len_data          DATA_LEN                         word, bytes
  38    2  num_nbv_bits      NBV_LEN                          word, **bits**
  40    8  dbk               DBK                              quadword
  48    8  start_tad         START_TAD                        DATE VMS (signed)
  56    8  commit_tad        COMMIT_TAD                       DATE VMS (signed)
  64    8  tsn               TSN                              quadword
  72    2  record_version    RECORD_VERSION                   word
==== ==== ================= ================================ =====================

Commit record (ACTION ``C``, written with ``/INCLUDE=ACTION=COMMIT``), 72 bytes: the same
fields up to NBV_LEN, then TID 4 and PID 4 where DBK sits, START_TAD, COMMIT_TAD, TSN, no
RECORD_VERSION; then DATA_LEN bytes: RM_TID_LEN 4, AERCP_LEN 4, RM_TID, AERCP.

Integers the SPEC does not call signed are read unsigned (SPEC section 3, first line);
the two DATE VMS fields are signed (a negative VMS time is a delta time, which a
timestamp of the log cannot be).
"""

from __future__ import annotations

import struct

from ..layout import Field, Layout

# --------------------------------------------------------------------------- record layouts

ROW = Layout("rdb row record header (ACTION M/D)", [
    Field("action", 0, "b1", "ACTION"),
    Field("relation_name", 1, "b31", "RELATION_NAME"),
    Field("record_type", 32, "u4", "RECORD_TYPE"),
    Field("len_data", 36, "u2", "DATA_LEN"),
    Field("num_nbv_bits", 38, "u2", "NBV_LEN"),
    Field("dbk", 40, "u8", "DBK"),
    Field("start_tad", 48, "s8", "START_TAD"),
    Field("commit_tad", 56, "s8", "COMMIT_TAD"),
    Field("tsn", 64, "u8", "TSN"),
    Field("record_version", 72, "u2", "RECORD_VERSION"),
], size=74, byte_order="little")

COMMIT = Layout("rdb commit record header (ACTION C)", [
    Field("action", 0, "b1", "ACTION"),
    Field("relation_name", 1, "b31", "RELATION_NAME"),
    Field("record_type", 32, "u4", "RECORD_TYPE"),
    Field("len_data", 36, "u2", "DATA_LEN"),
    Field("num_nbv_bits", 38, "u2", "NBV_LEN"),
    Field("tid", 40, "u4", "TID"),
    Field("pid", 44, "u4", "PID"),
    Field("start_tad", 48, "s8", "START_TAD"),
    Field("commit_tad", 56, "s8", "COMMIT_TAD"),
    Field("tsn", 64, "u8", "TSN"),
], size=72, byte_order="little")

# commit record data: RM_TID_LEN, AERCP_LEN, then the two byte strings
COMMIT_DATA = Layout("rdb commit record data", [
    Field("len_rm_tid", 0, "u4", "RM_TID_LEN"),
    Field("len_aercp", 4, "u4", "AERCP_LEN"),
], size=8, byte_order="little")

# the compiled structs (encoder, careful path)
ROW_HEADER = ROW.struct
COMMIT_HEADER = COMMIT.struct
assert ROW_HEADER.size == 74 and COMMIT_HEADER.size == 72 and COMMIT_DATA.size == 8

RELATION_NAME_LEN = ROW.by_name["relation_name"].size

# ACTION codes
ACTION_MODIFY = b"M"        # insert or modify: after image, op "m"
ACTION_DELETE = b"D"        # delete: before image, op "d"
ACTION_COMMIT = b"C"        # commit record (/INCLUDE=ACTION=COMMIT)
ACTIONS = {ACTION_MODIFY: "M (insert or modify)", ACTION_DELETE: "D (delete)",
           ACTION_COMMIT: "C (commit)"}
HEADER_SIZE = {ACTION_MODIFY: ROW.size, ACTION_DELETE: ROW.size, ACTION_COMMIT: COMMIT.size}

# --------------------------------------------------------------------------- column layouts

# catalog type -> (struct code, byte width, numpy type); CHAR/VARCHAR are sized by the column's length
FIXED_COLUMNS = {
    "TINYINT": ("b", 1),
    "SMALLINT": ("h", 2),
    "INTEGER": ("i", 4),
    "BIGINT": ("q", 8),
    "REAL": ("f", 4),
    "DOUBLE": ("d", 8),
    "DATE": ("q", 8),          # DATE VMS: 100 ns ticks since 1858-11-17, source-local
    "TIMESTAMP": ("q", 8),     # same representation
}
NUMPY_COLUMNS = {"TINYINT": "i1", "SMALLINT": "<i2", "INTEGER": "<i4", "BIGINT": "<i8",
                 "REAL": "<f4", "DOUBLE": "<f8", "DATE": "<i8", "TIMESTAMP": "<i8"}
VARCHAR_LEN = ("H", 2)         # VARCHAR(n): 2-byte length, then always n bytes
RDB_TYPES = tuple(FIXED_COLUMNS) + ("CHAR", "VARCHAR")


def column_codes(col) -> tuple[str, int]:
    """struct codes and byte width of one column in the row data."""
    t = col.type
    if t in FIXED_COLUMNS:
        return FIXED_COLUMNS[t]
    n = col.length or 0
    if t == "CHAR":
        return f"{n}s", n
    if t == "VARCHAR":
        return f"H{n}s", 2 + n
    raise KeyError(t)


def nbv_bytes(num_bits: int) -> int:
    """Bytes of a null bit vector of ``num_bits`` bits (the vector starts on a byte boundary)."""
    return (num_bits + 7) // 8


# --------------------------------------------------------------------------- DBK (row id)

# The vendor says "a 16-bit line number, a 32-bit page number and a 16-bit area number" but
# not their order inside the quadword (NOTES.md: NOT FOUND). Our rule [GUESS]: the quadword
# read little-endian holds them in the listed order from the low end: line = bits 0-15,
# page = bits 16-47, area = bits 48-63. Rendered as Rdb prints a dbkey: "area:page:line".
DBK_LINE_BITS, DBK_PAGE_BITS = 16, 32


def dbk_text(dbk: int) -> str:
    return f"{dbk >> 48}:{(dbk >> 16) & 0xFFFFFFFF}:{dbk & 0xFFFF}"


def dbk_value(area: int, page: int, line: int) -> int:
    return (area & 0xFFFF) << 48 | (page & 0xFFFFFFFF) << 16 | (line & 0xFFFF)


# --------------------------------------------------------------------------- positions

TICKS_HEX = 16      # COMMIT_TAD, a non-negative signed quadword
TSN_HEX = 16
SEQ_HEX = 8         # record number within its transaction
COMMIT_POSITION_HEX = TICKS_HEX + TSN_HEX
POSITION_HEX = COMMIT_POSITION_HEX + SEQ_HEX
DEFAULT_ENCODING = "latin-1"   # DEC MCS, Rdb's default character set, is ISO 8859-1 in all printed characters
