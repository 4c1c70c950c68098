"""The backup file (`semreg.storage.backup`): what `encode` writes `read` reads back whole, any triple store
reads it, and a file that is not whole is refused naming the line where it breaks."""
from __future__ import annotations

import gzip
import io

import pyoxigraph as ox
import pytest

from semreg.storage.backup import BadBackup, OntologyCopy, encode, read

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
    assert contents.records[0] == (REC | {"id": "a0"}, 1000)
    assert contents.ontologies[0].source == SOURCE and contents.prefixes == {"zz": "http://zz/"}


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
