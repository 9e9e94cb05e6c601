"""The pieces of the mirror stage on small hand-made inputs: canonical JSON of typed rows
(against the project's RowRenderer), keys of row images, and the SPEC section 5 rules of
``apply_night`` (moved keys, delete then re-insert, truncates naming keys, missing bases)."""

from __future__ import annotations

import json
import random

import pytest

from decoders.catalog import Column, Table
from decoders.codecs import RowRenderer
from decoders.synth import default_value

pytestmark = pytest.mark.spark

COLS = (Column("ID", "INTEGER", False), Column("K2", "CHAR", True, length=3),
        Column("AMT", "DECIMAL", True, precision=11, scale=2), Column("R", "REAL"),
        Column("D", "DOUBLE"), Column("S", "VARCHAR", length=30), Column("DT", "DATE"),
        Column("TM", "TIME"), Column("TS", "TIMESTAMP"), Column("B", "VARBINARY", length=8),
        Column("BL", "BLOB"), Column("SI", "SMALLINT"), Column("BI", "BIGINT"))
TABLE = Table("9", "S", "T", COLS, key=("ID", "K2"))


def _floats():
    # not the doubles whose shortest text Java 17 misses (4.9E-324 for 5e-324,
    # 1.15292150460684698E18 for 2**60; README "Mirrors and net changes")
    return [0.0, -0.0, 1.0, 100.0, 1e-4, 1e-5, 1.5e-7, 123456789.0, 1e16, 1.5e16, 2.0 ** 40,
            -427842500.0, 0.1, 1 / 3, 1.7976931348623157e308, float("nan"), float("inf")]


def test_typed_rows_render_like_the_row_renderer(spark):
    """Images typed by the one typed conversion of ``published/tables`` and the mirror
    (``dblog.tables``: field texts, then Arrow casts), rendered back in Spark by
    ``render_rows``, give exactly the text RowRenderer gave for the same values."""
    import pyarrow as pa

    from decoders.codecs import Float4
    from dblog.mirror import render_rows
    from dblog.sparkio import local_frame
    from dblog.tables import arrow_type, cast_texts, image_fields, spark_type

    rng = random.Random(3)
    rows = [[default_value(c, rng) for c in COLS] for _ in range(300)]
    for i, f in enumerate(_floats()):
        rows[i][4] = f
        # (a REAL -0.0 is typed as 0.0 by the typed tables' cast: not a rendering question)
        rows[i + 20][3] = Float4(f) if (abs(f) < 3e38 or f != f) and str(f) != "-0.0" else None
    rows[40][5] = 'q"\\\n\t\x01\x0b\x1f é/'
    rows[41][5] = ""
    renderer = RowRenderer(COLS)
    texts = [renderer(r) for r in rows]
    assert sum('"BL": {"blob_id": ' in t for t in texts) > 100     # BLOB placeholders: objects
    fields = image_fields(texts, [c.name for c in COLS])
    typed = pa.Table.from_arrays([cast_texts(v, arrow_type(spark_type(c))) for v, c in zip(fields, COLS)],
                                 names=[c.name for c in COLS])
    df = spark.createDataFrame(typed)
    got = [r["row"] for r in render_rows(df, list(COLS)).collect()]
    bad = [(g, t) for g, t in zip(got, texts) if g != t]
    assert not bad, bad[:3]


def test_image_fields_keep_nested_values_as_written():
    """A field holding an object (a BLOB placeholder) is its compact JSON text with numbers
    as written, as Spark's from_json reads it into a string; scalars are their text."""
    from dblog.tables import image_fields

    texts = ['{"A": {"blob_id": 869417065180, "x": [1.50, "2", null, true]}, "B": 1e3, "C": "s"}',
             '{"A": null}', None, "[1]"]
    assert image_fields(texts, ["A", "B", "C"]) == [
        ['{"blob_id":869417065180,"x":[1.50,"2",null,true]}', None, None, None],
        ["1e3", None, None, None], ["s", None, None, None]]


