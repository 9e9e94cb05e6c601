"""solidDB SYS_LOG: record ids, DDL codes and the CSV framing (formats/soliddb-sys_log.txt)."""

from __future__ import annotations

from ..codecs import s4be, s8be, u2be

HEADER = ("RECID", "RECNAME", "TRXID", "STMTTRXID", "RELID", "FLAGS", "LOGADDR", "DATA")

# RECID -> vendor RECNAME
EMPTY, INSERT, UPDATE, DELETE_FULL, UPDATE_BEFOREIMAGE, SQL, TRX_START, COMMIT, DDL = \
    0, 1, 3, 4, 5, 6, 7, 12, 13
RECNAMES = {
    EMPTY: "DBE_LOGREADER_LOG_REC_EMPTY",
    INSERT: "DBE_LOGREADER_LOG_REC_INSERT",
    UPDATE: "DBE_LOGREADER_LOG_REC_UPDATE",
    DELETE_FULL: "DBE_LOGREADER_LOG_REC_DELETE_FULL",
    UPDATE_BEFOREIMAGE: "DBE_LOGREADER_LOG_REC_UPDATE_BEFOREIMAGE",
    SQL: "DBE_LOGREADER_LOG_REC_SQL",
    TRX_START: "DBE_LOGREADER_LOG_REC_TRX_START",
    COMMIT: "DBE_LOGREADER_LOG_REC_COMMIT",
    DDL: "DBE_LOGREADER_LOG_REC_DDL",
}

# FLAGS bits
FLAG_DATA = 0x01
FLAG_SHUTDOWN = 0x02
FLAG_CAPTURE_OFF = 0x40

# DDL <logrecid> -> description
DDL_OPS = {
    45: "Create table", 17: "Drop table", 47: "Rename table", 22: "Alter table",
    73: "Truncate table", 16: "Create index", 18: "Drop index", 46: "Create view",
    20: "Drop view", 28: "Create sequence", 30: "Drop sequence", 27: "Create counter",
    29: "Drop counter",
}

LOGADDR_BYTES = 20
LOGADDR_HEX = 2 * LOGADDR_BYTES

# DATA column values
LEN = s4be            # <length>: 4-byte signed, MSB first
NULL_LEN = -1
BLOB_LEN = -2
INT4 = s4be           # TINYINT, SMALLINT, INTEGER
INT8 = s8be           # BIGINT, BLOB id
DATE_YEAR = u2be      # 11-byte DATE/TIME/TIMESTAMP: year u2, month, day, hour, minute, second u1, fraction u4 (ns)
DATETIME_LEN = 11
