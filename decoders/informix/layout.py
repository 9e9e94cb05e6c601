"""Informix ``onlog`` text: header columns, record types and what each means to us.

The record-type table is ``formats/informix-onlog-record-types.txt`` (IDS 10.0
Administrator's Reference, Table 3) as data: record type -> its additional columns, each
``(our name, kind, vendor label)``. Kinds: ``hex``, ``decimal``, ``ascii``, ``used/free``,
plus ``date`` (``MM/DD/YY``) and ``time`` (``HH:MM:SS``) for the BEGIN/COMMIT/ROLLBACK
columns the vendor table calls "decimal" (their printed form is in adref261.htm, see
``formats/NOTES.md`` section 2).
"""

from __future__ import annotations

import re

# ----------------------------------------------------------------- header columns
# A header line starts with these six column titles (any case, any white space); onlog may
# print more titles after them, e.g. ``subtype specific-info`` (Administrator's Reference,
# "Log Record Types for Smart Large Objects", the SBLOB figure), and repeats the header
# anywhere (every 18 records by default).
HEADER = ("addr", "len", "type", "xid", "id", "link")
N_HEADER = len(HEADER)
HEADER_LINE = "addr     len  type     xid      id link"

# ----------------------------------------------------------------- column kinds
HEX, DEC, ASCII, USED_FREE, DATE, TIME = "hex", "decimal", "ascii", "used/free", "date", "time"
KINDS = (HEX, DEC, ASCII, USED_FREE, DATE, TIME)
USED_FREE_VALUES = ("USED", "FREE")

RE_HEX = re.compile(r"[0-9a-fA-F]+")
RE_DEC = re.compile(r"-?[0-9]+")
RE_UDEC = re.compile(r"[0-9]+")
RE_DATE = re.compile(r"([0-9]{2})/([0-9]{2})/([0-9]{2})")
RE_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})")
MAX_ADDR = 0xFFFFFFFF          # a log position (page << 12 | offset) is 32 bits
# numbers wider than these are quarantined (bad_value), never converted: a tblspace id or
# rowid fits 64 bits, a decimal column 19 digits (and Python's int() refuses 4,300)
MAX_HEX_DIGITS = 16
MAX_DEC_DIGITS = 19

# two-digit years (SPEC section 3): 70-99 -> 19xx, 00-69 -> 20xx
YEAR_PIVOT = 70


def full_year(yy: int) -> int:
    return 1900 + yy if yy >= YEAR_PIVOT else 2000 + yy


# file name: ..._<uniqid>.txt (the logical log's unique id, decimal)
RE_UNIQID = re.compile(r"_([0-9]+)\.txt$")


def _cols(*pairs: tuple[str, str]) -> tuple[tuple[str, str, str], ...]:
    """(vendor label, kind) pairs -> (name, kind, vendor label) with a snake_case name."""
    out = []
    for label, kind in pairs:
        name = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
        out.append((name, kind, label))
    return tuple(out)


_TBL = ("tblspace ID", HEX)
_ROW = ("rowid", HEX)
_SLOT = ("slotlen", DEC)
_HOME = _cols(_TBL, _ROW, _SLOT)
_UPDATE = _cols(_TBL, _ROW, ("forward ptr rowid", HEX), ("old slotlen", DEC),
                ("new slotlen", DEC), ("no. of pieces", DEC))
_ITEM = _cols(_TBL, _ROW, ("logical page", DEC), ("key number", DEC), ("key length", DEC))
_LOGCHG = _cols(("log number", DEC), ("log size (pages)", DEC), ("pageno", HEX))
_STAMP = _cols(("date", DATE), ("time", TIME))

