"""Oracle: the Db2 LUW Version 7 layout tables as they were before the one layout language
(decoders/db2luw/layout.py at commit a37ebf5), unchanged; used by ``tests/oracle/db2luw.py``
and bench/plain.py (baseline (a)). Do not change.

The original docstring:

Db2 LUW Version 7 log records as data (SPEC section 3 "db2luw", formats/db2luw-dms-log-records.txt,
formats/NOTES.md section 1).

Layouts are tables of ``(name, code)`` in the Kaitai habit (``len_*``, ``ofs_*``, ``num_*``,
``reserved*``); ``Db2Structs(little_endian=...)`` compiles every table once into a
``struct.Struct`` for one source byte order (the way pyelftools builds ``ELFStructs``).
LSNs and TIDs are byte strings (``6s``): they are compared as big-endian unsigned whatever
the source byte order, so they are never swapped.

Offsets of DMS/DOM bodies are from the end of the Log Manager header (20, 26 or 32 bytes).
"""

from __future__ import annotations

import struct
from functools import lru_cache

# ----------------------------------------------------------------- framing

LSN_LEN = 6                      # SQLU_LSN, before every record in the read buffer
TID_LEN = 6                      # SQLU_TID
LSN_HEX = 2 * LSN_LEN            # positions: 12 upper-case hex digits
ZERO_LSN = bytes(LSN_LEN)

# Log Manager header sizes
LRH_LEN = 20                     # normal records
LRH_COMP_LEN = 26                # compensation: + LSN of the record before the compensated one
LRH_PROP_COMP_LEN = 32           # propagatable compensation: + LSN of the compensated record