def test_field_texts_equal_image_fields_image_by_image(monkeypatch):
    """``field_texts`` (the typed tables' split of the images by column: one RE2 match,
    numpy cuts) gives exactly ``image_fields``' texts (``json`` image by image): seeded
    images of every type rendered by RowRenderer (escapes, BLOB references, NaN, long
    digits), and the same images broken or changed (raw control characters, a comma and a
    field name inside a string, backslash runs before quotes, columns missing, reordered
    or repeated, other spacing, nested values, not an object, not JSON, null); in one
    chunk, chunked, sliced, and in groups of chunks. The canonical images take the fast
    path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dblog import tables
    from dblog.tables import field_texts, image_fields, image_pattern

    rng = random.Random(20261130)
    names = [c.name for c in COLS]
    renderer = RowRenderer(COLS)
    texts = []
    for _ in range(600):
        row = [rng.choice([default_value(c, rng), None]) for c in COLS]
        if rng.random() < 0.3:
            row[5] = rng.choice(['a, "K2": 5', 'q"\\', "\\", "\\\\", '\\"', "é\u2028€", "\x01",
                                 "tab\t", "}", "{", ",", '", "S": "x'])
        texts.append(renderer(row))
    canonical = len(texts)
    for t in texts[:200]:
        texts += [t.replace(", ", ",", 1), t.replace('"ID": ', '"ID":  ', 1), t[:-1],
                  t.replace('"S": null', '"S": "\x02"'), t.replace('"K2"', '"X2"', 1),
                  "{" + t[t.index(", ") + 2:], t[:-1] + ', "ID": 7}', t.replace("null", "[1, {}]", 1),
                  t.replace('"ID": ', '"ID": -0', 1), t.replace('"ID": ', '"ID": 01', 1)]
    texts += [None, "", "[]", "null", "5", '"s"', "{}", '{"ID": NaN}', '{"ID": Infinity, "ID": 2}',
              '{"ID": 1.5e+300}', '{"ID": 123456789012345678901234567890}']
    rng.shuffle(texts)
    want = image_fields(texts, names)
    arr = pa.array(texts, pa.string())
    for images in (arr, pa.chunked_array([arr[:700], arr[700:]]), pa.array([None] * 3 + texts)[3:]):
        got = [a.to_pylist() for a in field_texts(images, names)]
        assert got == want
    # a column bigger than a group is split a group of chunks at a time
    monkeypatch.setattr(tables, "FIELD_TEXTS_GROUP_BYTES", arr.nbytes // 5)
    chunks = pa.chunked_array([arr[i:i + 100] for i in range(0, len(arr), 100)])
    assert [a.to_pylist() for a in field_texts(chunks, names)] == want
    fast = pc.match_substring_regex(pa.array([t for t in texts if t]), image_pattern(names))
    assert pc.sum(fast.cast(pa.int64())).as_py() >= canonical * 0.9
    assert field_texts(pa.array([None, None], pa.string()), ["A"])[0].to_pylist() == [None, None]
    assert field_texts(pa.array(['{"A": 1}']), []) == []


def test_keys_of_row_images(spark):
    from dblog.mirror import key_meta, key_of
    from pyspark.sql import functions as F

    meta = key_meta(spark, [{"source": "s", "table_id": "9", "schema_name": "S", "table_name": "T",
                             "key": ["ID", "K2"], "columns": list(COLS)}])
    images = ['{"ID": 5, "K2": "a\\"b", "AMT": "1.00"}', '{"ID": -7, "K2": null}', None]
    got = [r[1] for r in sorted(
        spark.createDataFrame([("s", "9", n, i) for n, i in enumerate(images)],
                              "source STRING, table_id STRING, n INT, img STRING")
        .join(meta, ["source", "table_id"]).select("n", key_of(F.col("img"))).collect())]
    assert got == ['{"ID": 5, "K2": "a\\"b"}', '{"ID": -7, "K2": null}', None]



def test_keys_from_one_parse_equal_key_of(spark):
    """``with_keys`` (one ``from_json`` of the key columns per image, one CASE per key layout)
    gives exactly ``key_of``'s text: numbers, floats, DECIMAL strings, strings that need
    escaping (a newline at the end, quotes, control characters, non-ASCII), BLOB references
    and hex, nulls, absent fields, key names differing only by case across tables."""
    from dblog.mirror import key_meta, key_of, key_plan, key_sigs, with_keys
    from pyspark.sql import functions as F

    tables = [("1", ("ID", "K2"), (Column("ID", "INTEGER"), Column("K2", "VARCHAR", length=9))),
              ("2", ("AMT",), (Column("AMT", "DECIMAL", precision=11, scale=2),)),
              ("3", ("R", "BL"), (Column("R", "DOUBLE"), Column("BL", "BLOB"))),
              ("4", ("id",), (Column("id", "VARCHAR", length=9),)),
              ("5", ("ID",), (Column("ID", "CHAR", length=3),))]
    meta = key_meta(spark, [{"source": "s", "table_id": t, "schema_name": "S", "table_name": f"T{t}",
                             "key": list(k), "columns": list(c)} for t, k, c in tables])
    strings = ["a", 'q"\\b', "end\n", "\n", "\t\x01\x0b\x1f", "é/€", "", " x "]
    images = [("1", json.dumps({"ID": i, "K2": v, "Z": [1, {"a": 2}]}, ensure_ascii=False))
              for i, v in enumerate(strings)]
    images += [("1", '{"ID": 5, "K2": null}'), ("1", '{"K2": "k"}'), ("1", "{}"), ("1", None),
               ("1", '{"ID": 7, "K2": "a\\u00e9\\u001F"}'),
               ("2", '{"AMT": "-12.30"}'), ("2", '{"AMT": 1.50}'),
               ("3", '{"R": 1.5e-7, "BL": {"blob_id": 869417065180}}'), ("3", '{"R": 100.0, "BL": "0aff"}'),
               ("3", '{"R": -0.0, "BL": null}'), ("3", '{"R": 1E+3}'),
               ("5", '{"id": "x", "ID": "UP "}')]
    df = spark.createDataFrame([("s", t, n, img) for n, (t, img) in enumerate(images)],
                               "source STRING, table_id STRING, n INT, img STRING")
    # key names differing only by case: the generic key_of (Spark resolves fields ignoring case)
    assert key_plan(meta) is None
    meta = meta.filter(F.col("table_id") != "4")
    plan = key_plan(meta)
    assert len(plan.signatures) == 4
    want = {r["n"]: r["k"] for r in df.join(meta, ["source", "table_id"])
            .select("n", key_of(F.col("img")).alias("k")).collect()}
    got = {r["n"]: r["k"] for r in with_keys(df.join(key_sigs(spark, plan), ["source", "table_id"]),
                                             {"k": F.col("img")}, plan).select("n", "k").collect()}
    assert got == want and len(got) == len(images)
    assert want[2] == '{"ID": 2, "K2": "end\\n"}' and want[len(strings) + 4] == '{"ID": 7, "K2": "aé\\u001f"}'


def test_leading_keys_cut_from_the_image_equal_key_of(spark):
    """A key that is the image's first fields is cut from the image as written
    (``leading_key_pattern``) only when ``key_of`` writes the same text, else parsed: integers
    (minus zero, leading zeros, exponents and floats parsed; 19 digits, past a long's range
    and up to 38 digits cut, 39 parsed), strings with and
    without escapes, nulls, a key not first, a key's name inside a string or a nested value
    before it, no space after a colon; then seeded random images of typed rows rendered by
    the project's ``RowRenderer``, keys first or not, against ``key_of``."""
    from dblog.mirror import key_meta, key_of, key_plan, key_sigs, leading_key_pattern, with_keys
    from pyspark.sql import functions as F

    assert leading_key_pattern((("BL", "lob"),)) == r"(?!)"
    key_first = (Column("ID", "BIGINT", False), Column("K2", "VARCHAR", length=12),
                 Column("V", "VARCHAR", length=30))
    key_last = (Column("V", "VARCHAR", length=30), Column("K2", "VARCHAR", length=12),
                Column("ID", "BIGINT", False))
    tables = [("1", ("ID", "K2"), key_first), ("2", ("K2",), key_first), ("3", ("ID",), key_last),
              ("4", ("ID",), key_first)]
    meta = key_meta(spark, [{"source": "s", "table_id": t, "schema_name": "S", "table_name": f"T{t}",
                             "key": list(k), "columns": list(c)} for t, k, c in tables])
    plan = key_plan(meta)
    hand = ['{"ID": 5, "K2": "a", "V": "x"}', '{"ID": -0, "K2": "a"}', '{"ID": 007, "K2": "a"}',
            '{"ID": 1234567890123456789, "K2": "a"}', '{"ID": -9223372036854775809, "K2": "a"}',
            '{"ID": 1%s, "K2": "a"}' % ("0" * 37), '{"ID": -1%s, "K2": "a"}' % ("0" * 38),
            '{"ID": 1e3, "K2": "a"}', '{"ID": 2.50, "K2": "a"}',
            '{"ID": null, "K2": null}', '{"ID": 5, "K2": "a\\"b"}', '{"ID": 5, "K2": "\\u00e9"}',
            '{"ID": 5, "K2": "é"}', '{"ID":5, "K2": "a"}', '{"K2": "a", "ID": 5}', '{"ID": 5}',
            '{"V": "{\\"ID\\": 1, ", "ID": 9}', '{"V": {"ID": 1}, "ID": 9}', '{"ID": "5", "K2": "a"}',
            '{"ID": 5, "K2": 12}', '{"ID": 5, "K2": "a"', '{"ID": 5, "K2": "a"}x', "{}", "", None]
    rows = [(t, img) for t in ("1", "2", "3", "4") for img in hand]
    rng = random.Random(20261128)
    for n in range(400):
        t, _, cols = tables[n % len(tables)]
        values = [rng.choice([rng.randrange(-10 ** 12, 10 ** 12), rng.randrange(-2 ** 63, 2 ** 63),
                              0, None]) if c.name == "ID"
                  else rng.choice([None, "", "k", 'q"', "tab\t", "é€", "\u0001", str(rng.random())])
                  for c in cols]
        rows.append((t, RowRenderer(cols)(values)))
    df = spark.createDataFrame([("s", t, n, img) for n, (t, img) in enumerate(rows)],
                               "source STRING, table_id STRING, n INT, img STRING")
    want = {r["n"]: r["k"] for r in df.join(meta, ["source", "table_id"])
            .select("n", key_of(F.col("img")).alias("k")).collect()}
    keyed = df.join(key_sigs(spark, plan), ["source", "table_id"])
    got = {r["n"]: r["k"] for r in with_keys(keyed, {"k": F.col("img")}, plan).select("n", "k").collect()}
    assert got == want and len(got) == len(rows)
    # and the cut does the work it is for: the leading keys of the rendered rows are cut
    cut = keyed.select("n", "table_id", F.regexp_extract(
            "img", leading_key_pattern((("ID", "num"), ("K2", "str"))), 1).alias("c"))
    first = [r for r in cut.collect() if r["table_id"] == "1" and r["n"] >= len(hand) * 4]
    assert first and sum(r["c"] != "" for r in first) >= len(first) // 2
    # (a BIGINT of 19 digits and integers past a long's range are cut too)
    assert {r["n"]: r["c"] for r in cut.collect() if r["table_id"] == "1" and r["n"] in (3, 4, 5)} \
        == {3: '"ID": 1234567890123456789, "K2": "a"', 4: '"ID": -9223372036854775809, "K2": "a"',
            5: '"ID": 1%s, "K2": "a"' % ("0" * 37)}


