"""sources.yaml and catalogs: clear errors naming the file, the key and what was expected."""

from __future__ import annotations

import json

import pytest

from dblog.cli import main
from dblog.config import load_config
from decoders.catalog import load_catalog
from decoders.errors import ConfigError

from .conftest import REPO


def test_sample_config_loads_with_defaults():
    cfg = load_config(REPO / "include" / "sources.yaml")
    names = [s.name for s in cfg.sources]
    assert names == ["pos_solid", "erp_db2", "wms_informix", "fin_rdb", "core_zos"]
    db2 = cfg.source("erp_db2")
    assert db2.options == {"byte_order": "little", "codepage": "utf-8"}
    assert cfg.source("core_zos").options == {"codepage": "cp037", "rdw": True}
    assert cfg.source("wms_informix").timezone == "America/Chicago"
    assert cfg.source("pos_solid").quarantine_threshold == 0.05


def write(tmp_path, text: str):
    p = tmp_path / "sources.yaml"
    p.write_text(text)
    (tmp_path / "cat.json").write_text((REPO / "include/catalogs/pos_solid.json").read_text())
    return p


@pytest.mark.parametrize("body, key, words", [
    ("sources: []", "sources", "non-empty list"),
    ("nope: 1", "sources", "missing"),
    ("sources:\n  - {name: Bad-Name, format: soliddb, catalog: cat.json}", "sources[0].name", "[a-z0-9_]+"),
    ("sources:\n  - {name: a, format: oracle, catalog: cat.json}", "sources[0].format", "one of"),
    ("sources:\n  - {name: a, format: soliddb, catalog: missing.json}", "sources[0].catalog", "not found"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, timezone: Mars/Base}",
     "sources[0].timezone", "unknown time zone"),
    ("sources:\n  - {name: a, format: db2luw, catalog: cat.json, options: {byte_order: middle}}",
     "sources[0].options.byte_order", "little, big"),
    ("sources:\n  - {name: a, format: lldf, catalog: cat.json, options: {rdw: maybe}}",
     "sources[0].options.rdw", "true/false"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, options: {rdw: true}}",
     "sources[0].options.rdw", "not an option of soliddb"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json}\n  - {name: a, format: soliddb, catalog: cat.json}",
     "sources[1].name", "duplicate"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, quarantine_threshold: 2}",
     "sources[0].quarantine_threshold", "between 0 and 1"),
    ("sources: [", "line 1", "not valid YAML"),
])
def test_malformed_config_says_where(tmp_path, body, key, words):
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert e.value.file == str(path)
    assert e.value.key.startswith(key), e.value.key
    assert words in e.value.problem


def good_catalog() -> dict:
    return {"source": "x", "format": "soliddb", "tables": [
        {"id": "1", "schema": "S", "name": "T", "key": ["A"],
         "columns": [{"name": "A", "type": "INTEGER", "nullable": False},
                     {"name": "B", "type": "DECIMAL", "precision": 5, "scale": 2}]}]}


@pytest.mark.parametrize("mutate, key, words", [
    (lambda c: c.pop("tables"), "tables", "missing"),
    (lambda c: c["tables"][0].pop("id"), "tables[0].id", "missing"),
    (lambda c: c["tables"][0]["columns"][0].update(type="NUMBER"), "tables[0].columns[0].type", "one of"),
    (lambda c: c["tables"][0]["columns"][1].pop("precision"), "tables[0].columns[1].precision", "precision"),
    (lambda c: c["tables"][0]["columns"].append({"name": "C", "type": "CHAR"}), "tables[0].columns[2].length",
     "positive length"),
    (lambda c: c["tables"][0].update(key=["Z"]), "tables[0].key", "not a column"),
    (lambda c: c["tables"].append(dict(c["tables"][0])), "tables[1].id", "duplicate"),
    (lambda c: c["tables"][0].update(encoding="klingon"), "tables[0].encoding", "unknown encoding"),
    (lambda c: c["tables"][0]["columns"][0].update(nullable="no"), "tables[0].columns[0].nullable", "true/false"),
])
def test_malformed_catalog_says_where(tmp_path, mutate, key, words):
    doc = good_catalog()
    mutate(doc)
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as e:
        load_catalog(p)
    assert e.value.file == str(p) and e.value.key == key and words in e.value.problem


