"""The landing zone (SPEC section 2): every file accounted for, names as bytes, links kept
inside the data root, duplicate archives found tonight and on earlier published nights."""

from __future__ import annotations

import json
import os

import pytest

from dblog.landing import (ARCHIVE, DUPLICATE, IGNORED, REFUSED, ArchiveChanged, ArchiveIndex,
                           display_name, find_duplicates, read_archive, record_published, scan)

SRC, DATE = "pos_solid", "2026-11-01"


def night(root, source=SRC, date=DATE):
    d = root / "landing" / source / date
    d.mkdir(parents=True, exist_ok=True)
    return d


def by_file(entries):
    return {e.file: e for e in entries}


@pytest.mark.parametrize("raw, shown", [
    (b"a.csv", "a.csv"), ("été.csv".encode(), "été.csv"), (b"\xff\xfeA.csv", "\\xff\\xfeA.csv"),
    (b"a\\xffb", "a\\x5cxffb"), (b"a\nb", "a\\x0ab"), (b"\xc3", "\\xc3"),
])
def test_display_name_is_unique_printable_text(raw, shown):
    assert display_name(raw) == shown
    assert display_name(raw).isprintable()


def test_every_file_is_an_entry(tmp_path):
    root = tmp_path / "data"
    n = night(root)
    (n / "a.csv").write_bytes(b"A" * 10)
    (n / "sub").mkdir()
    (n / "sub" / "b.csv").write_bytes(b"B" * 20)
    (n / ".a.csv.tmp").write_bytes(b"x" * 3)
    (n / ".hidden").mkdir()
    (n / ".hidden" / "c.csv").write_bytes(b"C" * 4)
    os.mkfifo(n / "pipe")
    bad = os.fsencode(n) + b"/\xff\xfe.csv"
    with open(bad, "wb") as f:
        f.write(b"D" * 5)
    got = by_file(scan(root, SRC, DATE))
    p = f"{SRC}/{DATE}/"
    assert {k: (e.status, e.size) for k, e in got.items()} == {
        p + "a.csv": (ARCHIVE, 10), p + "sub/b.csv": (ARCHIVE, 20), p + ".a.csv.tmp": (IGNORED, 3),
        p + ".hidden/c.csv": (IGNORED, 4), p + "pipe": (REFUSED, 0), p + "\\xff\\xfe.csv": (ARCHIVE, 5)}
    assert "inside hidden folder" in got[p + ".hidden/c.csv"].reason
    assert "not a regular file" in got[p + "pipe"].reason
    odd = got[p + "\\xff\\xfe.csv"]
    assert odd.path is None and bytes.fromhex(odd.path_hex) == bad
    assert read_archive(odd.to_json(), str(root)) == b"D" * 5


def test_links_followed_only_inside_the_data_root(tmp_path):
    root = tmp_path / "data"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_bytes(b"SECRET")
    (outside / "dir").mkdir()
    (outside / "dir" / "x.csv").write_bytes(b"SECRET2")
    inside = root / "elsewhere"
    inside.mkdir(parents=True)
    (inside / "ok.csv").write_bytes(b"OK")
    (inside / "okdir").mkdir()
    (inside / "okdir" / "y.csv").write_bytes(b"OKDIR")
    (inside / "okdir" / "leak.csv").symlink_to(outside / "secret.csv")
    n = night(root)
    (n / "out.csv").symlink_to(outside / "secret.csv")
    (n / "outdir").symlink_to(outside / "dir")
    (n / "dangling.csv").symlink_to(root / "nothing.csv")
    (n / "in.csv").symlink_to(inside / "ok.csv")
    (n / "indir").symlink_to(inside / "okdir")
    (n / "loop").symlink_to(n)
    got = by_file(scan(root, SRC, DATE))
    p = f"{SRC}/{DATE}/"
    assert {k: e.status for k, e in got.items()} == {
        p + "out.csv": REFUSED, p + "outdir": REFUSED, p + "dangling.csv": REFUSED,
        p + "in.csv": ARCHIVE, p + "indir/y.csv": ARCHIVE, p + "indir/leak.csv": REFUSED,
        p + "loop": REFUSED}
    assert "outside the data root" in got[p + "out.csv"].reason
    assert "outside the data root" in got[p + "outdir"].reason
    assert "dangling" in got[p + "dangling.csv"].reason
    assert "loop" in got[p + "loop"].reason
    assert all(e.size == 0 and e.path_hex is None for e in got.values() if e.status == REFUSED)
    assert read_archive(got[p + "in.csv"].to_json(), str(root)) == b"OK"