def _row(i, v, k2="x"):
    return json.dumps({"ID": i, "K2": k2, "V": v})


SMALL = (Column("ID", "INTEGER", False), Column("K2", "CHAR", length=1), Column("V", "VARCHAR", length=9))


def _apply(spark, prev_rows, changes, n_truncates=None):
    from dblog.mirror import ROWS_DDL, apply_night, key_meta

    meta = key_meta(spark, [{"source": "s", "table_id": "1", "schema_name": "S", "table_name": "T",
                             "key": ["ID"], "columns": list(SMALL)}])
    prev = spark.createDataFrame(
        [("s", "1", json.dumps({"ID": json.loads(r)["ID"]}), r, 1, "2026-10-31")
         for r in prev_rows], ROWS_DDL)
    ch = spark.createDataFrame([("s", "1", cs, es, op, b, a) for cs, es, op, b, a in changes],
                               "source STRING, table_id STRING, commit_seq LONG, event_seq INT, "
                               "op STRING, before STRING, after STRING")
    rows, net, missing = apply_night(spark, ch, prev, meta, "2026-11-01", n_truncates=n_truncates)
    return ({json.loads(r["row"])["ID"]: (r["row"], r["_commit_seq"], r["_date"]) for r in rows.collect()},
            {r["key"]: (r["net_op"], r["before"], r["after"], r["first_commit_seq"], r["last_commit_seq"],
                        r["n_changes"]) for r in net.collect()},
            {r["table_id"]: r["mirror_missing_base"] for r in missing.collect()})