# Log Manager record types (2-byte short holding an ASCII letter), V7 [FACT NOTES 1.1]
NORMAL, COMPENSATION, COMMIT, ABORT, PENDING_LIST = (ord(c) for c in "NCMAE")
RECORD_TYPE_NAMES = {
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

# general flags
FLAG_REDO_ALWAYS = 0x0001
FLAG_PROPAGATABLE = 0x0002

# ----------------------------------------------------------------- components and functions

COMPONENT_DMS = 1
COMPONENT_DOM = 4

# DMS function id -> short name (vendor Table 96)
DMS_FUNCTIONS = {
    102: "add_columns", 104: "undo_add_columns", 106: "delete_record",
    110: "undo_insert_record", 111: "undo_delete_record", 112: "undo_update_record",
    113: "alter_column_length", 115: "undo_alter_column_length", 118: "insert_record",
    120: "update_record", 124: "alter_table_attribute", 128: "initialize_table",
}
# DOM function id -> short name (vendor Table 97)
DOM_FUNCTIONS = {
    2: "create_index", 3: "drop_index", 4: "drop_table", 11: "truncate_table",
    35: "reorg_table", 101: "create_table", 130: "undo_create_table",
}

DMS_INSERT, DMS_DELETE, DMS_UPDATE = 118, 106, 120
DMS_ADD_COLUMNS, DMS_ALTER_COLUMN = 102, 113
DMS_UNDO_INSERT, DMS_UNDO_DELETE, DMS_UNDO_UPDATE = 110, 111, 112
DMS_UNDO_ADD_COLUMNS, DMS_UNDO_ALTER_COLUMN = 104, 115
DMS_ALTER_ATTRIBUTE, DMS_INIT_TABLE = 124, 128
DOM_CREATE_INDEX, DOM_DROP_INDEX, DOM_DROP_TABLE, DOM_TRUNCATE = 2, 3, 4, 11
DOM_REORG, DOM_CREATE_TABLE, DOM_UNDO_CREATE_TABLE = 35, 101, 130

# undo function -> the function of the change it undoes (same transaction)
UNDOES = {
    (COMPONENT_DMS, DMS_UNDO_INSERT): DMS_INSERT,
    (COMPONENT_DMS, DMS_UNDO_DELETE): DMS_DELETE,
    (COMPONENT_DMS, DMS_UNDO_UPDATE): DMS_UPDATE,
    (COMPONENT_DMS, DMS_UNDO_ADD_COLUMNS): DMS_ADD_COLUMNS,
    (COMPONENT_DMS, DMS_UNDO_ALTER_COLUMN): DMS_ALTER_COLUMN,
    (COMPONENT_DOM, DOM_UNDO_CREATE_TABLE): DOM_CREATE_TABLE,
}
# a compensation (C) record whose body repeats a change function: what it reverses
COMPENSATES = {
    (COMPONENT_DMS, DMS_INSERT): DMS_DELETE,       # re-insert = rollback delete
    (COMPONENT_DMS, DMS_DELETE): DMS_INSERT,       # delete    = rollback insert
    (COMPONENT_DMS, DMS_UPDATE): DMS_UPDATE,
    (COMPONENT_DMS, DMS_ADD_COLUMNS): DMS_ADD_COLUMNS,
    (COMPONENT_DMS, DMS_ALTER_COLUMN): DMS_ALTER_COLUMN,
    (COMPONENT_DOM, DOM_CREATE_TABLE): DOM_CREATE_TABLE,
    (COMPONENT_DOM, DOM_DROP_TABLE): DOM_DROP_TABLE,
    (COMPONENT_DOM, DOM_CREATE_INDEX): DOM_CREATE_INDEX,
    (COMPONENT_DOM, DOM_DROP_INDEX): DOM_DROP_INDEX,
    (COMPONENT_DOM, DOM_TRUNCATE): DOM_TRUNCATE,
}

# ----------------------------------------------------------------- layouts as data

LM_HEADER = (                    # vendor Table 95, offsets 0..19
    ("len_record", "u4"),        # length of the entire log record, header included
    ("record_type", "u2"),       # ASCII letter
    ("flags", "u2"),
    ("lsn_prev", "lsn"),         # previous record of this transaction (0 for the first)
    ("tid", "tid"),
)
LM_COMPENSATION = (("lsn_undo_next", "lsn"),)   # @20: LSN of the record before the compensated one
LM_PROPAGATABLE = (("lsn_compensated", "lsn"),)  # @26: LSN of the compensated record

DMS_HEADER = (                   # Table 96, 6 bytes
    ("component_id", "u1"), ("function_id", "u1"), ("tablespace_id", "u2"), ("table_id", "u2"),
)
DOM_HEADER = (                   # Table 97, 12 bytes
    ("component_id", "u1"), ("function_id", "u1"), ("obj_tablespace_id", "u2"), ("obj_id", "u2"),
    ("tablespace_id", "u2"), ("table_id", "u2"), ("object_type", "u1"), ("flags", "u1"),
)
ROW_BLOCK = (                    # after the DMS header: insert/delete (Tables 106), update halves (109),
    ("reserved", "pad2"),        # rollback delete/update; the record header and data follow
    ("rid", "s4"),
    ("len_record", "u2"),        # vendor: "Record length" / "New/Old record length" (labels not trusted)
    ("free_space", "u2"),
    ("ofs_record", "u2"),
)
UNDO_INSERT = (                  # Table 100, after the DMS header (16 bytes in all)
    ("reserved", "pad2"), ("rid", "s4"), ("len_record", "u2"), ("free_space", "u2"),
)
ADD_COLUMNS = (                  # Table 105 (also 104 undo), after the DMS header; arrays follow
    ("reserved", "pad2"), ("num_old_columns", "s4"), ("num_new_columns", "s4"),
)
OLD_COLUMN_ELEMENT = 8           # bytes per old column descriptor
NEW_COLUMN_ELEMENT = 12          # bytes per new column descriptor
ALTER_COLUMN = (                 # 113/115 -- not in the vendor document; the project's layout [GUESS]:
    ("reserved", "pad2"),        # column number (0-based, like SYSCAT.COLUMNS.COLNO), old/new length
    ("colno", "u2"), ("reserved2", "pad2"), ("old_length", "u4"), ("new_length", "u4"),
)
ALTER_ATTRIBUTE = (              # Table 104, after the DMS header
    ("reserved", "pad2"), ("alter_mask", "s4"), ("alter_values", "s4"),
)
INIT_TABLE = (                   # Table 98, after the DMS header, up to the table description record
    ("lsn_file_create", "lsn"), ("tdir_record_type", "u1"), ("reserved", "pad1"),
    ("index_flag", "u2"), ("index_root_page", "u4"), ("tdesc_recid", "s4"),
    ("reserved2", "pad56"), ("flags", "u4"), ("len_table_description", "u4"),
)
INDEX = (                        # Table 102 (DOM 2/3), after the DOM header
    ("reserved", "pad2"), ("index_token", "u2"), ("index_root_page", "u4"),
)
TABLE_OBJECT = (("internal", "56s"),)            # Table 103 (DOM 101/4/130), after the DOM header
TRUNCATE = ()                                     # Table 99: internal, variable
REORG = (                        # Table 101, after the DOM header
    ("internal", "252s"), ("index_token", "u2"), ("temp_tablespace_id", "u2"),
)
RECORD_HEADER = (                # before each row image [NOTES 1.5]
    ("record_type", "u1"),       # 0x00 normal (0x10 treated the same); others: internal control
    ("reserved", "pad1"),
    ("len_record", "u2"),        # this header included
)
FUD_HEADER = (                   # Formatted User Data Record, Table 108
    ("fud_type", "u1"),          # 1 = formatted user data; other values: internal control records
    ("reserved", "pad1"),
    ("len_fixed", "u2"),         # length of the fixed section
)
VARIABLE_REF = (("ofs_data", "u2"), ("len_data", "u2"))  # from the start of the fixed section
COMMIT_BODY = (("time_committed", "u4"),)              # UTC seconds; the authid is the rest

USER_RECORD_TYPES = frozenset((0x00, 0x10))
FORMATTED_USER_DATA = 1
NULL_FLAG_VALUE, NULL_FLAG_NULL = 0x00, 0x01

# column type -> (struct code of the fixed part, size) ; variable types are two u2
_SCALAR_CODES = {"u1": "B", "s1": "b", "u2": "H", "s2": "h", "u4": "I", "s4": "i",
                 "u8": "Q", "s8": "q", "f4": "f", "f8": "d", "lsn": f"{LSN_LEN}s",
                 "tid": f"{TID_LEN}s"}


def _code(code: str) -> str:
    if code in _SCALAR_CODES:
        return _SCALAR_CODES[code]
    if code.startswith("pad"):
        return f"{int(code[3:])}x"
    if code.endswith("s"):
        return code
    raise ValueError(f"unknown layout code {code!r}")


class Layout:
    """One layout compiled for one byte order: ``unpack_from`` gives the non-padding fields
    in table order, ``pack`` takes them in the same order (padding is written as zeros)."""

    __slots__ = ("name", "names", "struct", "size", "unpack_from", "pack")

    def __init__(self, name: str, fields: tuple, prefix: str) -> None:
        self.name = name
        self.names = tuple(n for n, c in fields if not c.startswith("pad"))
        self.struct = struct.Struct(prefix + "".join(_code(c) for _, c in fields))
        self.size = self.struct.size
        self.unpack_from = self.struct.unpack_from
        self.pack = self.struct.pack


LAYOUTS = {
    "lm_header": LM_HEADER, "lm_compensation": LM_COMPENSATION,
    "lm_propagatable": LM_PROPAGATABLE, "dms_header": DMS_HEADER, "dom_header": DOM_HEADER,
    "row_block": ROW_BLOCK, "undo_insert": UNDO_INSERT, "add_columns": ADD_COLUMNS,
    "alter_column": ALTER_COLUMN, "alter_attribute": ALTER_ATTRIBUTE, "init_table": INIT_TABLE,
    "index": INDEX, "table_object": TABLE_OBJECT, "truncate": TRUNCATE, "reorg": REORG,
    "record_header": RECORD_HEADER, "fud_header": FUD_HEADER, "variable_ref": VARIABLE_REF,
    "commit": COMMIT_BODY,
}


class Db2Structs:
    """Every layout compiled for one source byte order (``Db2Structs(little_endian=True)``)."""

    def __init__(self, little_endian: bool = True) -> None:
        self.little_endian = little_endian
        self.prefix = "<" if little_endian else ">"
        for name, fields in LAYOUTS.items():
            setattr(self, name, Layout(name, fields, self.prefix))
        self.u2 = struct.Struct(self.prefix + "H")
        self.u4 = struct.Struct(self.prefix + "I")

    # the fixed part of each column type in the Formatted User Data Record
    def column_code(self, col) -> tuple[str, int]:
        """(struct code, number of struct values) of a column's fixed part, null flag excluded."""
        t = col.type
        if t in ("VARCHAR", "VARBINARY", "CLOB", "BLOB"):
            return "HH", 2
        return FIXED_TYPE_CODES[t](col), 1


def _decimal_code(col) -> str:
    return f"{(col.precision or 9) // 2 + 1}s"       # p/2+1 bytes


FIXED_TYPE_CODES = {
    "TINYINT": lambda c: "b", "SMALLINT": lambda c: "h", "INTEGER": lambda c: "i",
    "BIGINT": lambda c: "q", "REAL": lambda c: "f",
    "FLOAT": lambda c: "f" if c.length == 4 else "d", "DOUBLE": lambda c: "d",
    "DECIMAL": _decimal_code, "CHAR": lambda c: f"{c.length}s", "BINARY": lambda c: f"{c.length}s",
    "DATE": lambda c: "4s", "TIME": lambda c: "3s", "TIMESTAMP": lambda c: "10s",
}


@lru_cache(maxsize=None)
def structs(byte_order: str) -> Db2Structs:
    if byte_order not in ("little", "big"):
        raise ValueError(f"db2luw byte_order must be 'little' or 'big', got {byte_order!r}")
    return Db2Structs(little_endian=byte_order == "little")

# functions whose records are control records (also when a compensation record repeats them)
CONTROL_FUNCTIONS = {
    (COMPONENT_DMS, DMS_ALTER_ATTRIBUTE): DMS_FUNCTIONS[DMS_ALTER_ATTRIBUTE],
    (COMPONENT_DMS, DMS_INIT_TABLE): DMS_FUNCTIONS[DMS_INIT_TABLE],
    (COMPONENT_DOM, DOM_REORG): DOM_FUNCTIONS[DOM_REORG],
}