def test_night_folder_linked_out_of_the_root_is_refused_unread(tmp_path):
    root = tmp_path / "data"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.csv").write_bytes(b"SECRET")
    (root / "landing" / SRC).mkdir(parents=True)
    (root / "landing" / SRC / DATE).symlink_to(outside)
    entries = scan(root, SRC, DATE)
    assert [(e.file, e.status) for e in entries] == [(f"{SRC}/{DATE}", REFUSED)]
    (root / "landing" / SRC / DATE).unlink()
    (root / "landing" / SRC).rmdir()
    (root / "landing" / SRC).symlink_to(tmp_path)
    assert [e.status for e in scan(root, SRC, DATE)] == [REFUSED]


def test_read_archive_refuses_a_file_swapped_after_staging(tmp_path):
    root = tmp_path / "data"
    n = night(root)
    (n / "a.csv").write_bytes(b"AAAA")
    (tmp_path / "secret").write_bytes(b"SECRET")
    entry = scan(root, SRC, DATE)[0].to_json()
    (n / "a.csv").unlink()
    (n / "a.csv").symlink_to(tmp_path / "secret")
    with pytest.raises(ArchiveChanged, match="outside the data root"):
        read_archive(entry, str(root))
    (n / "a.csv").unlink()
    (n / "a.csv").write_bytes(b"AAAAB")
    with pytest.raises(ArchiveChanged, match="5 bytes, staged 4"):
        read_archive(entry, str(root))


def publish_night_state(root, date, run_id, source=SRC, archives=None):
    """What a published night leaves in state/ (the run id the index trusts), then the
    index entries ``record_published`` writes after the publish."""
    d = root / "published" / "state" / source / date
    d.mkdir(parents=True, exist_ok=True)
    (d / "seq.json").write_text(json.dumps({"last_commit_seq": 0, "run_id": run_id, "date": date}))
    if archives is not None:
        record_published(root, {"date": date, "sources": [{"name": source, "archives": archives}]})


def stage_like(root, date):
    """The stage's part: tonight's archives told apart from duplicates (as manifest rows)."""
    entries = [e for e in scan(root, SRC, date) if e.status == ARCHIVE]
    find_duplicates(entries, ArchiveIndex(root, SRC, date))
    return {e.file: e for e in entries}


def archives_of(got):
    return [e.to_json() for e in got.values() if e.status == ARCHIVE]