def test_apply_night_rules(spark):
    p1, p2, p3, p4 = _row(1, "a"), _row(2, "b"), _row(3, "c"), _row(4, "d")
    rows, net, missing = _apply(spark, [p1, p2, p3, p4], [
        (10, 1, "u", p1, _row(11, "a2")),           # key 1 moves to 11
        (10, 2, "d", p2, None),                     # delete 2 ...
        (11, 1, "c", None, _row(2, "b2")),          # ... and insert it again: u
        (12, 1, "u", _row(9, "z"), _row(9, "z2")),  # update of a key not in the mirror: upsert, counted
        (12, 2, "d", _row(8, "y"), None),           # delete of a key not in the mirror: counted
        (13, 1, "u", p3, _row(3, "c2")),
        (14, 1, "u", _row(3, "c2"), p3),            # back to how it started: u, before = after
        (15, 1, "ddl", None, None),
    ], n_truncates=0)          # no truncate tonight, as mirror_stage counts them: no epochs
    assert rows == {11: (_row(11, "a2"), 10, "2026-11-01"), 2: (_row(2, "b2"), 11, "2026-11-01"),
                    9: (_row(9, "z2"), 12, "2026-11-01"), 3: (p3, 14, "2026-11-01"),
                    4: (p4, 1, "2026-10-31")}
    assert net == {'{"ID": 1}': ("d", p1, None, 10, 10, 1),
                   '{"ID": 11}': ("c", None, _row(11, "a2"), 10, 10, 1),
                   '{"ID": 2}': ("u", p2, _row(2, "b2"), 10, 11, 2),
                   '{"ID": 9}': ("c", None, _row(9, "z2"), 12, 12, 1),
                   '{"ID": 3}': ("u", p3, p3, 13, 14, 2)}
    assert missing == {"1": 2}


