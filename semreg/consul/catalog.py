"""The catalog, health and status reads. A service name answers the instances registered under it, or, when it
names a saved query the caller may see, the instances that query finds by meaning (each saying its degree and
distance in its `Meta`): a saved query's name wins, since it was chosen for this. Every read of services blocks
on the registry's topic of that same read (`semreg.consul.blocking`), so it wakes when its own answer changes.

`?passing` keeps the instances whose checks all pass (`up`), `?tag=` (repeatable) those carrying every tag
named, by exact text, as Consul compares tags; then `?filter=` the entries built for the answer
(`semreg.consul.filters`), checked before the read blocks and applied as request work.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import READ, Principal
from semreg.consul import blocking, entries, filters
from semreg.consul.access import NAMESPACE_HEADER, admit, environment, selector
from semreg.consul.agent import filter_of, node_of
from semreg.http.state import app_state
from semreg.registry.watch import Topic

FALSE = ("0", "false", "False", "no")


async def services(request: Request) -> Response:
    principal = admit(request, READ)
    wanted = filter_of(request, filters.CATALOG_SERVICE)
    coordinator = app_state(request).coordinator
    chosen = selector(request, principal)
    topic = await blocking.read(request, lambda: coordinator.instances(None, True, chosen))
    items = topic.payload.items
    if wanted is not None:  # Consul filters the service's entries, then lists names and tags of those kept
        node = node_of(request)
        items = await app_state(request).lane.run(wanted.keep, items, lambda inst: entries.catalog(inst, node),
                                                  what="this filter")
    found: dict[str, dict[str, None]] = {}
    for inst in items:
        found.setdefault(inst.reg.service, {}).update(dict.fromkeys(entries.consul_tags_of(inst)))
    return json({name: list(tags) for name, tags in sorted(found.items())}, topic.index)


async def catalog_service(request: Request) -> Response:
    node = node_of(request)
    topic, rows, wanted = await named(request, filters.CATALOG_SERVICE)
    built = [entries.catalog(inst, node, match, topic.index) for inst, match in rows]
    return json(await kept(request, wanted, built), topic.index)


async def health_service(request: Request) -> Response:
    node = node_of(request)
    topic, rows, wanted = await named(request, filters.HEALTH_ENTRY)
    if request.query_params.get("passing") is not None and request.query_params["passing"] not in FALSE:
        rows = [(inst, match) for inst, match in rows if entries.passing(inst)]
    built = [entries.health(inst, node, match, topic.index) for inst, match in rows]
    return json(await kept(request, wanted, built), topic.index)


async def nodes(request: Request) -> Response:
    principal = admit(request, READ)
    wanted = filter_of(request, filters.NODE)
    coordinator = app_state(request).coordinator
    chosen = selector(request, principal)
    topic = await blocking.read(request, lambda: coordinator.instances(None, False, chosen))
    return json(await kept(request, wanted, [node_of(request).entry(topic.index)]), topic.index)


async def leader(request: Request) -> Response:
    admit(request, None)
    return json(node_of(request).peer, None)


async def peers(request: Request) -> Response:
    admit(request, None)
    return json([node_of(request).peer], None)


async def named(request: Request, schema: dict[str, Any]) -> tuple[Topic, list[tuple[Any, Any]], filters.Filter | None]:
    """The read of a service name: its topic after any blocking, and its instances with their matches (None for
    a name's own instances), filtered by `tag`; and the request's `filter`, checked against `schema` before the
    read blocks, for the caller to apply to the entries it builds."""
    principal = admit(request, READ)
    chosen = filter_of(request, schema)
    name = request.path_params["name"]
    topic_of, by_meaning = source(request, principal, name)
    topic = await blocking.read(request, topic_of)
    payload = topic.payload
    rows: list[tuple[Any, Any]] = list(zip(payload.members, payload.best)) if by_meaning \
        else [(inst, None) for inst in payload.items]
    tags = request.query_params.getlist("tag")
    if tags:
        rows = [(inst, m) for inst, m in rows if set(tags) <= set(entries.consul_tags_of(inst))]
    return topic, rows, chosen


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


async def kept(request: Request, wanted: filters.Filter | None, built: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries the request's filter keeps (all of them without one), found as request work."""
    return built if wanted is None else await app_state(request).lane.run(wanted.keep, built, what="this filter")


def json(content: Any, index: int | None) -> Response:
    return Response(orjson.dumps(content), media_type="application/json",
                    headers=blocking.headers(index) if index is not None else None)
