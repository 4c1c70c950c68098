"""A backup read as it streams in (`semreg.storage.backup` writes it), in memory that does not grow with the file.

    reading = Reading(limits, check=...)
    reading.feed(chunk)            # as the bytes arrive, from a worker thread: the work grows with them
    contents = reading.finish()    # a `Contents`, or `BadBackup` naming where the file breaks

The bytes are inflated and cut into lines as they come (`semreg.storage.lines`, which holds them to the two
limits), and each block of whole lines is parsed as N-Quads on its own: a line is a quad, and blank node labels
are the file's, so where a block ends changes nothing. The quads are put together into records as they come:
a registration (`Reader`), an ontology, a prefix, a saved query. When the next record's lines start, the one
before is whole: it is checked (the registry's own check of a registration, `check`, when given) and put
aside in the `Contents`' spills. What is held at once is one step of inflated bytes, one line and one record,
whatever the size of the file; a line read twice is kept once. A registration's tag and meta entries are
held to the line limit too, as one line would be. The lines of an ontology's own graph are not kept (the
ontology is restored from its source), nor any other graph's.

Each record's lines come together, as `semreg backup` writes them: lines of a registration found apart from
it are refused, naming the instance. The summary comes last; a file without it was cut short.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import orjson
import pyoxigraph as ox

from semreg.config import Settings
from semreg.rdf.terms import SR
from semreg.storage.backup import HEADER, ONTOLOGY_NODE, PREFIX_NODE, QUERY_NODE, SUMMARY, BadBackup, Contents
from semreg.storage.lines import Damaged, GzipLines, LimitPassed, Limits, NotGzip
from semreg.storage.registrations import Reader
from semreg.storage.store import INSTANCE_PREFIX, RECORDS, REGISTRY

CHUNK = 64 * 1024  # bytes of a file read at once
KINDS = {ONTOLOGY_NODE: ("ontology", ("name", "mediaType", "uploadedAt", "source")),
         PREFIX_NODE: ("prefix", ("name", "namespace")), QUERY_NODE: ("query", ("name", "owner", "json"))}
_KEPT = {kind: {SR + name: name for name in names} for kind, names in KINDS.values()}
_SUMMARY = {SR + "instances": "instances", SR + "ontologies": "ontologies", SR + "prefixes": "prefixes",
            SR + "queries": "queries", SR + "takenAt": "taken_at"}
_PARSER_AT = re.compile(r"^Parser error at line \d+(?: between columns \d+ and \d+| column \d+)?: ")

Check = Callable[[dict[str, Any]], None]  # raises a BadRequest for a record that is not a registration


def limits_of(settings: Settings) -> Limits:
    return Limits(settings.restore_inflated_limit_bytes, settings.restore_line_limit_bytes)


DEFAULT_LIMITS = limits_of(Settings())


@dataclass
class _Record:
    """The record whose lines are being read: a registration (its IRI) or an ontology, prefix or query (its name)."""

    kind: str
    key: str
    near_line: int  # the first line of the block it started in
    reader: Reader | None = None
    fields: dict[str, str] = field(default_factory=dict)


class Reading:
    """One backup read as it streams: `feed` the gzip bytes in pieces of any size, then `finish`."""

    def __init__(self, limits: Limits, check: Check | None = None, progress: Callable[[int], None] | None = None) -> None:
        self.limits = limits
        self.contents = Contents()
        self.bytes = 0  # compressed bytes fed so far
        self._lines = GzipLines(limits)
        self._check = check
        self._progress = progress
        self._open: _Record | None = None
        self._summary: dict[str, str] = {}
        self._headed = False
        self._block = 0  # the first line of the block being parsed

    def feed(self, data: bytes) -> None:
        self.bytes += len(data)
        with self._named():
            for first, text in self._lines.feed(data):
                self._parse(first, text)
        if self._progress is not None:
            self._progress(self.bytes)

    def finish(self) -> Contents:
        """The whole backup, checked: its summary there and matching what it holds."""
        with self._named():
            last = self._lines.end()
            if last is not None:
                self._parse(*last)
        lines = self._lines.lines
        if not self.bytes:
            raise BadBackup("the backup is empty.", line=0)
        if not self._headed:
            raise BadBackup("this is not a semreg backup: its first line is not '# semreg backup ...'.", line=1)
        if "taken_at" not in self._summary:  # the summary's last line
            raise BadBackup(f"the backup is incomplete: it ends after line {lines} without its closing summary "
                            f"(<urn:semreg:backup>), so the file was cut short.", line=lines + 1)
        self._close()
        found = self.contents
        found.taken_at, found.lines = self._summary["taken_at"], lines
        for what, n in found.counts().items():
            declared = self._summary.get(what, "0" if what == "queries" else None)
            if declared != str(n):
                raise BadBackup(f"the backup is incomplete: its summary says {declared} {what}, but it holds {n}.")
        return found

    def close(self) -> None:
        self.contents.close()

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        """What the lines refuse, said of a backup."""
        try:
            yield
        except NotGzip:
            raise BadBackup("this is not a semreg backup: it is not gzip-compressed.", line=0) from None
        except Damaged as exc:
            line = self._lines.lines
            raise BadBackup(f"the file ends early after line {line}, or is damaged there ({exc.message}); it is not a "
                            f"complete backup.", line=line + 1) from None
        except LimitPassed as exc:
            raise BadBackup(exc.message, **exc.extra) from None

    # -- lines to quads ---------------------------------------------------------------------------------
    def _parse(self, first: int, text: bytes) -> None:
        if not self._headed:
            if not text.startswith(HEADER):
                raise BadBackup("this is not a semreg backup: its first line is not '# semreg backup ...'.", line=1)
            self._headed = True
        self._block = first
        # A quad is a set member: a line written twice says nothing more. Dropping the lines a block repeats and
        # its empty ones before parsing, at C speed, makes a body of one line repeated, or of newlines, cost about
        # its inflating only (the parser takes ~0.1 µs an empty line, ~2 µs a quad).
        if not text.strip():
            return
        compact = text
        while b"\n\n" in compact:
            compact = compact.replace(b"\n\n", b"\n")
        lines = compact.split(b"\n")
        written = dict.fromkeys(lines)
        written.pop(b"", None)
        if not written:
            return
        try:
            for quad in ox.parse(b"\n".join(written), format=ox.RdfFormat.N_QUADS):
                self._add(quad)
        except SyntaxError as exc:
            line = first + text.split(b"\n").index(list(written)[(exc.lineno or 1) - 1])
            raise BadBackup(f"the backup is corrupt at line {line}: {_PARSER_AT.sub('', exc.msg or '')}", line=line) from None
        except MemoryError as exc:  # pyoxigraph's: a term longer than its parser's buffer (16 MiB)
            line = first + _longest(text)
            raise BadBackup(f"the backup is corrupt at line {line}: it holds a term longer than the RDF parser reads "
                            f"({exc}).", line=line) from None
        except (ValueError, OSError) as exc:
            raise BadBackup(f"the backup is corrupt in the lines from {first}: {exc}", line=first) from None

    def _add(self, quad: ox.Quad) -> None:
        g, s = quad.graph_name, quad.subject
        if g == REGISTRY or g == RECORDS and type(s) is ox.NamedNode and s.value.startswith(INSTANCE_PREFIX):
            self._registration(quad)
        elif g == RECORDS and type(s) is ox.NamedNode and type(quad.object) is ox.Literal:
            self._other(s.value, quad.predicate.value, quad.object.value)

    def _registration(self, quad: ox.Quad) -> None:
        s = quad.subject
        if type(s) is ox.NamedNode and s.value.startswith(INSTANCE_PREFIX):
            record = self._start("instance", s.value)
        elif self._open is not None and self._open.kind == "instance":
            record = self._open  # a tag's or meta entry's node: read with the registration it comes with
        else:
            return  # a node no registration is read with: nothing would use it
        reader = record.reader
        assert reader is not None
        reader.add(quad)
        if reader.kept > self.limits.line_bytes:
            iid = record.key[len(INSTANCE_PREFIX):]
            raise BadBackup(f"the registration of instance '{iid}' (near line {record.near_line}) holds more than "
                            f"{self.limits.line_bytes} bytes of tags and meta entries, the limit "
                            f"(--restore-line-limit).", instance=iid, limit="restore-line-limit",
                            limit_bytes=self.limits.line_bytes)

    def _other(self, s: str, p: str, o: str) -> None:
        """A line of the summary, an ontology, a prefix or a saved query: only the fields they have are kept."""
        if s == SUMMARY.value:
            if p in _SUMMARY:
                self._summary[_SUMMARY[p]] = o
            return
        for node, (kind, _) in KINDS.items():
            if s.startswith(node):
                record = self._start(kind, s[len(node):])
                name = _KEPT[kind].get(p)
                if name is not None:
                    record.fields[name] = o
                return

    # -- records ----------------------------------------------------------------------------------------
    def _start(self, kind: str, key: str) -> _Record:
        record = self._open
        if record is None or record.key != key or record.kind != kind:
            self._close()
            record = self._open = _Record(kind, key, self._block, Reader() if kind == "instance" else None)
        return record

    def _close(self) -> None:
        """The record read last is whole: checked, and put aside."""
        record, self._open = self._open, None
        if record is not None:
            {"instance": self._registration_read, "ontology": self._ontology_read, "prefix": self._prefix_read,
             "query": self._query_read}[record.kind](record)

    def _registration_read(self, record: _Record) -> None:
        assert record.reader is not None
        found, problems = record.reader.records()
        if problems:
            raise BadBackup(f"the backup holds a registration that cannot be read: {problems[0]}.",
                            instance=problems[0].instance)
        if not found:
            iid = record.key[len(INSTANCE_PREFIX):]
            raise BadBackup(f"the backup has lines about instance '{iid}' (near line {record.near_line}) apart from its "
                            f"registration; a registration's lines come together, as semreg backup writes them.",
                            instance=iid, line=record.near_line)
        for rec, revision in found:
            if self._check is not None:
                self._check(rec)
            self.contents.records.add((rec, revision))

    def _ontology_read(self, record: _Record) -> None:
        f = record.fields
        missing = [name for name in ("name", "mediaType", "source") if name not in f]
        if missing:
            raise BadBackup(f"the backup's ontology '{record.key}' has no {missing[0]}.")
        self.contents.ontologies.add((f["name"], f["mediaType"], f.get("uploadedAt", ""), f["source"]))

    def _prefix_read(self, record: _Record) -> None:
        if "namespace" not in record.fields:
            raise BadBackup(f"the backup's prefix '{record.key}' has no namespace.")
        self.contents.prefixes.add((record.fields.get("name", record.key), record.fields["namespace"]))

    def _query_read(self, record: _Record) -> None:
        name = record.key
        try:
            query = orjson.loads(record.fields["json"])
        except (KeyError, orjson.JSONDecodeError):
            raise BadBackup(f"the backup's saved query '{name}' has no readable query (sr:json).") from None
        if not isinstance(query, dict):
            raise BadBackup(f"the backup's saved query '{name}' is not a JSON object.")
        self.contents.queries.add((record.fields.get("name", name), record.fields.get("owner"), query))


def _longest(text: bytes) -> int:
    """The index (from 0) of the longest line of `text`."""
    lengths = [len(line) for line in text.split(b"\n")]
    return lengths.index(max(lengths))


def read(source: IO[bytes], progress: Callable[[int], None] | None = None, limits: Limits = DEFAULT_LIMITS,
         check: Check | None = None) -> Contents:
    """A whole backup file (`source`, at its start), read `CHUNK` bytes at a time; `progress(n)` is told the
    compressed bytes read so far. Close the `Contents` once done with it."""
    reading = Reading(limits, check, progress)
    try:
        while chunk := source.read(CHUNK):
            reading.feed(chunk)
        return reading.finish()
    except BaseException:
        reading.close()
        raise
