"""Consul's tags on semreg's instances. A tag that reads as a triple pattern in the registry's prefixes (three
terms, `v:Truck v:hasFuel v:Diesel`, or one bracketed IRI) becomes a semantic tag, matched by meaning; any other
(`blue`, `traefik.enable=true`, `env:prod`, which a single CURIE would be mistaken for) stays a plain tag.

Every Consul tag, in the order given, is kept in the instance's meta under `TAGS_KEY` (a JSON list): Consul reads
`Tags` back as it was written and filters on it by exact text, which the semantic tags (stored as full IRIs)
could not give. Consul reserves meta keys beginning with `consul-` for itself, so no Consul client's own meta
can collide with it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import orjson

from semreg.errors import BadRequest
from semreg.rdf.terms import PrefixMap, parse_tag
from semreg.registry.targets import CONSUL_TAGS_KEY as TAGS_KEY

RESERVED_PREFIX = "consul-"


def is_pattern(tag: str, prefixes: PrefixMap) -> bool:
    """Whether a Consul tag reads as a triple pattern (three terms that parse, or one `<IRI>`)."""
    parts = tag.split()
    if not (len(parts) == 3 or (len(parts) == 1 and parts[0].startswith("<") and parts[0].endswith(">"))):
        return False
    try:
        parse_tag(tag, prefixes)
    except BadRequest:
        return False
    return True


def semantic(tags: Iterable[str], prefixes: PrefixMap) -> list[str]:
    """Those of `tags` that are triple patterns, in order."""
    return [t for t in tags if is_pattern(t, prefixes)]


def kept(tags: list[str]) -> str:
    """The Consul tags as the meta value that keeps them."""
    return orjson.dumps(tags).decode()


def consul_tags(meta: Mapping[str, str], tags: Iterable[str]) -> list[str]:
    """An instance's tags as Consul shows them: as a Consul client wrote them, else (an instance registered through
    semreg's own API) its semantic tags as given, each the text of its full IRIs."""
    raw = meta.get(TAGS_KEY)
    if raw is not None:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, list) and all(isinstance(t, str) for t in value):
            return value
    return list(tags)


def own_meta(meta: Mapping[str, str]) -> dict[str, str]:
    """The meta a Consul client sees: its own, without the keys this mapping keeps."""
    return {k: v for k, v in meta.items() if k != TAGS_KEY}
