"""Db2 LUW log records as data, in the one layout language (``decoders/layout.py``).

Two layouts of the log-read buffer stream (SPEC section 3):

* **Version 7** (``layout: v7``, formats/db2luw-dms-log-records.txt, NOTES.md section 1): each
  record behind a 6-byte LSN, a 20-byte Log Manager header (26 for compensation, 32 for
  propagatable compensation), record types as ASCII letters, DMS functions 118/106/120.
* **Db2 10.1 to 12.1** (``layout: v10``, formats/db2luw-v10-notes.md): each record behind a
  56-byte ``db2ReadLogFilterData``, a 40-byte header (56 / 64) with 64-bit LSN, LFS and LSO,
  types 0x004E/0x0043/0x0041/0x0084/0x008A, DMS functions 162/161/163 (165/164 to an empty
  page) with a 6-byte RID.

What both share is declared once: the DMS and DOM headers, the DDL and control bodies
that did not change, the record header and the Formatted User Data Record, and the fixed
section of each table's row image (``row_layout``). Each layout is declared little-endian
(x86) and ``.with_byte_order("big")`` gives the other order (``Variant.layouts(order)``).
Fields carry the vendor's own names beside ours; body layouts start at the DMS/DOM header,
so their offsets are the vendor tables' ("offsets are from the end of the log manager record
header"). LSNs and TIDs of Version 7 are byte strings (``b6``: compared as big-endian
unsigned, never swapped); Version 10 LSN/LFS/LSO are u64 in the source's byte order.
"""

from __future__ import annotations

from functools import lru_cache

from ..layout import Field as F
from ..layout import Layout

# ----------------------------------------------------------------- prefixes and headers

LSN_PREFIX = Layout("lsn_prefix", [F("lsn", 0, "b6", "SQLU_LSN (before each record)")])

LM_HEADER = Layout("lm_header", [                     # V7 Table 95
    F("len_record", 0, "u4", "length of the entire log record"),
    F("record_type", 4, "u2", "type of log record"),
    F("flags", 6, "u2", "log record general flag"),
    F("lsn_prev", 8, "b6", "SQLU_LSN of the previous log record written by this transaction"),
    F("tid", 14, "b6", "SQLU_TID unique transaction identifier"),
], size=20)
LM_HEADER_COMPENSATION = Layout("lm_header_compensation", [*LM_HEADER.fields,
    F("lsn_undo_next", 20, "b6", "SQLU_LSN of record prior to the one being compensated"),
    F("lsn_compensated", 26, "b6", "SQLU_LSN of record being compensated (propagatable)"),
], size=32)

FILTER_DATA = Layout("db2ReadLogFilterData", [         # v10 prefix (db2ReadLog, FILTER_ON)
    F("lri1_type", 0, "u8", "recordLRIType1.lriType"),
    F("lri1_part1", 8, "u8", "recordLRIType1.part1 (LFS)"),
    F("lri1_part2", 16, "u8", "recordLRIType1.part2 (LSN)"),
    F("lri2_type", 24, "u8", "recordLRIType2.lriType"),
    F("lri2_part1", 32, "u8", "recordLRIType2.part1 (the record's LSO)"),
    F("lri2_part2", 40, "u8", "recordLRIType2.part2"),
    F("len_real_record", 48, "u4", "realLogRecLen"),
    F("sqlcode", 52, "s4", "sqlcode"),
], size=56)

LR_HEADER = Layout("log_record_header", [             # v10 "Log record header"
    F("len_record", 0, "u4", "recordSize"),
    F("record_type", 4, "u2", "recordType"),
    F("flags", 6, "u2", "recordFlag"),
    F("lsn", 8, "u8", "recordLSN (db2LSN)"),
    F("lfs", 16, "u8", "recordLFS"),
    F("lso_prev", 24, "u8", "backPointerLSO"),
    F("tid", 32, "b6", "recordTID (SQLU_TID)"),
    F("log_stream_id", 38, "u2", "logstreamID"),
], size=40)
LR_HEADER_COMPENSATION = Layout("log_record_header_compensation", [*LR_HEADER.fields,
    F("extra_stream_id", 40, "u2", "log stream ID of the extra LSO (compensation)"),
    F("reserved", 42, "b6", "reserved"),
    F("lso_undo_next", 48, "u8", "LSO of the record before the compensated one"),
    F("lso_compensated", 56, "u8", "LSO of the compensated record (propagatable)"),
], size=64)