def test_catalog_not_json(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"source": "x",\n "format": ')
    with pytest.raises(ConfigError) as e:
        load_catalog(p)
    assert e.value.key.startswith("line 2") and "not valid JSON" in e.value.problem


def test_cli_bad_usage_exits_2(tmp_path, capsys):
    assert _exit(["run"]) == 2
    assert _exit(["run", "--date", "2026-13-01"]) == 2
    assert _exit(["frobnicate"]) == 2
    bad = write(tmp_path, "sources: []")
    assert main(["run", "--date", "2026-11-01", "--config", str(bad)]) == 2
    assert "configuration error" in capsys.readouterr().err


def _exit(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


# ----------------------------------------------------------------- hostile files (issue 15)

@pytest.mark.parametrize("body, key, words", [
    ('sources:\n  - {name: "pos_solid\\n", format: soliddb, catalog: cat.json}', "sources[0].name",
     "[a-z0-9_]+"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, unknown_tables: drop}",
     "sources[0].unknown_tables", "quarantine, fail"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, unknown_tables: [fail]}",
     "sources[0].unknown_tables", "quarantine, fail"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, quarantine_threshold: .nan}",
     "sources[0].quarantine_threshold", "between 0 and 1"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, quarantine_threshold: {bytes: -1}}",
     "sources[0].quarantine_threshold.bytes", "between 0 and 1"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, quarantine_threshold: {rows: 1}}",
     "sources[0].quarantine_threshold.rows", "unknown key"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, quarantine_threshold: '0.1'}",
     "sources[0].quarantine_threshold", "between 0 and 1"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, 7: x}", "sources[0].7", "unknown key"),
    ("sources:\n  - {name: a, format: [soliddb], catalog: cat.json}", "sources[0].format", "one of"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, timezone: 5}",
     "sources[0].timezone", "time zone"),
    ("sources:\n  - {name: a, format: soliddb, catalog: cat.json, timezone: ../../etc/passwd}",
     "sources[0].timezone", "unknown time zone"),
    ("sources:\n  - {name: a, format: soliddb, catalog: \"c\\0.json\"}", "sources[0].catalog", "a path"),
    ("sources: " + "[" * 100_000 + "]" * 100_000, "(file)", "nested too deep"),
] + [
    (f"sources:\n  - {{name: a, format: db2luw, catalog: cat.json, options: {{codepage: {c}}}}}",
     "sources[0].options.codepage", words)
    for c, words in (("idna", "not a character set"), ("punycode", "not a character set"),
                     ("undefined", "not a character set"), ("hex", "not a text encoding"),
                     ("klingon", "unknown encoding"), ("'utf-8\\0'", "encoding"))
])
def test_hostile_config_says_where(tmp_path, body, key, words):
    test_malformed_config_says_where(tmp_path, body, key, words)


def test_threshold_for_records_and_bytes_and_unknown_tables_default(tmp_path):
    cfg = load_config(write(tmp_path, "sources:\n"
                            "  - {name: a, format: soliddb, catalog: cat.json}\n"
                            "  - {name: b, format: soliddb, catalog: cat.json, unknown_tables: fail,\n"
                            "     quarantine_threshold: {records: 0.1, bytes: 0.25}}\n"
                            "  - {name: c, format: soliddb, catalog: cat.json, quarantine_threshold: 0}\n"))
    a, b, c = cfg.sources
    assert (a.quarantine_threshold, a.quarantine_threshold_bytes, a.unknown_tables) == (0.05, 0.05, "quarantine")
    assert (b.quarantine_threshold, b.quarantine_threshold_bytes, b.unknown_tables) == (0.1, 0.25, "fail")
    assert (c.quarantine_threshold, c.quarantine_threshold_bytes) == (0.0, 0.0)
    assert b.to_json()["quarantine_threshold_bytes"] == 0.25 and b.to_json()["unknown_tables"] == "fail"