def test_truncate_names_every_key_it_removes(spark):
    p1, p2 = _row(1, "a"), _row(2, "b")
    rows, net, missing = _apply(spark, [p1, p2], [
        (20, 1, "u", p1, _row(1, "a2")),
        (21, 1, "t", None, None),                   # removes 1 (changed) and 2 (untouched)
        (22, 1, "c", None, _row(5, "e")),
        (23, 1, "t", None, None),                   # removes 5 only
        (24, 1, "c", None, _row(1, "a3")),
    ])
    assert rows == {1: (_row(1, "a3"), 24, "2026-11-01")}
    # key 5 is absent at both ends of the night: left out
    assert net == {'{"ID": 1}': ("u", p1, _row(1, "a3"), 20, 24, 3),
                   '{"ID": 2}': ("d", p2, None, 21, 21, 1)}
    assert missing == {}


def _reference(prev_rows: dict, changes: list) -> tuple[dict, dict, dict]:
    """SPEC section 5 applied one change at a time, per table (the model ``apply_night`` must
    equal): ``prev_rows`` {(table, id): row}; changes (table, cs, es, op, before, after)."""
    cur = dict(prev_rows)
    when = {k: (1, "2026-10-31") for k in prev_rows}
    named: dict = {}
    missing: dict = {}

    def name(k, cs):
        n = named.setdefault(k, [0, cs, cs])
        n[0] += 1
        n[1], n[2] = min(n[1], cs), max(n[2], cs)

    for table, cs, es, op, before, after in sorted(changes, key=lambda c: (c[1], c[2])):
        kb = (table, json.loads(before)["ID"]) if before else None
        ka = (table, json.loads(after)["ID"]) if after else None
        if op == "t":
            for k in [k for k in cur if k[0] == table]:
                name(k, cs)
                del cur[k], when[k]
            continue
        if op == "d" or (op == "u" and kb is not None and kb != ka):
            if kb not in cur:
                missing[table] = missing.get(table, 0) + 1
            name(kb, cs)
            cur.pop(kb, None)
        if op in ("c", "m", "u") and after is not None:
            if op == "u" and (kb is None or kb == ka) and ka not in cur:
                missing[table] = missing.get(table, 0) + 1
            name(ka, cs)
            cur[ka], when[ka] = after, (cs, "2026-11-01")
    net = {}
    for k, (n, first, last) in named.items():
        was, now = k in prev_rows, k in cur
        op = "u" if was and now else "c" if now else "d" if was else None
        if op:
            net[k] = (op, prev_rows.get(k), cur.get(k), first, last, n)
    rows = {k: (r, *when[k]) for k, r in cur.items()}
    return rows, net, missing