# general flags (both versions)
FLAG_REDO_ALWAYS = 0x0001
FLAG_PROPAGATABLE = 0x0002

# ----------------------------------------------------------------- component headers (shared)

COMPONENT_DMS, COMPONENT_DOM = 1, 4

DMS_HEADER = Layout("dms_header", [                   # Table 96
    F("component_id", 0, "u1", "Component identifier (=1)"),
    F("function_id", 1, "u1", "Function identifier"),
    F("tablespace_id", 2, "u2", "Table space identifier"),
    F("table_id", 4, "u2", "Table identifier"),
])
_DMS = DMS_HEADER.fields

DOM_HEADER = Layout("dom_header", [                   # Table 97
    F("component_id", 0, "u1", "Component identifier (=4)"),
    F("function_id", 1, "u1", "Function identifier"),
    F("obj_tablespace_id", 2, "u2", "Object identifiers: table space identifier"),
    F("obj_id", 4, "u2", "Object identifier"),
    F("tablespace_id", 6, "u2", "Table identifiers: table space identifier"),
    F("table_id", 8, "u2", "Table identifier"),
    F("object_type", 10, "u1", "Object type"),
    F("flags", 11, "u1", "Flags"),
])
_DOM = DOM_HEADER.fields

# ----------------------------------------------------------------- DMS/DOM bodies

ROW_V7 = Layout("row_record_v7", [*_DMS,              # Tables 106 and 109 (each update half)
    F("rid", 8, "s4", "RID"),
    F("len_record", 12, "u2", "Record length (labels not trusted: the image's own header is)"),
    F("free_space", 14, "u2", "Free space"),
    F("ofs_record", 16, "u2", "Record offset"),
], size=18)                                           # record header and data @18

ROW_V10 = Layout("row_record_v10", [*_DMS,            # 161/162, each 163 half, 111/112
    F("iud_flags", 6, "u2", "(not read by IBM; V7 padding)"),
    F("len_record", 8, "u2", "subRecordLen"),
    F("free_space", 10, "u2", "(not read by IBM; V7 free space)"),
    F("rid", 12, "b6", "RID"),
    F("ofs_record", 18, "u2", "subRecordOffset"),
], size=20)                                           # record @20

ROW_EMPTY_PAGE_V10 = Layout("row_record_empty_page_v10", [*_DMS,   # 164/165/166
    F("iud_flags", 6, "u2", "(not read by IBM)"),
    F("len_record", 8, "u2", "subRecordLen"),
    F("free_space", 10, "u2", "(not read by IBM)"),
    F("rid", 12, "b6", "RID"),
    F("reserved", 18, "b6", "(not read by IBM)"),
    F("ofs_record", 24, "u2", "subRecordOffset"),
], size=26)                                           # record @26

UNDO_INSERT_V7 = Layout("undo_insert_v7", [*_DMS,    # Table 100
    F("rid", 8, "s4", "RID"),
    F("len_record", 12, "u2", "Record length"),
    F("free_space", 14, "u2", "Free space"),
], size=16)

UNDO_INSERT_V10 = Layout("undo_insert_v10", [*_DMS,  # 110 (IBM sample: length and RID only), 131
    F("len_record", 8, "u2", "subRecordLen"),
    F("free_space", 10, "u2", "(not read by IBM)"),
    F("rid", 12, "b6", "RID"),
], size=18)

ADD_COLUMNS = Layout("add_columns", [*_DMS,          # Table 105 (also 104 undo); arrays follow
    F("num_old_columns", 8, "s4", "Old column count"),
    F("num_new_columns", 12, "s4", "New column count"),
], size=16)
OLD_COLUMN_ELEMENT = 8           # bytes per old column descriptor
NEW_COLUMN_ELEMENT = 12          # bytes per new column descriptor

