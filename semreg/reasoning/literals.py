"""The data value of a literal, for OWL 2 RL's `dt-eq` (literals with the same data value are the same).

`value(datatype, lexical, language)` is a key equal for two literals exactly when OWL 2's datatype map
(OWL 2 Structural Specification §4) gives them the same data value, or None when the literal is
ill-typed (its lexical form is outside its datatype: `dt-not-type`, an inconsistency, left out) or its
datatype's values are not compared here (`rdf:HTML`, `rdfs:Literal`, `xsd:time`, `xsd:date`, datatypes
outside RL): such a literal is the same only as itself, and different from none (`dt-diff`). So a key
must never tell two equal values apart, or dt-diff would make them different.

- `xsd:decimal`, `xsd:integer` and the integers below it share one value space (`owl:real`'s numbers):
  `"42"^^xsd:int`, `"+042"^^xsd:integer` and `42.0` are one value; bounds (`xsd:byte` is -128..127, ...)
  are checked.
- `xsd:float` and `xsd:double` are two spaces of their own, apart from the reals and from each other;
  `-0` and `+0` are distinct values, and NaN is no value's equal.
- `xsd:string` and the types below it, and `rdf:PlainLiteral` without a language, are strings;
  `rdf:PlainLiteral` with a language and `rdf:langString` are (text, language in lower case).
- `xsd:dateTime` and `xsd:dateTimeStamp` are instants when they carry a time zone (compared in UTC),
  and local times apart from those when they do not.
- `xsd:boolean` (`1` is `true`), `xsd:hexBinary` and `xsd:base64Binary` (the octets, each space its
  own), `xsd:anyURI` (its whitespace collapsed).
- `rdf:XMLLiteral` (RDF 1.1: a DOM fragment) by its canonical XML with comments (C14N 2.0), which two
  equal fragments share (attribute order, `<a/>` and `<a></a>`, character references are not part of
  the value); content that is not well-formed XML alone (an undeclared prefix, an entity) has none.
"""
from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from xml.etree.ElementTree import ParseError, canonicalize

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"

_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
_INTEGER = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?((\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|INF)|NaN")
_DATETIME = re.compile(r"-?\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
_BOUNDS: dict[str, tuple[int | None, int | None]] = {
    "integer": (None, None), "long": (-2**63, 2**63 - 1), "int": (-2**31, 2**31 - 1), "short": (-2**15, 2**15 - 1),
    "byte": (-128, 127), "nonNegativeInteger": (0, None), "positiveInteger": (1, None),
    "nonPositiveInteger": (None, 0), "negativeInteger": (None, -1), "unsignedLong": (0, 2**64 - 1),
    "unsignedInt": (0, 2**32 - 1), "unsignedShort": (0, 2**16 - 1), "unsignedByte": (0, 255),
}
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
_XML = RDF + "XMLLiteral"
_STRINGS = frozenset(XSD + n for n in ("string", "normalizedString", "token", "language", "Name", "NCName", "NMTOKEN"))


def value(datatype: str, lexical: str, language: str | None = None) -> Hashable | None:
    """The data value of a literal as a comparable key, or None (see the module)."""
    if language:
        return ("lang", lexical, language.lower())
    if datatype in _STRINGS:
        return ("string", lexical)
    read = _READERS.get(datatype)
    if read is None:
        return None
    try:
        return read(datatype, lexical if datatype == _XML else lexical.strip())  # XML's whitespace is content
    except (ValueError, InvalidOperation, binascii.Error, OverflowError, ParseError):
        return None


def _integer(datatype: str, lexical: str) -> Hashable | None:
    if not _INTEGER.fullmatch(lexical):
        return None
    n = int(lexical)
    low, high = _BOUNDS[datatype[len(XSD):]]
    if (low is not None and n < low) or (high is not None and n > high):
        return None
    return ("real", Decimal(n))


def _decimal(datatype: str, lexical: str) -> Hashable | None:
    return ("real", Decimal(lexical)) if _DECIMAL.fullmatch(lexical) else None


def _double(datatype: str, lexical: str) -> Hashable | None:
    if not _FLOAT.fullmatch(lexical) or lexical == "NaN":
        return None
    x = float(lexical)
    if datatype == XSD + "float":
        x = struct.unpack("f", struct.pack("f", x))[0]  # its nearest single-precision value
    return (datatype, x.hex())  # hex keeps -0 and +0 apart


def _boolean(datatype: str, lexical: str) -> Hashable | None:
    truth = _BOOLEANS.get(lexical)
    return None if truth is None else ("boolean", truth)


def _datetime(datatype: str, lexical: str) -> Hashable | None:
    if not _DATETIME.fullmatch(lexical):
        return None
    at = datetime.fromisoformat(lexical)
    if at.tzinfo is None:
        return None if datatype == XSD + "dateTimeStamp" else ("local time", at)
    return ("instant", at.astimezone(UTC))


def _plain(datatype: str, lexical: str) -> Hashable | None:
    if "@" not in lexical:
        return None
    text, _, tag = lexical.rpartition("@")
    return ("lang", text, tag.lower()) if tag else ("string", text)


def _hex(datatype: str, lexical: str) -> Hashable | None:
    return ("hexBinary", bytes.fromhex(lexical)) if len(lexical) % 2 == 0 else None


def _base64(datatype: str, lexical: str) -> Hashable | None:
    return ("base64Binary", base64.b64decode("".join(lexical.split()), validate=True))


def _any_uri(datatype: str, lexical: str) -> Hashable | None:
    return ("anyURI", " ".join(lexical.split()))


def _xml(datatype: str, lexical: str) -> Hashable | None:
    return ("XMLLiteral", canonicalize(f"<_>{lexical}</_>", with_comments=True))


_READERS: dict[str, Callable[[str, str], Hashable | None]] = {
    **{XSD + n: _integer for n in _BOUNDS}, XSD + "decimal": _decimal, XSD + "double": _double,
    XSD + "float": _double, XSD + "boolean": _boolean, XSD + "dateTime": _datetime, XSD + "dateTimeStamp": _datetime,
    RDF + "PlainLiteral": _plain, XSD + "hexBinary": _hex, XSD + "base64Binary": _base64, XSD + "anyURI": _any_uri,
    _XML: _xml,
}