@pytest.mark.parametrize("seed,broadcast", [(1, True), (2, False)])
def test_apply_night_equals_one_change_at_a_time(spark, seed, broadcast):
    """Random nights over two tables, many truncates (clustered in one transaction, at the
    start, at the end), moved keys, deletes of absent keys: ``apply_night`` (truncate epochs,
    no keys x truncates) equals the rules applied one change at a time."""
    from dblog.mirror import ROWS_DDL, apply_night, key_meta

    rng = random.Random(seed)
    tables = ["1", "2"]
    prev_rows = {(t, i): _row(i, f"p{t}{i}") for t in tables for i in range(12) if rng.random() < 0.6}
    changes, cs = [], 100
    state = {k for k in prev_rows}
    for _ in range(400):
        cs += rng.choice((0, 1, 1, 2, 40))
        es = sum(1 for c in changes if c[1] == cs) + 1
        t = rng.choice(tables)
        i, j = rng.randrange(14), rng.randrange(14)
        r = rng.random()
        if r < 0.07 or (cs > 1000 and r < 0.3):
            changes.append((t, cs, es, "t", None, None))
            state = {k for k in state if k[0] != t}
        elif r < 0.35:
            changes.append((t, cs, es, "c" if rng.random() < 0.8 else "m", None, _row(i, f"v{cs}.{es}")))
            state.add((t, i))
        elif r < 0.7:
            moved = j if rng.random() < 0.25 else i
            changes.append((t, cs, es, "u", _row(i, "old"), _row(moved, f"u{cs}.{es}")))
            state.discard((t, i))
            state.add((t, moved))
        else:
            changes.append((t, cs, es, "d", _row(i, "old"), None))
            state.discard((t, i))
    changes += [("1", cs + 1, k, "t", None, None) for k in range(1, 6)]          # five in one commit
    changes += [("2", 99, 1, "t", None, None), ("2", cs + 2, 1, "c", None, _row(3, "last"))]
    want_rows, want_net, want_missing = _reference(prev_rows, changes)

    meta = key_meta(spark, [{"source": "s", "table_id": t, "schema_name": "S", "table_name": f"T{t}",
                             "key": ["ID"], "columns": list(SMALL)} for t in tables])
    prev = spark.createDataFrame([("s", t, json.dumps({"ID": i}), r, 1, "2026-10-31")
                                  for (t, i), r in prev_rows.items()], ROWS_DDL)
    ch = spark.createDataFrame([("s", t, c, e, op, b, a) for t, c, e, op, b, a in changes],
                               "source STRING, table_id STRING, commit_seq LONG, event_seq INT, "
                               "op STRING, before STRING, after STRING")
    n_t = sum(1 for c in changes if c[3] == "t")
    for hint in [n_t if broadcast else None]:      # the intervals broadcast, or left to Spark
        rows, net, missing = apply_night(spark, ch, prev, meta, "2026-11-01", n_truncates=hint)
        got_rows = {(r["table_id"], json.loads(r["row"])["ID"]): (r["row"], r["_commit_seq"], r["_date"])
                    for r in rows.collect()}
        got_net = {(r["table_id"], json.loads(r["key"])["ID"]):
                   (r["net_op"], r["before"], r["after"], r["first_commit_seq"], r["last_commit_seq"],
                    r["n_changes"]) for r in net.collect()}
        assert got_rows == want_rows
        assert got_net == want_net
        assert {r["table_id"]: r["mirror_missing_base"] for r in missing.collect()} == want_missing
    assert sum(1 for v in want_net.values() if v[0] == "d") > 3 and n_t > 20


def test_truncate_epochs_count_the_truncates_before_each_event(spark):
    from dblog.mirror import truncate_epochs

    ev = spark.createDataFrame(
        [("s", t, c, e) for t in ("1", "2", "3") for c in range(0, 60, 3) for e in (1, 2)],
        "source STRING, table_id STRING, commit_seq LONG, event_seq INT")
    tr = [("1", 10, 3), ("1", 10, 5), ("1", 11, 1), ("1", 45, 2), ("2", 30, 2), ("2", 30, 9)]
    truncs = spark.createDataFrame([("s", t, c, e) for t, c, e in tr],
                                   "source STRING, table_id STRING, commit_seq LONG, event_seq INT")
    for hint in (len(tr), None):
        got, numbered = truncate_epochs(ev, truncs, hint)
        rows = got.collect()
        assert len(rows) == ev.count()
        for r in rows:
            want = sum(1 for t, c, e in tr if t == r["table_id"] and (c, e) < (r["commit_seq"], r["event_seq"]))
            assert r["epoch"] == want, r
            assert r["n_t"] == sum(1 for t, *_ in tr if t == r["table_id"])
    assert sorted((r["table_id"], r["tnum"], r["commit_seq"]) for r in numbered.collect()) == [
        ("1", 1, 10), ("1", 2, 10), ("1", 3, 11), ("1", 4, 45), ("2", 1, 30), ("2", 2, 30)]