ALTER_COLUMN = Layout("alter_column_length", [*_DMS,  # 113/115: not in the vendor document,
    F("colno", 8, "u2", "(project) column number, 0-based like SYSCAT.COLUMNS.COLNO"),  # [GUESS]
    F("old_length", 12, "u4", "(project) old length"),
    F("new_length", 16, "u4", "(project) new length"),
], size=20)

ALTER_ATTRIBUTE_V7 = Layout("alter_table_attribute_v7", [*_DMS,   # Table 104
    F("alter_mask", 8, "s4", "Alter bit (attribute) mask"),
    F("alter_values", 12, "s4", "Alter bit (attribute) values"),
], size=16)

ALTER_ATTRIBUTE_V10 = Layout("alter_table_attribute_v10", [*_DMS,  # IBM sample: two u64
    F("alter_mask", 6, "u8", "alterBitMask"),
    F("alter_values", 14, "u8", "alterBitValues"),
], size=22)

INIT_TABLE_V7 = Layout("initialize_table_v7", [*_DMS,   # Table 98, up to the description record
    F("lsn_file_create", 6, "b6", "File create LSN"),
    F("tdir_record_type", 12, "u1", "record type"),
    F("index_flag", 14, "u2", "index flag"),
    F("index_root_page", 16, "u4", "index root page"),
    F("tdesc_recid", 20, "s4", "TDESC recid"),
    F("flags", 80, "u4", "flags"),
    F("len_table_description", 84, "u4", "Table description length"),
], size=88)

TABLE_DESCRIPTION = Layout("table_description", [   # Table 98 @88: table description record
    F("record_type", 0, "u1", "record type"),
    F("num_columns", 2, "u2", "number of columns"),
], size=4)                                            # then the column descriptor array
COLUMN_DESCRIPTOR = 8                                 # bytes per column descriptor

INIT_TABLE_V10 = Layout("initialize_table_v10", [*_DMS,  # [CODE QM, unverified]: LSN widened
    F("lsn_file_create", 6, "u8", "File create LSN"),
    F("tdir_record_type", 14, "u1", "record type"),
    F("index_flag", 16, "u2", "index flag"),
    F("index_root_page", 18, "u4", "index root page"),
    F("tdesc_recid", 22, "s4", "TDESC recid"),
    F("flags", 84, "u4", "flags"),
    F("len_table_description", 88, "u4", "Table description length"),
], size=92)

INDEX = Layout("index", [*_DOM,                      # Table 102 (DOM 2/3)
    F("index_token", 14, "u2", "Index token"),
    F("index_root_page", 16, "u4", "Index root page"),
], size=20)

TABLE_OBJECT = Layout("table_object", [*_DOM,        # Table 103 (DOM 101/4/130)
    F("internal", 12, "b56", "Internal"),
], size=68)

TRUNCATE = Layout("truncate_table", [*_DOM], size=12)   # Table 99: internal, variable

REORG = Layout("reorg_table", [*_DOM,                # Table 101
    F("internal", 12, "b252", "Internal"),
    F("index_token", 264, "u2", "Index token"),
    F("temp_tablespace_id", 266, "u2", "Temporary tablespace ID"),
], size=268)

# ----------------------------------------------------------------- transaction manager bodies

COMMIT_V7 = Layout("commit_v7", [                     # Table 115, after the 20-byte header
    F("time_committed", 0, "u4", "time transaction committed (UTC seconds)"),
], size=4)                                            # authorization id: the rest

COMMIT_V10 = Layout("commit_v10", [                   # after the 40-byte header
    F("time_committed", 0, "u8", "time transaction committed (sqluint64, UTC seconds)"),
    F("len_authid", 8, "u2", "authorization identifier length (propagatable only)"),
], size=10)                                           # authid @10 (record @50)
COMMIT_V10_BASIC = 8                                  # non-propagatable: time only