RECORD_TYPES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "ADDCHK": _cols(("chunk number", DEC), ("chunk name", ASCII)),
    "ADDDBS": _cols(("dbspace name", ASCII)),
    "ADDITEM": _ITEM,
    "ADDLOG": _LOGCHG,
    "ALTERDONE": _cols(_TBL, ("physical page number previous page", HEX),
                       ("logical page number", DEC), ("version of alter", DEC)),
    "BADIDX": _cols(_TBL),
    "BEGCOM": (),
    "BEGIN": _cols(("date", DATE), ("time", TIME), ("PID", DEC), ("user", ASCII)),
    "BFRMAP": _cols(_TBL, ("bpageno", HEX), ("status", USED_FREE), ("log ID", DEC),
                    ("prev page", HEX)),
    "BLDCL": _cols(_TBL, ("fextsize", DEC), ("nextsize", DEC), ("row size", DEC),
                   ("ncolumns", DEC), ("table name", ASCII)),
    "BMAPFULL": _cols(_TBL, ("bitmap page num", DEC)),
    "BMAP2TO4": _cols(_TBL, ("2-bit bitmap page number", DEC), ("flags", DEC)),
    "BTCPYBCK": _cols(_TBL, ("parent logical page", DEC), ("child logical page", DEC),
                      ("slot", DEC), ("rowoff", DEC), ("key number", DEC)),
    "BTMERGE": _cols(_TBL, ("parent logical page", DEC), ("left logical page", DEC),
                     ("right logical page", DEC), ("left slot", DEC), ("left rowoff", DEC),
                     ("right slot", DEC), ("right rowoff", DEC), ("key number", DEC)),
    "BTSHUFFL": _cols(_TBL, ("parent logical page", DEC), ("left logical page", DEC),
                      ("right logical page", DEC), ("left slot", DEC), ("left rowoff", DEC),
                      ("key number", DEC), ("flags", HEX)),
    "BTSPLIT": _cols(_TBL, _ROW, ("parent logical page", DEC), ("left logical page", DEC),
                     ("right logical page", DEC), ("infinity logical page", DEC),
                     ("rootleft logical page", DEC), ("midsplit", DEC), ("key number", DEC),
                     ("key length", DEC)),
    "CHALLOC": _cols(("pageno", HEX), ("size", HEX)),
    "CHCOMBINE": _cols(("pageno", HEX)),
    "CHFREE": _cols(("pageno", HEX), ("size", HEX)),
    "CHPHYLOG": _cols(("pageno", HEX), ("size in kilobytes", HEX), ("dbspace name", ASCII)),
    "CHSPLIT": _cols(("pageno", HEX)),
    "CINDEX": _cols(_TBL, ("low rowid", DEC), ("high rowid", DEC), ("index descriptor", ASCII)),
    "COARSELOCK": _cols(_TBL, ("old coarse-locking flag value", DEC),
                        ("new coarse-locking flag value", DEC)),
    "CKPOINT": _cols(("max users", DEC), ("number of active transactions", DEC)),
    "CLR": (),
    "CLUSIDX": _cols(_TBL, ("key number", DEC)),
    "COLREPAI": _cols(_TBL, ("no. of columns adjusted", DEC)),
    "COMMIT": _STAMP,
    "DELETE": _cols(_TBL, _ROW),
    "DELITEM": _ITEM,
    "DERASE": _cols(_TBL, ("lockid", HEX)),
    "DINDEX": _cols(_TBL, ("key number", DEC)),
    "DPT": _cols(("number of dirty pages", HEX)),
    "DRPCHK": _cols(("chunk number", DEC), ("chunk name", ASCII)),
    "DRPDBS": _cols(("dbspace name", ASCII)),
    "DRPLOG": _LOGCHG,
    "ERASE": _cols(_TBL),
    "HDELETE": _HOME,
    "HINSERT": _HOME,
    "HUPAFT": _HOME,
    "HUPBEF": _HOME,
    "HUPDATE": _UPDATE,
    "IDXFLAGS": _cols(_TBL, ("key number", HEX)),
    "INSERT": _cols(_TBL, _ROW),
    "LCKLVL": _cols(_TBL, ("old lockmode", HEX), ("new lockmode", HEX)),
    "LG_CDINDEX": _cols(("database name", ASCII), ("owner", ASCII), ("table name", ASCII),
                        ("index name", ASCII)),
    "LG_DERASE": _cols(("tblspace number", HEX), ("table lock number", DEC)),
    "LG_ENDTRUNCATE": _cols(_TBL),
    "LG_PTRUNCATE": _cols(_TBL),
    "LG_TRUNCATE": _cols(_TBL),
    "MVIDXND": _cols(_TBL, ("old page number", DEC), ("new page number", DEC),
                     ("parent page number", DEC), ("parent slot number", DEC),
                     ("parent slot offset", DEC), ("key number", DEC)),
    "PBDELETE": _cols(("bpageno", HEX), ("status", USED_FREE), ("unique ID", DEC)),
    "PBINSERT": _cols(("bpageno", HEX), _TBL, _ROW, _SLOT, ("pbrowid", HEX)),
    "PDINDEX": _cols(_TBL),
    "PGALTER": _cols(_TBL, ("physical page number", HEX)),
    "PGMODE": _cols(_TBL, ("logical page number", DEC), ("old mode", HEX), ("new mode", HEX)),
    "PERASE": _cols(_TBL),
    "PNLOCKID": _cols(_TBL, ("old lock ID", HEX), ("new lock ID", HEX)),
    "PNSIZES": _cols(_TBL, ("fextsize", DEC), ("nextsize", DEC)),
    "PTADESC": _cols(_TBL, ("physical page number of previous page", HEX),
                     ("logical page number", DEC), ("number of columns added", DEC)),
    "PTALTER": _cols(_TBL, ("physical page number previous page", HEX),
                     ("logical page number", DEC), ("alter desc page number", DEC),
                     ("num columns added", DEC), ("version of alter", DEC),
                     ("added rowsize", DEC)),
    "PTCOLUMN": _cols(_TBL, ("number of columns", DEC)),
    "PTEXTEND": _cols(_TBL, ("last logical page", DEC), ("first physical page", HEX)),
    "PTRENAME": _cols(_TBL, ("old table name", ASCII), ("new table name", ASCII)),
    "RDELETE": _HOME,
    "REVERT": _cols(("type of reversion event", DEC), ("arg1", DEC), ("arg2", DEC),
                    ("arg3", DEC)),
    "RINSERT": _HOME,
    "ROLLBACK": _STAMP,
    "RSVEXTEN": _cols(("no. of pages", DEC), ("physical page number of extent", HEX)),
    "RUPAFT": _HOME,
    "RUPBEF": _HOME,
    "RUPDATE": _UPDATE,
    "SYNC": (),
    "UNDO": _cols(("count", DEC)),
    "UNDOBLDC": _cols(("tblspace number", HEX)),
    "UNIQID": _cols(_TBL, ("unique ID", DEC)),
    "UPDAFT": _cols(_TBL, _ROW),
    "UPDBEF": _cols(_TBL, _ROW),
    "XAPREPARE": (),
    # not in Table 3; OnLine 5 manual p.9-44 (formats/NOTES.md section 2): two-phase commit
    "BEGPREP": _cols(("flags", DEC), ("number of participants", DEC)),
    "PREPARE": _cols(("coordinator DBSERVERNAME", ASCII)),
    "ENDTRANS": (),
    # Record types IBM documents for onlog beyond formats/informix-onlog-record-types.txt
    # (DOCUMENTED below says where). Columns whose printed form the documents do not show
    # (an "array", a subtype's specific information) are not required: onlog's further
    # columns are kept, not checked.
    "ALLOCGENPG": _cols(("tblspace ID", DEC), ("rowid", DEC), ("slot flags and length", DEC),
                        ("page version if delete", DEC), ("flags, vimage record", DEC),
                        ("rowid for previous", DEC), ("data", ASCII)),
    "ALTSPCOLSNEW": _cols(("number of columns", DEC)),
    "ALTSPCOLSOLD": _cols(("number of columns", DEC)),
    "BEGWORK": (),
    "BSPADD": (),
    "SBLOB": _cols(("subtype", ASCII)),
}