def test_config_not_utf8_says_line_and_byte(tmp_path):
    p = write(tmp_path, "")
    p.write_bytes(b"sources:\n  - {name: a, format: soliddb,\n    catalog: c\xffat.json}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert (e.value.file, e.value.key) == (str(p), "line 3 column 15")
    assert "not UTF-8" in e.value.problem and "0xFF" in e.value.problem


def test_catalog_not_utf8_or_nested_too_deep(tmp_path):
    p = tmp_path / "c.json"
    p.write_bytes(json.dumps(good_catalog()).encode().replace(b'"S"', b'"\xc3\x28"'))
    with pytest.raises(ConfigError) as e:
        load_catalog(p)
    assert e.value.key.startswith("line 1 column") and "not UTF-8" in e.value.problem
    p.write_text('{"source": "x", "format": "soliddb", "tables": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError) as e:
        load_catalog(p)
    assert e.value.key == "(file)" and "nested too deep" in e.value.problem


@pytest.mark.parametrize("encoding, words", [("idna", "not a character set"),
                                             ("punycode", "not a character set"),
                                             ("undefined", "not a character set"),
                                             ("zlib", "not a text encoding"), (7, "code page name")])
def test_catalog_encoding_must_be_a_character_set(tmp_path, encoding, words):
    doc = good_catalog()
    doc["tables"][0]["encoding"] = encoding
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as e:
        load_catalog(p)
    assert e.value.key == "tables[0].encoding" and words in e.value.problem


def test_catalog_length_bounded(tmp_path):
    doc = good_catalog()
    doc["tables"][0]["columns"].append({"name": "C", "type": "CHAR", "length": 10**30})
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as e:
        load_catalog(p)
    assert e.value.key == "tables[0].columns[2].length" and "from 0 to" in e.value.problem


@pytest.mark.parametrize("what", ["config_bytes", "catalog_bytes", "catalog_deep", "codec", "name"])
def test_cli_exits_2_without_traceback(tmp_path, capsys, what):
    cat = tmp_path / "cat.json"
    cat.write_text((REPO / "include/catalogs/pos_solid.json").read_text())
    body = "sources:\n  - {name: pos_solid, format: soliddb, catalog: cat.json}\n"
    p = tmp_path / "sources.yaml"
    p.write_text(body)
    if what == "config_bytes":
        p.write_bytes(body.encode() + b"# \xfe\n")
    elif what == "catalog_bytes":
        cat.write_bytes(cat.read_bytes().replace(b'"ERP"', b'"\xe9RP"', 1))
        assert b"\xe9" in cat.read_bytes()
    elif what == "catalog_deep":
        cat.write_text("[" * 100_000)
    elif what == "codec":
        p.write_text(body.replace("soliddb", "db2luw") + "    options: {codepage: idna}\n")
        cat.write_text(cat.read_text().replace('"soliddb"', '"db2luw"'))
    elif what == "name":
        p.write_text(body.replace("pos_solid", '"pos_solid\\n"'))
    rc = main(["run", "--date", "2026-11-01", "--config", str(p), "--data-root", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "configuration error" in err and "Traceback" not in err
    assert not (tmp_path / "d").exists()


def test_mirror_retention_and_missing_base_limit(tmp_path):
    """``mirror_retention`` (default 7) and ``mirror_missing_base_limit`` (default off) are
    validated with file, key and reason."""
    import yaml

    from dblog.config import load_config
    from decoders.errors import ConfigError

    cat = REPO / "include" / "catalogs" / "pos_solid.json"

    def cfg(**extra):
        path = tmp_path / "sources.yaml"
        path.write_text(yaml.safe_dump({"sources": [
            {"name": "pos_solid", "format": "soliddb", "catalog": str(cat), **extra}]}))
        return path

    src = load_config(cfg()).sources[0]
    assert (src.mirror_retention, src.mirror_missing_base_limit) == (7, None)
    src = load_config(cfg(mirror_retention=2, mirror_missing_base_limit=0)).sources[0]
    assert (src.mirror_retention, src.mirror_missing_base_limit) == (2, 0)
    for key, bad in (("mirror_retention", 0), ("mirror_retention", "7"), ("mirror_retention", True),
                     ("mirror_missing_base_limit", -1), ("mirror_missing_base_limit", 1.5)):
        with pytest.raises(ConfigError) as err:
            load_config(cfg(**{key: bad}))
        assert f"sources[0].{key}" in str(err.value) and "sources.yaml" in str(err.value)