ABORT_V10 = Layout("abort_v10", [                     # IBM sample: authid length, authid
    F("len_authid", 0, "u2", "authorization identifier length"),
], size=2)

# ----------------------------------------------------------------- row images (shared)

RECORD_HEADER = Layout("record_header", [             # before each row image [NOTES 1.5]
    F("record_type", 0, "u1", "record type (0x00 normal; 0x10 the same; else control)"),
    F("len_record", 2, "u2", "record length, this header included"),
])
FUD_HEADER = Layout("fud_header", [                   # Formatted User Data Record, Table 108
    F("fud_type", 0, "u1", "record type (1 = formatted user data)"),
    F("len_fixed", 2, "u2", "length of fixed section"),
])
IMAGE_HEADER = Layout("image_header", [*RECORD_HEADER.fields,   # the two, as one image starts
    *(F(f.name, 4 + f.offset, f.type, f.vendor) for f in FUD_HEADER.fields)])
VARIABLE_REF = Layout("variable_ref", [               # fixed part of a variable-length column
    F("ofs_data", 0, "u2", "offset from the beginning of the fixed length section"),
    F("len_data", 2, "u2", "length of the variable data"),
])

USER_RECORD_TYPES = frozenset((0x00, 0x10))
FORMATTED_USER_DATA = 1
NULL_FLAG_VALUE, NULL_FLAG_NULL = 0x00, 0x01

VARIABLE_TYPES = frozenset(("VARCHAR", "VARBINARY", "CLOB", "BLOB"))
TEXT_TYPES = frozenset(("CHAR", "VARCHAR", "CLOB"))


def fixed_type(col) -> str:
    """The layout type of a column's fixed part (variable types: see ``row_layout``)."""
    t = col.type
    if t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT"):
        return {"TINYINT": "s1", "SMALLINT": "s2", "INTEGER": "s4", "BIGINT": "s8"}[t]
    if t == "REAL" or (t == "FLOAT" and col.length == 4):
        return "f4"
    if t in ("DOUBLE", "FLOAT"):
        return "f8"
    if t == "DECIMAL":
        return f"b{(col.precision or 9) // 2 + 1}"     # p/2+1 bytes
    if t in ("CHAR", "BINARY"):
        return f"b{col.length}"
    if t in ("DATE", "TIME", "TIMESTAMP"):
        return {"DATE": "b4", "TIME": "b3", "TIMESTAMP": "b10"}[t]
    raise ValueError(f"db2luw cannot decode column type {t}")


def row_layout(columns, byte_order: str = "little") -> Layout:
    """The fixed section of a table's Formatted User Data Record: per column (``c<i>``, the
    column's name as vendor name) its fixed part, then a null byte (``c<i>_null``) when
    nullable; a variable-length column's fixed part is ``c<i>_ofs`` + ``c<i>_len``."""
    fields, pos = [], 0
    for i, col in enumerate(columns):
        if col.type in VARIABLE_TYPES:
            fields += [F(f"c{i}_ofs", pos, "u2", col.name), F(f"c{i}_len", pos + 2, "u2", col.name)]
            pos += 4
        else:
            f = F(f"c{i}", pos, fixed_type(col), col.name)
            fields.append(f)
            pos = f.end
        if col.nullable:
            fields.append(F(f"c{i}_null", pos, "u1", f"{col.name} null flag"))
            pos += 1
    return Layout("formatted_user_data", fields, size=pos, byte_order=byte_order)


# ----------------------------------------------------------------- record types and functions