# where each record type beyond the IDS 10.0 table comes from (docs/VENDOR_EXAMPLES.md)
_ADREF = "IBM Informix Administrator's Reference"
_TABLE = (f'{_ADREF} 12.10/14.10, "Logical-log record types and additional columns", Table 1 '
          "(ids_adr_0358; IDS 10.0 Table 8, adref260.htm)")
DOCUMENTED: dict[str, str] = {
    "BEGPREP": "IBM Informix OnLine 5 Administrator's Guide p.9-44; " + _TABLE,
    "PREPARE": "IBM Informix OnLine 5 Administrator's Guide p.9-44",
    "ENDTRANS": "IBM Informix OnLine 5 Administrator's Guide p.9-44",
    "ALLOCGENPG": _TABLE, "ALTSPCOLSNEW": _TABLE, "ALTSPCOLSOLD": _TABLE, "BEGWORK": _TABLE,
    "BSPADD": _TABLE,
    "SBLOB": (f'{_ADREF} 14.10, "Log Record Types for Smart Large Objects" (ids_adr_0359; '
              "IDS 10.0 Table 9 and Figure 24, adref261.htm)"),
}
# SBLOB subtypes listed in "Record Subtypes for Smart Large Objects" (as far as the copies
# we could read go); a subtype is printed as an upper-case word and is not checked against
# this list (the table in our copies is cut short).
SBLOB_SUBTYPES = ("CHALLOC", "CHCOMBINE", "CHFREE", "CHSPLIT", "CREATE", "DELETE", "EXTEND",
                  "HDRUPD", "PDELETE", "PTRUNC", "REFCOUNT")