def test_duplicates_tonight_and_on_earlier_published_nights(tmp_path):
    root = tmp_path / "data"
    n1 = night(root, date="2026-11-01")
    (n1 / "a.csv").write_bytes(b"same bytes")
    (n1 / "b.csv").write_bytes(b"other!!!!!")         # same size, other bytes
    (n1 / "c.csv").write_bytes(b"same bytes")         # repeats a.csv tonight
    (n1 / "d.csv").write_bytes(b"unique size here")
    got = stage_like(root, "2026-11-01")
    assert {k.rsplit("/", 1)[1]: (e.status, e.duplicate_of) for k, e in got.items()} == {
        "a.csv": (ARCHIVE, None), "b.csv": (ARCHIVE, None),
        "c.csv": (DUPLICATE, "pos_solid/2026-11-01/a.csv"), "d.csv": (ARCHIVE, None)}
    assert got["pos_solid/2026-11-01/d.csv"].sha256 is None     # no other file of its size
    night1 = archives_of(got)
    n2 = night(root, date="2026-11-02")
    (n2 / "x.csv").write_bytes(b"unique size here")    # repeats d.csv (entered unhashed)
    (n2 / "y.csv").write_bytes(b"same bytes")          # repeats a.csv
    (n2 / "z.csv").write_bytes(b"new bytes!")
    # night 1 not published: nothing of it counts
    assert all(e.status == ARCHIVE for e in stage_like(root, "2026-11-02").values())
    publish_night_state(root, "2026-11-01", "run1", archives=night1)
    got = stage_like(root, "2026-11-02")
    assert {k.rsplit("/", 1)[1]: e.duplicate_of for k, e in got.items()} == {
        "x.csv": "pos_solid/2026-11-01/d.csv", "y.csv": "pos_solid/2026-11-01/a.csv", "z.csv": None}
    # a rerun of night 1: its own entries do not count against it
    assert stage_like(root, "2026-11-01")["pos_solid/2026-11-01/a.csv"].status == ARCHIVE
    # another run republished night 1: the first run's entries are inert until it is entered
    publish_night_state(root, "2026-11-01", "run4")
    assert all(e.status == ARCHIVE for e in stage_like(root, "2026-11-02").values())
    record_published(root, {"date": "2026-11-01", "sources": [{"name": SRC, "archives": night1}]})
    assert stage_like(root, "2026-11-02")["pos_solid/2026-11-02/y.csv"].duplicate_of \
        == "pos_solid/2026-11-01/a.csv"


def test_a_published_night_not_yet_entered_is_healed_by_the_next_stage(tmp_path):
    from dblog.landing import ARCHIVES_DIR, ARCHIVES_FILE, night_archives

    root = tmp_path / "data"
    n1 = night(root, date="2026-11-01")
    (n1 / "a.csv").write_bytes(b"AAAA")
    night1 = archives_of(stage_like(root, "2026-11-01"))
    publish_night_state(root, "2026-11-01", "run1")      # published, index not written
    state = root / "published" / "state" / SRC / "2026-11-01" / ARCHIVES_DIR
    state.mkdir(parents=True)
    (state / ARCHIVES_FILE).write_text(json.dumps(night_archives(night1, root)))
    (night(root, date="2026-11-02") / "b.csv").write_bytes(b"AAAA")
    index = ArchiveIndex(root, SRC, "2026-11-02")
    assert not index.size_seen(4)
    index.heal("2026-11-01")
    assert index.covered("2026-11-01", "run1") and index.size_seen(4)
    assert stage_like(root, "2026-11-02")["pos_solid/2026-11-02/b.csv"].duplicate_of == "pos_solid/2026-11-01/a.csv"


def test_index_follows_the_data_root_when_it_is_copied(tmp_path):
    import shutil

    root = tmp_path / "data"
    (night(root, date="2026-11-01") / "a.csv").write_bytes(b"AAAA")
    publish_night_state(root, "2026-11-01", "run1", archives=archives_of(stage_like(root, "2026-11-01")))
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    shutil.rmtree(root)                        # the index must not reach for the old root
    (night(copy, date="2026-11-02") / "b.csv").write_bytes(b"AAAA")
    assert stage_like(copy, "2026-11-02")["pos_solid/2026-11-02/b.csv"].duplicate_of == "pos_solid/2026-11-01/a.csv"


def test_index_lookup_does_not_read_other_sizes(tmp_path):
    """A lookup lists one folder of its size (and one of its hash), whatever the history."""
    root = tmp_path / "data"
    for day in range(1, 21):
        date = f"2026-11-{day:02d}"
        n = night(root, date=date)
        (n / "a.csv").write_bytes(b"x" * day)          # a new size every night
        publish_night_state(root, date, f"r{day}", archives=archives_of(stage_like(root, date)))
    sizes = sorted(p.name for p in (root / "archive_index" / SRC).glob("size=*"))
    assert len(sizes) == 20
    index = ArchiveIndex(root, SRC, "2026-12-01")
    assert not index.size_seen(21) and index.size_seen(7)
    assert index.find(7, "0" * 64) is None
    import hashlib

    assert index.find(7, hashlib.sha256(b"x" * 7).hexdigest()) == "pos_solid/2026-11-07/a.csv"