# V7 Log Manager record types (a 2-byte short holding an ASCII letter) [FACT NOTES 1.1]
V7_TYPE_NAMES = {
    "A": "normal abort", "B": "backout free", "c": "MPP coordinator commit",
    "C": "compensation", "D": "tablespace rolled forward", "E": "local pending list",
    "F": "forget transaction", "g": "MPP log sync", "G": "load pending list",
    "H": "table load delete start", "i": "propagate only", "I": "heuristic abort",
    "J": "load start", "K": "load delete start compensation", "L": "lock description",
    "M": "normal commit", "N": "normal", "o": "backup start", "O": "backup end",
    "p": "tablespace rollforward to PIT start", "q": "tablespace rollforward to PIT end",
    "P": "table quiesce", "Q": "global pending list", "R": "redo", "s": "MPP subordinate commit",
    "S": "compensation required", "T": "partial abort", "U": "undo", "V": "migration begin",
    "W": "migration end", "X": "TM prepare", "Y": "heuristic commit", "z": "MPP prepare",
    "Z": "XA prepare", "a": "Datalink manager",
}
# v10 record types [CODE UR; others QM/TAP, unverified: names only, all skipped]
V10_TYPE_NAMES = {
    0x004E: "normal", 0x0043: "compensation", 0x0041: "normal_abort", 0x0084: "normal_commit",
    0x008A: "local_pending_list", 0x0087: "heuristic_commit", 0x0049: "heuristic_abort",
    0x0085: "mpp_subordinate_commit", 0x0086: "mpp_coordinator_commit",
    0x0069: "propagate_only", 0x0046: "subtransaction", 0x0052: "redo", 0x0055: "undo",
}

# DMS function id -> short name (vendor Table 96; v10 additions [FACT DM])
DMS_FUNCTIONS = {
    102: "add_columns", 104: "undo_add_columns", 106: "delete_record",
    110: "undo_insert_record", 111: "undo_delete_record", 112: "undo_update_record",
    113: "alter_column_length", 115: "undo_alter_column_length", 118: "insert_record",
    120: "update_record", 124: "alter_table_attribute", 128: "initialize_table",
    131: "undo_insert_record_to_empty_page", 161: "delete_record", 162: "insert_record",
    163: "update_record", 164: "delete_record_to_empty_page", 165: "insert_record_to_empty_page",
    166: "undo_delete_record_to_empty_page",
}
# DOM function id -> short name (vendor Table 97)
DOM_FUNCTIONS = {
    2: "create_index", 3: "drop_index", 4: "drop_table", 11: "truncate_table",
    35: "reorg_table", 101: "create_table", 130: "undo_create_table",
}

DMS_ADD_COLUMNS, DMS_UNDO_ADD_COLUMNS = 102, 104
DMS_UNDO_INSERT, DMS_UNDO_DELETE, DMS_UNDO_UPDATE = 110, 111, 112
DMS_ALTER_COLUMN, DMS_UNDO_ALTER_COLUMN = 113, 115
DMS_ALTER_ATTRIBUTE, DMS_INIT_TABLE = 124, 128
V7_INSERT, V7_DELETE, V7_UPDATE = 118, 106, 120
V10_DELETE, V10_INSERT, V10_UPDATE = 161, 162, 163
V10_DELETE_EMPTY, V10_INSERT_EMPTY, V10_UNDO_DELETE_EMPTY, V10_UNDO_INSERT_EMPTY = 164, 165, 166, 131
DOM_CREATE_INDEX, DOM_DROP_INDEX, DOM_DROP_TABLE, DOM_TRUNCATE = 2, 3, 4, 11
DOM_REORG, DOM_CREATE_TABLE, DOM_UNDO_CREATE_TABLE = 35, 101, 130


# ----------------------------------------------------------------- the two layouts of the stream

