"""The catalog, health and status reads. A service name answers the instances registered under it, or, when it
names a saved query the caller may see, the instances that query finds by meaning (each saying its degree and
distance in its `Meta`): a saved query's name wins, since it was chosen for this. Every read of services blocks
on the registry's topic of that same read (`semreg.consul.blocking`), so it wakes when its own answer changes.

`?passing` keeps the instances whose checks all pass (`up`), `?tag=` (repeatable) those carrying every tag
named, by exact text, as Consul compares tags; then `?filter=` the entries built for the answer
(`semreg.consul.filters`), checked before the read blocks and applied as request work.

Each answer is built once while it stands, for each shape asked of it (endpoint, `passing`, `tag`, `filter`,
gzip or not), and kept beside the registry's own body of it (`WatchHub.shaped`): a repeated read sends bytes.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import READ, Principal
from semreg.consul import blocking, encoding, entries, filters
from semreg.consul.access import NAMESPACE_HEADER, admit, environment, selector
from semreg.consul.agent import filter_of, node_of
from semreg.http.state import app_state
from semreg.registry.watch import Topic
from semreg.work.lane import paced

FALSE = ("0", "false", "False", "no")
PLAN = "semreg.consul.plan"  # where a read leaves which topic answered it and in which shape (`short_path`)


async def services(request: Request) -> Response:
    principal = admit(request, READ)
    wanted = filter_of(request, filters.CATALOG_SERVICE)
    state = app_state(request)
    chosen = selector(request, principal)
    topic = await blocking.read(request, lambda: state.coordinator.instances(None, True, chosen))
    node = node_of(request)

    def build(payload: Any) -> bytes:
        items = payload.items
        if wanted is not None:  # Consul filters the services' entries, then lists the names and tags of those kept
            items = wanted.keep(items, lambda inst: entries.catalog(inst, node))
        found: dict[str, dict[str, None]] = {}
        for inst in paced(items):
            found.setdefault(inst.reg.service, {}).update(dict.fromkeys(entries.consul_tags_of(inst)))
        return orjson.dumps({name: list(tags) for name, tags in sorted(found.items())})
    return await shaped(request, topic, ("consul-services", text_of(wanted)), build, wanted)


async def catalog_service(request: Request) -> Response:
    node = node_of(request)
    topic, by_meaning, tags, wanted = await named(request, filters.CATALOG_SERVICE)

    def build(payload: Any) -> bytes:
        built = [entries.catalog(inst, node, match, topic.index) for inst, match in rows(payload, by_meaning, tags, False)]
        return orjson.dumps(built if wanted is None else wanted.keep(built))
    return await shaped(request, topic, ("consul-catalog", node, topic.index, tags, text_of(wanted)), build, wanted)


async def health_service(request: Request) -> Response:
    node = node_of(request)
    topic, by_meaning, tags, wanted = await named(request, filters.HEALTH_ENTRY)
    passing = request.query_params.get("passing") is not None and request.query_params["passing"] not in FALSE

    def build(payload: Any) -> bytes:
        built = [entries.health(inst, node, match, topic.index) for inst, match in rows(payload, by_meaning, tags, passing)]
        return orjson.dumps(built if wanted is None else wanted.keep(built))
    return await shaped(request, topic, ("consul-health", node, topic.index, tags, passing, text_of(wanted)), build,
                        wanted)


async def nodes(request: Request) -> Response:
    principal = admit(request, READ)
    wanted = filter_of(request, filters.NODE)
    coordinator = app_state(request).coordinator
    chosen = selector(request, principal)
    topic = await blocking.read(request, lambda: coordinator.instances(None, False, chosen))
    found = [node_of(request).entry(topic.index)]
    return json(found if wanted is None else wanted.keep(found), topic.index)


async def leader(request: Request) -> Response:
    admit(request, None)
    return json(node_of(request).peer, None)


async def peers(request: Request) -> Response:
    admit(request, None)
    return json([node_of(request).peer], None)


async def named(request: Request, schema: dict[str, Any]) \
        -> tuple[Topic, bool, tuple[str, ...], filters.Filter | None]:
    """The read of a service name: its topic after any blocking, whether it answers by meaning (its payload then
    a discovery's result, with each instance's match), the tags asked for, and the request's `filter`, checked
    against `schema` before the read blocks."""
    principal = admit(request, READ)
    wanted = filter_of(request, schema)
    name = request.path_params["name"]
    topic_of, by_meaning = source(request, principal, name)
    topic = await blocking.read(request, topic_of)
    return topic, by_meaning, tuple(sorted(set(request.query_params.getlist("tag")))), wanted


def rows(payload: Any, by_meaning: bool, wanted: tuple[str, ...], passing: bool) -> Iterator[tuple[Any, Any]]:
    """The instances of a service name's answer, with their matches (None for a name's own instances): those
    carrying every tag `wanted`, and only the passing ones if asked."""
    found: Iterable[tuple[Any, Any]] = zip(payload.members, payload.best) if by_meaning \
        else ((inst, None) for inst in payload.items)
    for inst, match in paced(found):
        if passing and not entries.passing(inst):
            continue
        if wanted and not set(wanted) <= set(entries.consul_tags_of(inst)):
            continue
        yield inst, match


def text_of(wanted: filters.Filter | None) -> str | None:
    return None if wanted is None else wanted.text


async def shaped(request: Request, topic: Topic, key: Hashable, build: Callable[[Any], bytes],
                 wanted: filters.Filter | None = None) -> Response:
    """The answer of `topic` in Consul's shape `key`, built once while the answer stands (`WatchHub.shaped`), and
    compressed once too when the client asks for gzip (`semreg.consul.encoding`). A filter's cost grows with its
    length as well as the entries, so an answer built with one is always built as request work."""
    hub = app_state(request).coordinator.hub
    content = await hub.shaped(topic, key, build, as_work=wanted is not None)
    request.scope[PLAN] = (topic.key, key)
    if len(content) < encoding.MIN_BYTES or not encoding.accepts_gzip(request.headers.get("accept-encoding")):
        return Answer(content, topic.index)
    packed = await hub.shaped(topic, (key, encoding.GZIP), lambda payload: encoding.compressed(content))
    return Answer(packed, topic.index, gzipped=True)


def source(request: Request, principal: Principal, name: str) -> tuple[Callable[[], Awaitable[Topic]], bool]:
    """What answers a service name, and whether it answers by meaning (a saved query's discovery)."""
    state = app_state(request)
    saved = state.knowledge.queries.by_name.get(name)
    if saved is not None and principal.sees(saved.environment):
        asked = request.query_params.get("ns") or request.headers.get(NAMESPACE_HEADER)
        # asked with the instances' tags: another member's copies carry them only then, and Consul shows Tags
        q = dataclasses.replace(state.questions.of(saved, environment(request) if asked else None), tags=True)
        principal.require_environment(q.selector.environment)
        return (lambda: state.coordinator.discover(q)), True
    chosen = selector(request, principal)
    return (lambda: state.coordinator.instances(name, True, chosen)), False


def json(content: Any, index: int | None) -> Response:
    return body(orjson.dumps(content), index)


def body(content: bytes, index: int | None) -> Response:
    return Response(content, media_type="application/json",
                    headers=blocking.headers(index) if index is not None else None)


_ANSWER_HEADERS = [(b"content-type", b"application/json"), (b"vary", b"Accept-Encoding"),
                   *((k.lower().encode(), v.encode()) for k, v in blocking.headers(0).items() if k != "X-Consul-Index")]


class Answer(Response):
    """A kept answer of a read of services, sent as it is: its headers are written once here, not checked and
    encoded a request at a time (what a repeated read is left spending its time on). It varies by
    `Accept-Encoding` whether compressed or not: a cache between must not hand one client's form to another."""

    def __init__(self, content: bytes, index: int, gzipped: bool = False) -> None:
        self.status_code = 200
        self.background = None
        self.body = content
        self.raw_headers = [(b"content-length", str(len(content)).encode()), (b"x-consul-index", str(index).encode()),
                            *_ANSWER_HEADERS]
        if gzipped:
            self.raw_headers.append((b"content-encoding", b"gzip"))
