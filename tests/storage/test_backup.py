"""The backup file (`semreg.storage.backup`): what `encode` writes `read` reads back whole, any triple store
reads it, and a file that is not whole is refused naming the line where it breaks."""
from __future__ import annotations

import gzip
import io

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.errors import BadRequest
from semreg.storage.backup import BadBackup, OntologyCopy, encode
from semreg.storage.backup_reading import DEFAULT_LIMITS, Reading, read
from semreg.storage.lines import Limits

REC = {"id": "a1", "service": "s", "address": "10.0.0.1", "port": 80, "scheme": "http",
       "tags": [["http://e/A", "http://e/p", "http://e/B"]], "weight": 1, "capacity": None, "ttl": 0.0,
       "deregister_after": 90.0, "check": None, "meta": {"k": "v"}, "owner": "ops", "environment": "default",
       "registered_at": 1764580000.5}
SOURCE = "@prefix ex: <http://e/> .\nex:A a <http://www.w3.org/2002/07/owl#Class> ; ex:note \"\"\"two\nlines\"\"\" .\n"
ONTOLOGY = OntologyCopy("e", "text/turtle", "2026-01-01T00:00:00Z", SOURCE,
                        tuple(ox.parse(SOURCE.encode(), format=ox.RdfFormat.TURTLE)))


def backup(n: int = 1200) -> bytes:
    records = ((dict(REC, id=f"a{k}"), 1000 + k) for k in range(n))
    return b"".join(encode(records, [ONTOLOGY], {"zz": "http://zz/"}, 1764580000.0))


def test_what_is_written_reads_back_whole():
    contents = read(io.BytesIO(backup()))
    assert contents.counts() == {"instances": 1200, "ontologies": 1, "prefixes": 1, "queries": 0}
    assert next(iter(contents.records)) == (REC | {"id": "a0"}, 1000)
    assert list(contents.ontologies)[0].source == SOURCE and dict(contents.prefixes) == {"zz": "http://zz/"}


def test_any_triple_store_reads_it_with_each_ontology_in_its_graph():
    store = ox.Store()
    store.load(gzip.decompress(backup(3)), format=ox.RdfFormat.N_QUADS)
    graphs = {g.value for g in store.named_graphs()}
    assert graphs == {"urn:semreg:records", "urn:semreg:registry", "urn:semreg:ontology:e"}


def test_progress_is_told_the_compressed_bytes_read():
    data, seen = backup(), []
    read(io.BytesIO(data), seen.append)
    assert seen[-1] == len(data) and seen == sorted(seen)


@pytest.mark.parametrize("cut", [40, 1, 5000])
def test_a_cut_file_is_refused_naming_the_line_it_ends_after(cut):
    with pytest.raises(BadBackup, match="ends early after line") as refused:
        read(io.BytesIO(backup()[:-cut]))
    assert refused.value.extra["line"] > 1


def test_a_file_cut_at_a_line_boundary_lacks_its_summary():
    lines = gzip.decompress(backup()).splitlines(keepends=True)
    with pytest.raises(BadBackup, match="incomplete: it ends after line") as refused:
        read(io.BytesIO(gzip.compress(b"".join(lines[:len(lines) // 2]))))
    assert refused.value.extra["line"] == len(lines) // 2 + 1


def test_a_broken_line_is_named():
    lines = gzip.decompress(backup(3)).splitlines(keepends=True)
    lines[7] = b"<urn:a> <urn:b> broken .\n"
    with pytest.raises(BadBackup, match="corrupt at line 8"):
        read(io.BytesIO(gzip.compress(b"".join(lines))))


@pytest.mark.parametrize("data, says", [(b"", "empty"), (b"plain text", "not gzip"),
                                        (gzip.compress(b"<a:a> <a:b> <a:c> .\n", mtime=0), "not a semreg backup")],
                         ids=["empty", "plain text", "gzipped other RDF"])
def test_what_is_not_a_backup_says_so(data, says):
    with pytest.raises(BadBackup, match=says):
        read(io.BytesIO(data))


# -- read as it streams, within limits ------------------------------------------------------------------
def lines_of(n: int = 3) -> list[bytes]:
    return gzip.decompress(backup(n)).splitlines(keepends=True)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 1 << 20), max_size=10))
def test_wherever_the_stream_is_cut_the_same_backup_is_read(cuts):
    data = backup(40)
    at = sorted({c % (len(data) + 1) for c in cuts})
    reading = Reading(DEFAULT_LIMITS)
    for a, b in zip([0, *at], [*at, len(data)]):
        reading.feed(data[a:b])
    with reading.finish() as contents, read(io.BytesIO(data)) as whole:
        assert list(contents.records) == list(whole.records) and contents.counts() == whole.counts()


def test_a_line_past_the_line_limit_is_refused_naming_it():
    lines = lines_of()
    at = next(n for n, line in enumerate(lines) if b'#service> "s"' in line)
    lines[at] = lines[at].replace(b'"s"', b'"' + b"s" * 5000 + b'"')
    with pytest.raises(BadBackup, match=f"line {at + 1} of the backup is longer than 4096 bytes") as refused:
        read(io.BytesIO(gzip.compress(b"".join(lines))), limits=Limits(1 << 30, 4096))
    assert refused.value.extra == {"limit": "restore-line-limit", "limit_bytes": 4096, "line": at + 1}


def test_a_registration_whose_entries_pass_the_line_limit_is_refused_naming_it():
    rec = dict(REC, id="big", tags=[[f"http://e/A{k}", "http://e/p", "http://e/B"] for k in range(200)])
    data = b"".join(encode([(rec, 1)], [], {}, 1764580000.0))
    with pytest.raises(BadBackup, match="registration of instance 'big' .* holds more than 4096 bytes"):
        read(io.BytesIO(data), limits=Limits(1 << 30, 4096))
    with read(io.BytesIO(data), limits=Limits(1 << 30, 1 << 20)) as contents:
        assert len(next(iter(contents.records))[0]["tags"]) == 200


def test_a_line_repeated_is_kept_once():
    lines = lines_of(1)
    tag = next(line for line in lines if b"#tag>" in line)
    at = lines.index(tag)
    data = gzip.compress(b"".join(lines[:at] + [tag] * 20_000 + lines[at:]))
    with read(io.BytesIO(data)) as contents:
        assert next(iter(contents.records))[0]["tags"] == REC["tags"]


@pytest.mark.parametrize("field, says", [("port", "instance a0: it has no port"),
                                          ("revision", "lines about instance 'a0' .* apart from its registration")])
def test_lines_of_a_registration_apart_from_it_are_refused_naming_it(field, says):
    lines = lines_of(3)
    head = b"<urn:semreg:instance:a0> <https://w3id.org/semreg#" + field.encode()
    stray = next(line for line in lines if line.startswith(head))
    lines.remove(stray)
    lines.insert(len(lines) - 7, stray)  # among the last registration's lines
    with pytest.raises(BadBackup, match=says):
        read(io.BytesIO(gzip.compress(b"".join(lines))))


def test_each_record_is_checked_as_it_is_read():
    seen = []

    def check(rec):
        seen.append(rec["id"])
        if rec["id"] == "a2":
            raise BadRequest("a2 is not one.")
    with pytest.raises(BadRequest, match="a2 is not one"):
        read(io.BytesIO(backup(5)), check=check)
    assert seen == ["a0", "a1", "a2"]