class Variant:
    """What differs between the Version 7 and the v10 stream (everything else is shared)."""

    def __init__(self, name: str, *, prefix: Layout, header: Layout, compensation: Layout,
                 types: dict, insert: int, delete: int, update: int, row: Layout,
                 undo_insert: Layout, alter_attribute: Layout, init_table: Layout,
                 commit: Layout, extra_rows: dict | None = None, extra_undo: dict | None = None,
                 undo_insert_ids: tuple = ()) -> None:
        self.name = name
        self.prefix = prefix
        self.prefix_size = prefix.size
        self.header = header
        self.compensation = compensation
        # header sizes: basic, compensation, propagatable compensation
        self.header_size = header.size
        self.prop_comp_size = compensation.size
        self.comp_size = compensation.offset(compensation.names[-1])
        self.types = types                    # role -> record type code
        self.NORMAL, self.COMPENSATION = types["normal"], types["compensation"]
        self.COMMIT, self.ABORT, self.PENDING_LIST = types["commit"], types["abort"], types["pending_list"]
        self.INSERT, self.DELETE, self.UPDATE = insert, delete, update
        # row functions -> (op, layout of the record's fixed part)
        self.row_functions = {insert: ("c", row), delete: ("d", row), update: ("u", row),
                              **(extra_rows or {})}
        self.row = row
        self.undo_insert = undo_insert
        self.undo_insert_ids = (DMS_UNDO_INSERT, *undo_insert_ids)
        self.alter_attribute = alter_attribute
        self.init_table = init_table
        self.commit = commit
        D, O = COMPONENT_DMS, COMPONENT_DOM
        # undo function -> the function of the change it undoes (same transaction)
        self.undoes = {
            (D, DMS_UNDO_INSERT): insert, (D, DMS_UNDO_DELETE): delete,
            (D, DMS_UNDO_UPDATE): update, (D, DMS_UNDO_ADD_COLUMNS): DMS_ADD_COLUMNS,
            (D, DMS_UNDO_ALTER_COLUMN): DMS_ALTER_COLUMN, (O, DOM_UNDO_CREATE_TABLE): DOM_CREATE_TABLE,
            **(extra_undo or {}),
        }
        # a compensation record whose body repeats a change function: what it reverses
        self.compensates = {
            (D, insert): delete, (D, delete): insert, (D, update): update,
            (D, DMS_ADD_COLUMNS): DMS_ADD_COLUMNS, (D, DMS_ALTER_COLUMN): DMS_ALTER_COLUMN,
            (O, DOM_CREATE_TABLE): DOM_CREATE_TABLE, (O, DOM_DROP_TABLE): DOM_DROP_TABLE,
            (O, DOM_CREATE_INDEX): DOM_CREATE_INDEX, (O, DOM_DROP_INDEX): DOM_DROP_INDEX,
            (O, DOM_TRUNCATE): DOM_TRUNCATE,
        }
        for f, (op, _) in (extra_rows or {}).items():   # empty-page variants
            self.compensates[(D, f)] = {"c": delete, "d": insert}[op]
        # functions whose records are control records (also when a compensation repeats them)
        self.control_functions = {(D, DMS_ALTER_ATTRIBUTE): DMS_FUNCTIONS[DMS_ALTER_ATTRIBUTE],
                                  (D, DMS_INIT_TABLE): DMS_FUNCTIONS[DMS_INIT_TABLE],
                                  (O, DOM_REORG): DOM_FUNCTIONS[DOM_REORG]}
        self.dms_functions = sorted({insert, delete, update, *(extra_rows or {}), DMS_ADD_COLUMNS,
                                     DMS_UNDO_ADD_COLUMNS, DMS_UNDO_INSERT, DMS_UNDO_DELETE,
                                     DMS_UNDO_UPDATE, DMS_ALTER_COLUMN, DMS_UNDO_ALTER_COLUMN,
                                     DMS_ALTER_ATTRIBUTE, DMS_INIT_TABLE, *undo_insert_ids,
                                     *(f for _, f in (extra_undo or {}))})

    def __repr__(self) -> str:
        return f"<db2luw layout {self.name}>"

    def header_size_of(self, rtype: int, flags: int) -> int:
        if rtype != self.COMPENSATION:
            return self.header_size
        return self.prop_comp_size if flags & FLAG_PROPAGATABLE else self.comp_size

    @lru_cache(maxsize=None)
    def layouts(self, byte_order: str) -> "Layouts":
        return Layouts(self, byte_order)


