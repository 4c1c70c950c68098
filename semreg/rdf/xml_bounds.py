"""An RDF/XML document read once by expat before pyoxigraph parses it, so that the parse stays in bounds.

pyoxigraph's RDF/XML parser expands a document's internal entities without a bound (a 1 KiB "billion laughs"
held 1 GB at seven levels of ten, and would hold 100 GB at nine), and takes time quadratic in how deep its
elements nest (a description nested 40,000 deep, 2 MB, took 15 s; 100,000 deep, minutes; 100 deep is ~2 s for
a 32 MiB document, twice a flat one). expat (`pyexpat`, in C) reads the document first and counts, through
a handler per element and per run of text: how deep elements nest (past `depth`: refused) and how much text
and attribute values the document expands to, entities included (past `EXPANSION` times the document plus
`EXPANSION_FLOOR`: refused; a namespace IRI abbreviated as an entity, as Protégé writes, expands a document
two or three times). expat's own amplification limit refuses a billion laughs too. Neither parser reads
external entities. The read costs about what pyoxigraph's parse does: 1.2 s for a 36 MiB document of
480,000 triples, which pyoxigraph parses in 0.9 s (and semreg takes in, with its own work, in ~4 s).

Every refusal is a `BadRequest` naming the line.
"""
from __future__ import annotations

import pyexpat

from semreg.errors import BadRequest

DEPTH = 100  # the default of --ontology-xml-depth
EXPANSION = 10
EXPANSION_FLOOR = 1024 * 1024


class _Past(Exception):
    """A bound passed; `what` says which, for the message."""

    def __init__(self, what: str) -> None:
        self.what = what


class _Counter:
    def __init__(self, depth: int, most_text: int) -> None:
        self.depth_limit = depth
        self.most_text = most_text
        self.depth = 0
        self.text = 0

    def start(self, name: str, attributes: list[str]) -> None:
        self.depth += 1
        if self.depth > self.depth_limit:
            raise _Past("depth")
        self.text += sum(map(len, attributes))
        if self.text > self.most_text:
            raise _Past("text")

    def end(self, name: str) -> None:
        self.depth -= 1

    def chars(self, data: str) -> None:
        self.text += len(data)
        if self.text > self.most_text:
            raise _Past("text")


def check(body: bytes, media_type: str, depth: int = DEPTH) -> None:
    """`body` as XML within the bounds (see the module's docstring), or a 400 saying which it passes and where."""
    most_text = EXPANSION * len(body) + EXPANSION_FLOOR
    counter = _Counter(depth, most_text)
    parser = pyexpat.ParserCreate(encoding="UTF-8")  # an upload is UTF-8 text, whatever it declares
    parser.buffer_text = True
    parser.ordered_attributes = True
    parser.StartElementHandler = counter.start
    parser.EndElementHandler = counter.end
    parser.CharacterDataHandler = counter.chars
    try:
        parser.Parse(body, True)
    except _Past as past:
        line = parser.CurrentLineNumber
        if past.what == "depth":
            raise BadRequest(f"the {media_type} document nests its elements more than {depth} deep (line {line}); "
                             f"the limit is --ontology-xml-depth.", line=line, limit="ontology-xml-depth") from None
        raise BadRequest(f"the {media_type} document's entities expand it to more than {most_text} characters of "
                         f"text (line {line}), {EXPANSION} times its size and more; write the text out instead.",
                         line=line) from None
    except pyexpat.ExpatError as exc:
        raise BadRequest(f"the {media_type} document does not parse: {pyexpat.ErrorString(exc.code)} (line "
                         f"{exc.lineno}, column {exc.offset + 1}).", line=exc.lineno, column=exc.offset + 1) from None