# a last ASCII column takes the rest of the line (a name may hold blanks); not so for a
# record type whose further columns the documents do not show (SBLOB: subtype, then the
# subtype's specific information)
REST_OF_LINE = frozenset(t for t, cols in RECORD_TYPES.items()
                         if cols and cols[-1][1] == ASCII and t != "SBLOB")

# ----------------------------------------------------------------- what each type means
BEGIN, COMMIT, ROLLBACK, CLR = "BEGIN", "COMMIT", "ROLLBACK", "CLR"

# home-row changes (SPEC: HINSERT c, HDELETE d, HUPDATE or HUPBEF/HUPAFT u)
HOME_OPS = {"HINSERT": "c", "HDELETE": "d", "HUPDATE": "u", "HUPBEF": "u", "HUPAFT": "u"}
UPDATE_BEFORE, UPDATE_AFTER = "HUPBEF", "HUPAFT"
# remainder-page records: part of the home-row change before them
REMAINDER = frozenset({"RINSERT", "RDELETE", "RUPBEF", "RUPAFT", "RUPDATE"})
# table-level changes: op and the description written to ``ddl``
DDL_OPS = {"BLDCL": "ddl", "PTRENAME": "ddl", "CINDEX": "ddl", "DINDEX": "ddl", "ERASE": "ddl",
           "LG_PTRUNCATE": "t"}
# never part of a user transaction: checkpoints, chunk, dbspace and log management
SYSTEM = frozenset({"ADDCHK", "ADDDBS", "ADDLOG", "CHPHYLOG", "CKPOINT", "DPT", "DRPCHK",
                    "DRPDBS", "DRPLOG", "REVERT", "RSVEXTEN", "SYNC", "UNDO"})

# the role of a record type in the transaction rules (``resolve._Machine``'s dispatch), as
# small integers for the column paths (``chains``, ``decoder``, ``resolve_columns``); no
# type: unknown. ``native``'s compiled loops compare roles with these numbers written out
# (a compiled and cached loop would not see a changed global): keep them, or change both
# (tests/test_informix_native.py checks that they agree)
R_OTHER, R_BEGIN, R_COMMIT, R_ROLLBACK, R_CLR, R_HOME, R_REMAINDER, R_DDL, R_SYSTEM = range(9)
R_UNKNOWN = 9


def role(rtype: str | None) -> int:
    """The role (``R_*``) of a record type."""
    if rtype is None:
        return R_UNKNOWN
    if rtype in SYSTEM:
        return R_SYSTEM
    if rtype == BEGIN:
        return R_BEGIN
    if rtype == COMMIT:
        return R_COMMIT
    if rtype == ROLLBACK:
        return R_ROLLBACK
    if rtype == CLR:
        return R_CLR
    if rtype in HOME_OPS:
        return R_HOME
    if rtype in REMAINDER:
        return R_REMAINDER
    if rtype in DDL_OPS:
        return R_DDL
    return R_OTHER


TBLSPACE = "tblspace_id"
ROWID = "rowid"


def ddl_text(rtype: str, v: dict) -> str | None:
    """The ``ddl`` description of a table-level record (None for truncate)."""
    if rtype == "BLDCL":
        return (f"BLDCL create table {v['table_name']} (tblspace {v[TBLSPACE]:x}, "
                f"{v['ncolumns']} columns, row size {v['row_size']})")
    if rtype == "PTRENAME":
        return f"PTRENAME rename table {v['old_table_name']} to {v['new_table_name']}"
    if rtype == "CINDEX":
        return f"CINDEX create index {v['index_descriptor']}"
    if rtype == "DINDEX":
        return f"DINDEX drop index key {v['key_number']}"
    if rtype == "ERASE":
        return f"ERASE drop tblspace {v[TBLSPACE]:x}"
    return None


def printed_table_name(rtype: str, v: dict) -> str | None:
    """The table name a DDL record prints (for tblspaces the catalog does not know)."""
    if rtype == "BLDCL":
        return v["table_name"]
    if rtype == "PTRENAME":
        return v["new_table_name"]
    return None


def split_table_name(name: str) -> tuple[str | None, str]:
    """``[database:]owner.table`` -> (owner, table); a bare name has no schema."""
    name = name.split(":", 1)[-1]
    if "." in name:
        owner, table = name.rsplit(".", 1)
        return owner or None, table
    return None, name