class Layouts:
    """A variant's layouts compiled for one source byte order (attribute per layout)."""

    def __init__(self, variant: Variant, byte_order: str) -> None:
        if byte_order not in ("little", "big"):
            raise ValueError(f"db2luw byte_order must be 'little' or 'big', got {byte_order!r}")
        self.variant = variant
        self.byte_order = byte_order
        o = byte_order
        self.prefix = variant.prefix.with_byte_order(o)
        self.header = variant.header.with_byte_order(o)
        self.compensation = variant.compensation.with_byte_order(o)
        self.dms = DMS_HEADER.with_byte_order(o)
        self.dom = DOM_HEADER.with_byte_order(o)
        self.row = variant.row.with_byte_order(o)
        self.rows = {f: lay.with_byte_order(o) for f, (_, lay) in variant.row_functions.items()}
        # functions whose body is a row block and a row image: changes and undo of changes
        self._row_of = {**self.rows, DMS_UNDO_DELETE: self.row, DMS_UNDO_UPDATE: self.row}
        if variant is V10:
            self._row_of[V10_UNDO_DELETE_EMPTY] = ROW_EMPTY_PAGE_V10.with_byte_order(o)
        self.undo_insert = variant.undo_insert.with_byte_order(o)
        self.add_columns = ADD_COLUMNS.with_byte_order(o)
        self.alter_column = ALTER_COLUMN.with_byte_order(o)
        self.alter_attribute = variant.alter_attribute.with_byte_order(o)
        self.init_table = variant.init_table.with_byte_order(o)
        self.table_description = TABLE_DESCRIPTION.with_byte_order(o)
        self.index = INDEX.with_byte_order(o)
        self.table_object = TABLE_OBJECT.with_byte_order(o)
        self.truncate = TRUNCATE.with_byte_order(o)
        self.reorg = REORG.with_byte_order(o)
        self.commit = variant.commit.with_byte_order(o)
        self.abort = ABORT_V10.with_byte_order(o)
        self.record_header = RECORD_HEADER.with_byte_order(o)
        self.fud_header = FUD_HEADER.with_byte_order(o)
        self.image_header = IMAGE_HEADER.with_byte_order(o)
        self.variable_ref = VARIABLE_REF.with_byte_order(o)

    def row_of(self, func: int) -> Layout:
        """The row block layout of a DMS function whose body carries a row image."""
        return self._row_of.get(func, self.row)


V7 = Variant(
    "v7", prefix=LSN_PREFIX, header=LM_HEADER, compensation=LM_HEADER_COMPENSATION,
    types={"normal": ord("N"), "compensation": ord("C"), "commit": ord("M"), "abort": ord("A"),
           "pending_list": ord("E")},
    insert=V7_INSERT, delete=V7_DELETE, update=V7_UPDATE, row=ROW_V7,
    undo_insert=UNDO_INSERT_V7, alter_attribute=ALTER_ATTRIBUTE_V7, init_table=INIT_TABLE_V7,
    commit=COMMIT_V7)

V10 = Variant(
    "v10", prefix=FILTER_DATA, header=LR_HEADER, compensation=LR_HEADER_COMPENSATION,
    types={"normal": 0x004E, "compensation": 0x0043, "commit": 0x0084, "abort": 0x0041,
           "pending_list": 0x008A},
    insert=V10_INSERT, delete=V10_DELETE, update=V10_UPDATE, row=ROW_V10,
    extra_rows={V10_INSERT_EMPTY: ("c", ROW_EMPTY_PAGE_V10), V10_DELETE_EMPTY: ("d", ROW_EMPTY_PAGE_V10)},
    extra_undo={(COMPONENT_DMS, V10_UNDO_DELETE_EMPTY): V10_DELETE_EMPTY,
                (COMPONENT_DMS, V10_UNDO_INSERT_EMPTY): V10_INSERT_EMPTY},
    undo_insert_ids=(V10_UNDO_INSERT_EMPTY,),
    undo_insert=UNDO_INSERT_V10, alter_attribute=ALTER_ATTRIBUTE_V10, init_table=INIT_TABLE_V10,
    commit=COMMIT_V10)

VARIANTS = {"v7": V7, "v10": V10}


def variant(name: str | None) -> Variant:
    got = VARIANTS.get(name or "v7")
    if got is None:
        raise ValueError(f"db2luw layout must be one of {', '.join(VARIANTS)}, got {name!r}")
    return got
