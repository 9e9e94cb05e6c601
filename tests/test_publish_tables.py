"""Typed per-table datasets (SPEC section 5): Spark types from the catalog, values from the
row images, compared with what the generator wrote (not with what the decoder read)."""

from __future__ import annotations

import datetime as _dt
import json
from decimal import Decimal

import pytest
from chispa import assert_df_equality

from tests import wap_nights as W

pytestmark = pytest.mark.spark

# catalog type -> Spark type of the typed columns (written out here, not taken from dblog.tables)
SPARK_TYPE = {"TINYINT": "smallint", "SMALLINT": "smallint", "INTEGER": "int", "BIGINT": "bigint",
              "REAL": "float", "DOUBLE": "double", "CHAR": "string", "VARCHAR": "string",
              "DATE": "date", "TIME": "string", "TIMESTAMP": "timestamp_ntz", "BINARY": "binary",
              "VARBINARY": "binary", "BLOB": "string", "CLOB": "string"}


def spark_type(col: dict) -> str:
    if col["type"] == "DECIMAL":
        return f"decimal({col['precision']},{col.get('scale', 0)})"
    if col["type"] == "FLOAT":
        return "float" if col.get("length") == 4 else "double"
    return SPARK_TYPE[col["type"]]


@pytest.fixture(scope="module")
def night(spark, tmp_path_factory):
    base = W.base_root(tmp_path_factory)
    assert base["rc"] == 0, base["out"]
    return base["root"]


def test_typed_tables_have_the_catalogs_types(spark, night):
    catalog = json.loads(W.CATALOG.read_text())
    tables = night / "published" / "tables" / W.SOURCE
    for t in catalog["tables"]:
        df = spark.read.parquet(str(tables / f"{t['schema']}.{t['name']}"))
        got = dict(df.dtypes)
        want = {"op": "string", "commit_seq": "bigint", "event_seq": "int", "commit_ts": "timestamp",
                "date": "date"}          # the partition column, as Spark's discovery types it
        for c in t["columns"]:
            want[f"before_{c['name']}"] = want[f"after_{c['name']}"] = spark_type(c)
        assert got == want, t["name"]


def test_typed_orders_equal_what_the_generator_wrote(spark, night):
    from pyspark.sql import functions as F

    rows, seq, last = [], 0, None
    for e in W.expected_changes(night, W.DATE1):            # commit order, then in-transaction order
        if (e["trx_id"], e["commit_position"]) != last:
            seq, ev, last = seq + 1, 0, (e["trx_id"], e["commit_position"])
        ev += 1
        if e["table_name"] != "ORDERS" or e["op"] == "ddl" or e["after"] is None:
            continue
        a = json.loads(e["after"])
        rows.append((e["op"], seq, ev, a["ORDER_ID"], a["CUSTOMER_ID"],
                     None if a["AMOUNT"] is None else Decimal(a["AMOUNT"]), a["DISCOUNT"], a["WEIGHT"],
                     a["STATUS"],
                     None if a["ORDER_DATE"] is None else _dt.date.fromisoformat(a["ORDER_DATE"]),
                     a["ORDER_TIME"],
                     None if a["UPDATED"] is None else _dt.datetime.fromisoformat(a["UPDATED"])))
    assert rows
    want = spark.createDataFrame(rows, "op STRING, commit_seq BIGINT, event_seq INT, after_ORDER_ID INT, "
                                       "after_CUSTOMER_ID BIGINT, after_AMOUNT DECIMAL(11,2), "
                                       "after_DISCOUNT FLOAT, after_WEIGHT DOUBLE, after_STATUS STRING, "
                                       "after_ORDER_DATE DATE, after_ORDER_TIME STRING, "
                                       "after_UPDATED TIMESTAMP_NTZ")
    got = spark.read.parquet(str(night / "published" / "tables" / W.SOURCE / "ERP.ORDERS")) \
        .filter((F.col("date") == W.DATE1) & F.col("op").isin("c", "u")).select(*want.columns)
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)