def test_no_previous_rows_are_pruned_from_the_plans(spark):
    """A night without previous rows (``no_rows``) gives what an empty frame gives, with the
    joins against the previous rows gone from the optimised plans."""
    from dblog.mirror import ROWS_DDL, apply_night, key_meta, no_rows
    from dblog.sparkio import local_frame

    meta = key_meta(spark, [{"source": "s", "table_id": "1", "schema_name": "S", "table_name": "T",
                             "key": ["ID"], "columns": list(SMALL)}])
    ch = spark.createDataFrame(
        [("s", "1", cs, es, op, b, a) for cs, es, op, b, a in [
            (1, 1, "c", None, _row(1, "a")), (1, 2, "c", None, _row(2, "b")),
            (2, 1, "u", _row(1, "a"), _row(3, "a")), (3, 1, "t", None, None),
            (4, 1, "c", None, _row(2, "c")), (5, 1, "d", _row(9, "z"), None)]],
        "source STRING, table_id STRING, commit_seq LONG, event_seq INT, op STRING, "
        "before STRING, after STRING")
    def types(df):
        return [(f.name, f.dataType) for f in df.schema.fields]

    empty = no_rows(spark, ROWS_DDL)
    assert types(empty) == types(local_frame(spark, [], ROWS_DDL)) and empty.count() == 0
    persisted = local_frame(spark, [], ROWS_DDL).persist()   # what the stage did before
    plain = apply_night(spark, ch, persisted, meta, "2026-11-01", n_truncates=1)
    pruned = apply_night(spark, ch, empty, meta, "2026-11-01", n_truncates=1)
    for a, b in zip(plain, pruned):
        assert types(a) == types(b)
        assert sorted(map(str, a.collect())) == sorted(map(str, b.collect()))

    def joins(df):
        return df._jdf.queryExecution().optimizedPlan().toString().count("Join ")
    assert joins(pruned[0]) < joins(plain[0]) and joins(pruned[1]) < joins(plain[1])
    persisted.unpersist()


def test_typed_tables_split_a_small_night_by_rows_and_keep_each_table_in_one_task(spark, tmp_path):
    """``write_tables``: a night below ``SPLIT_BY_ROWS_BELOW`` changes is hashed by table into
    as many partitions as cores (one per ``TASK_MIN_ROWS``), not left to the byte-sized
    rebalance (one task for a small night); each table is still written by one task, one
    file; the values are the images' (``typed_batch``)."""
    import pyarrow.parquet as pq

    from dblog.tables import TASK_MIN_ROWS, table_specs, write_tables

    cols = [{"name": "ID", "type": "INTEGER", "nullable": False}, {"name": "V", "type": "VARCHAR", "length": 9}]
    catalog = {"source": "s", "format": "rdb", "tables": [
        {"id": str(t), "schema": "S", "name": f"T{t}", "key": ["ID"], "columns": cols} for t in range(6)]}
    manifest = {"date": "2026-11-30", "sources": [{"name": "s", "catalog": catalog}]}
    specs = table_specs(manifest, tmp_path / "tables")
    rows = [("s", str(i % 6), "c", i, 1, None, None, json.dumps({"ID": i, "V": f"v{i}"}))
            for i in range(600)]
    df = spark.createDataFrame(rows, "source STRING, table_id STRING, op STRING, commit_seq LONG, "
                                     "event_seq INT, commit_ts TIMESTAMP, before STRING, after STRING")
    small = write_tables(df, specs, rows=2 * TASK_MIN_ROWS, cores=2)
    assert small.rdd.getNumPartitions() == 2
    assert write_tables(df, specs, rows=TASK_MIN_ROWS // 2, cores=2).rdd.getNumPartitions() == 1
    written = small.collect()
    assert sorted(r["table_id"] for r in written) == [str(t) for t in range(6)]   # one task each
    got = pq.read_table(written[0]["path"]).to_pylist()
    t = int(written[0]["table_id"])
    assert sorted(r["after_ID"] for r in got) == list(range(t, 600, 6))
    assert {r["after_V"] for r in got} == {f"v{i}" for i in range(t, 600, 6)}
