"""The registry's routes, written once for both clients.

Each operation is a generator: it yields the `Call`s it needs and receives their `httpx.Response`s
(or has the client's error thrown into it), then returns its value. `Client` drives these with
blocking I/O and `AsyncClient` with `await`; the `operation` decorator turns each generator into a
method that hands it to the client's `_call`, so `client.discover(...)` returns the value and
`await aclient.discover(...)` the same value. Caching and the stale fallback live here, once.
"""
from __future__ import annotations

import abc
import functools
import itertools
import random
import time
from collections.abc import Callable, Generator, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote

import httpx

from semreg.client.cache import LookupCache
from semreg.client.calls import Call, FileBody, Progress, RouteURL, WatchState, clean, json_or_none, rdf_content_type
from semreg.client.errors import ApiError, NoInstanceAvailable, SemregClientError, Unreachable, warn_unknown_terms
from semreg.client.transport import RetryPolicy, Transport, parse_urls

P = ParamSpec("P")
T = TypeVar("T")
Steps = Generator[Call, httpx.Response, T]

DEFAULT_URL = "http://127.0.0.1:8080"
MAX_ROUTE_TARGETS = 32  # distinct instances remembered per route query, for the stale fallback


def operation(steps: Callable[Concatenate[Any, P], Steps[T]]) -> Callable[Concatenate[Any, P], T]:
    """A generator of calls → a client method running it (blocking, or as a coroutine on `AsyncClient`)."""

    @functools.wraps(steps)
    def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._call(steps(self, *args, **kwargs))

    method.steps = steps  # type: ignore[attr-defined]
    return method


def _key(kind: str, params: Mapping[str, Any]) -> Hashable:
    return (kind, tuple(sorted(clean(params).items())))


def _fallback_worthy(exc: SemregClientError) -> bool:
    """Errors that mean 'the registry cannot answer now' rather than 'the registry said no'."""
    if isinstance(exc, Unreachable):
        return True
    return isinstance(exc, ApiError) and exc.status >= 500 and not isinstance(exc, NoInstanceAvailable)


class ClientBase(abc.ABC):
    """State shared by `Client` and `AsyncClient`: URLs and breakers, cache, credentials, timeouts."""

    def __init__(self, url: str | Iterable[str] = DEFAULT_URL, token: str | None = None, timeout_s: float = 5.0, *,
                 retry: RetryPolicy | None = None, cache_ttl_s: float = 5.0, cache_jitter: float = 0.2,
                 watch_cache: bool = False, watch_wait_s: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None, headers: Mapping[str, str] | None = None,
                 environment: str | None = None) -> None:
        self.urls = parse_urls(url)
        self.environment = environment  # registrations and reads in it (None: the registry's default)
        self.token = token
        self.timeout_s = timeout_s
        self.clock = clock
        self.rng = rng or random.Random()
        self.transport = Transport(self.urls, retry or RetryPolicy(), clock, self.rng)
        self.cache = LookupCache(cache_ttl_s, cache_jitter, clock, self.rng)
        self.watch_cache = watch_cache
        self.watch_wait_s = watch_wait_s
        self.headers = {"User-Agent": "semreg-client", **(headers or {})}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._route_turn = itertools.count()

    @abc.abstractmethod
    def _call(self, steps: Steps[T]) -> Any:
        """Drive one operation's requests: with blocking I/O (`Client`) or awaiting them (`AsyncClient`)."""

    @abc.abstractmethod
    def _start_cache_watch(self, key: Hashable, params: dict[str, Any]) -> None:
        """Keep a cached discover result current with a background watch (only with watch_cache)."""

    def _selected(self, params: dict[str, Any], environment: str | None = None,
                 meta: Mapping[str, str] | None = None) -> dict[str, Any]:
        """A read's parameters with its environment (the call's, else the client's) and `meta.KEY=VALUE`
        filters."""
        out = {**params, "environment": environment or self.environment}
        out.update({f"meta.{k}": v for k, v in (meta or {}).items()})
        return out

    # -- instances ---------------------------------------------------------------------------------
    @operation
    def put_instance(self, id: str, body: Mapping[str, Any]) -> Steps[dict[str, Any]]:
        """Create or replace an instance from a registration body, once: no heartbeats (see `register`). It
        is in the client's environment unless the body names one."""
        body = dict(body)
        if self.environment and "environment" not in body:
            body["environment"] = self.environment
        resp = yield Call("PUT", f"/v1/instances/{quote(id, safe='')}", json=body)
        self.cache.expire()
        view = resp.json()
        warn_unknown_terms(view)
        return view

    @operation
    def instances(self, service: str | None = None, tags: bool = True, environment: str | None = None,
                  meta: Mapping[str, str] | None = None) -> Steps[list[dict[str, Any]]]:
        """Every registered instance (of `service`, if given) in the environment, in every status (without
        `tags`: no tag lists); with `meta`, only those whose meta holds each pair."""
        params = self._selected({"service": service, "tags": None if tags else "false"}, environment, meta)
        resp = yield Call("GET", "/v1/instances", params=params)
        return resp.json()

    @operation
    def instance(self, id: str) -> Steps[dict[str, Any]]:
        """One instance's view; `NotFound` if it is not registered."""
        resp = yield Call("GET", f"/v1/instances/{quote(id, safe='')}")
        return resp.json()

    @operation
    def deregister(self, id: str) -> Steps[None]:
        """Remove an instance; `NotFound` if it was not registered."""
        yield Call("DELETE", f"/v1/instances/{quote(id, safe='')}")
        self.cache.expire()

    @operation
    def heartbeat(self, id: str, load: float | None = None, status: str | None = None) -> Steps[dict[str, Any]]:
        """Renew an instance's ttl, reporting its load and admin status (`up`, `blocked`, `draining`).

        Returns `{"id", "status", "expires_at"}`; `NotFound` when the registry no longer has it.
        """
        body = {k: v for k, v in (("load", load), ("status", status)) if v is not None}
        resp = yield Call("PUT", f"/v1/instances/{quote(id, safe='')}/heartbeat", json=body or None)
        return resp.json()

    # -- discovery ---------------------------------------------------------------------------------
    @operation
    def discover(self, s: str, p: str | None = None, o: str | None = None, match: str | Iterable[str] | None = None,
                 service: str | None = None, status: str | None = None, limit: int | None = None,
                 tags: bool = False, environment: str | None = None,
                 meta: Mapping[str, str] | None = None, min_similarity: float | None = None) -> Steps[dict[str, Any]]:
        """Instances whose tags match the pattern `(s p o)`: the contract's JSON as a dict (each ranked
        view with its best `match`; with `tags`, with its tags too). In `environment` (else the client's,
        else the registry's default; `*` for all), and with `meta`, only instances whose meta holds each
        pair. `min_similarity`: with `similar` in `match`, the floor of a near miss's similarity.

        Served from the local cache while fresh. When no registry URL can answer, the last good answer
        for the same query is returned with `"stale": True` added (and `Unreachable` raised if there is none).
        """
        params = self._selected({"s": s, "p": p, "o": o, "match": match, "service": service, "status": status,
                                "limit": limit, "tags": "true" if tags else None, "min_similarity": min_similarity},
                                environment, meta)
        key = _key("discover", params)
        hit = self.cache.fresh(key)
        if hit is not None:
            return dict(hit)  # a copy, so a caller's edits stay out of the cache
        try:
            resp = yield Call("GET", "/v1/discover", params=params)
        except SemregClientError as exc:
            entry = self.cache.last(key) if _fallback_worthy(exc) else None
            if entry is None:
                raise
            return {**entry.value, "stale": True}
        body = resp.json()
        warn_unknown_terms(body)
        if self.cache.put(key, body):
            self._start_cache_watch(key, params)
        return body

    @operation
    def discover_all(self, patterns: Iterable[Any], provided: Iterable[Any] | None = None,
                     match: str | Iterable[str] | None = None, service: str | None = None, status: str | None = None,
                     limit: int | None = None, tags: bool = False, environment: str | None = None,
                     meta: Mapping[str, str] | None = None, min_similarity: float | None = None,
                     rank: str | None = None) -> Steps[dict[str, Any]]:
        """Instances whose tags match every one of `patterns` (tags: strings of one or three terms, or
        `{"s", "p", "o"}`), by `POST /v1/discover`: each ranked view's `match` is its worst pattern's, with
        the summed distance and each pattern's own match in `patterns`. With `provided` (tags the caller can
        supply), only instances whose tags on those predicates are each covered by one of them. `rank="score"`
        (with `similar` in `match`): by the matchmaker's score alone, the degrees mixed. Not cached: each call
        asks the registry."""
        body = {"all": list(patterns), "provided": None if provided is None else list(provided),
                "match": match if match is None or isinstance(match, str) else ",".join(match), "service": service,
                "status": status, "limit": limit, "tags": tags or None, "environment": environment or self.environment,
                "meta": dict(meta) if meta else None, "min_similarity": min_similarity, "rank": rank}
        resp = yield Call("POST", "/v1/discover", json={k: v for k, v in body.items() if v is not None},
                          idempotent=True)
        result = resp.json()
        warn_unknown_terms(result)
        return result

    @operation
    def _watch_step(self, state: WatchState, params: dict[str, Any]) -> Steps[dict[str, Any] | None]:
        first = state.index is None
        resp = yield Call("GET", "/v1/discover", params={**params, **state.params()},
                          timeout_s=state.timeout_s(self.timeout_s))
        result = state.update(resp)
        if first:  # the terms of a watch are the same in every answer: warned about once
            warn_unknown_terms(result)
        return result

    @operation
    def route(self, s: str, p: str | None = None, o: str | None = None, match: str | Iterable[str] | None = None,
              service: str | None = None, policy: str | None = None, path: str = "", environment: str | None = None,
              meta: Mapping[str, str] | None = None) -> Steps[RouteURL]:
        """The URL of the instance the registry picks for this request (its 307 `Location`, not followed),
        among those of the environment (and with `meta`) as `discover` has them.

        `NoInstanceAvailable` (with `retry_after`) when none is eligible. Every route is asked of the
        registry, since its balancing counts the routes it hands out; when no registry URL answers, an
        instance from earlier answers to the same query is chosen in turn and the `RouteURL` has
        `stale=True`.
        """
        params = self._selected({"s": s, "p": p, "o": o, "match": match, "service": service, "policy": policy,
                                "path": path or None}, environment, meta)
        key = _key("route", {**params, "path": None})
        try:
            resp = yield Call("GET", "/v1/route", params=params, final_statuses=frozenset({503}))
        except SemregClientError as exc:
            if isinstance(exc, ApiError):
                warn_unknown_terms(exc.body)
            if not _fallback_worthy(exc):
                raise
            stale = self._stale_route(key, params, path)
            if stale is None:
                raise
            return stale
        location = resp.headers.get("location")
        if resp.status_code not in (301, 302, 303, 307, 308) or not location:
            raise SemregClientError(f"the registry answered /v1/route with {resp.status_code} and no redirect.")
        instance_id = resp.headers.get("x-semreg-instance")
        base = location[: len(location) - len(path)] if path and location.endswith(path) else location
        entry = self.cache.last(key)
        targets = [(base, instance_id)] + [t for t in (entry.value if entry else []) if t[1] != instance_id]
        self.cache.put(key, targets[:MAX_ROUTE_TARGETS])
        return RouteURL(location, instance_id)

    def _stale_route(self, key: Hashable, params: dict[str, Any], path: str) -> RouteURL | None:
        entry = self.cache.last(key)
        targets: list[tuple[str, str | None]] = list(entry.value) if entry else []
        if not targets:
            query = {k: v for k, v in params.items() if k not in ("policy", "path")}
            found = self.cache.last(_key("discover", query))
            for view in (found.value.get("instances", []) if found else []):
                if view.get("status") == "up":
                    targets.append((f"{view['scheme']}://{view['address']}:{view['port']}", view["id"]))
        if not targets:
            return None
        base, instance_id = targets[next(self._route_turn) % len(targets)]
        return RouteURL(base + path, instance_id, stale=True)

    @operation
    def discover_tags(self, tags: Iterable[str | Mapping[str, str]], with_tags: bool = True,
                      environment: str | None = None, meta: Mapping[str, str] | None = None) -> Steps[dict[str, Any]]:
        """Exact lookup of many tags at once, no reasoning: `{"peers": {"S P O": [view, ...]}}`."""
        resp = yield Call("POST", "/v1/discover/tags", json={"tags": list(tags)}, idempotent=True,
                          params=self._selected({"tags": None if with_tags else "false"}, environment, meta))
        found = resp.json()
        warn_unknown_terms(found)
        return found

    @operation
    def tags(self, environment: str | None = None, meta: Mapping[str, str] | None = None) -> Steps[dict[str, Any]]:
        """Every registered tag of the environment: `{"tags": [{"s", "p", "o", "instances"}]}`."""
        resp = yield Call("GET", "/v1/tags", params=self._selected({}, environment, meta))
        return resp.json()

    @operation
    def expand(self, s: str, p: str | None = None, o: str | None = None,
               match: str | Iterable[str] | None = None) -> Steps[dict[str, Any]]:
        """What each component of `(s p o)` expands to, with degrees: a discovery explained."""
        resp = yield Call("GET", "/v1/expand", params={"s": s, "p": p, "o": o, "match": match})
        expanded = resp.json()
        warn_unknown_terms(expanded)
        return expanded

    @operation
    def concept(self, term: str) -> Steps[dict[str, Any]]:
        """A concept's label, kind, parents, children, ancestors and descendants."""
        resp = yield Call("GET", f"/v1/concepts/{quote(term, safe='')}")
        return resp.json()

    # -- ontologies and prefixes -------------------------------------------------------------------
    @operation
    def put_ontology(self, name: str, data: bytes | str | Path, content_type: str | None = None,
                     progress: Progress | None = None) -> Steps[dict[str, Any]]:
        """Upload (or replace) an ontology. A `Path` is streamed, calling `progress(sent, total)`; its
        media type is guessed from the suffix unless `content_type` is given; bytes and str default to Turtle.
        """
        media = rdf_content_type(data, content_type)
        content: bytes | FileBody
        if isinstance(data, Path):
            content = FileBody(data, progress)
        else:
            content = data.encode() if isinstance(data, str) else bytes(data)
        resp = yield Call("PUT", f"/v1/ontologies/{quote(name, safe='')}", content=content,
                          headers={"Content-Type": media}, timeout_s=max(self.timeout_s, 120.0))
        self.cache.expire()
        return resp.json()

    @operation
    def get_ontology(self, name: str, accept: str = "text/turtle") -> Steps[str]:
        """An ontology's RDF, serialised as `accept` asks."""
        resp = yield Call("GET", f"/v1/ontologies/{quote(name, safe='')}", headers={"Accept": accept})
        return resp.text

    @operation
    def ontologies(self) -> Steps[list[dict[str, Any]]]:
        """`[{"name", "triples", "inferred", "uploaded_at"}]`."""
        resp = yield Call("GET", "/v1/ontologies")
        return resp.json()

    @operation
    def delete_ontology(self, name: str) -> Steps[None]:
        yield Call("DELETE", f"/v1/ontologies/{quote(name, safe='')}")
        self.cache.expire()

    @operation
    def prefixes(self) -> Steps[dict[str, str]]:
        """`{prefix: namespace IRI}`: every prefix the registry knows."""
        resp = yield Call("GET", "/v1/prefixes")
        return resp.json()

    @operation
    def put_prefix(self, prefix: str, iri: str) -> Steps[dict[str, Any]]:
        resp = yield Call("PUT", f"/v1/prefixes/{quote(prefix, safe='')}", json={"iri": iri})
        return json_or_none(resp)

    # -- backup and restore ------------------------------------------------------------------------
    @operation
    def backup(self) -> Steps[bytes]:
        """The whole registry as one gzipped N-Quads document (`GET /v1/backup`, admin)."""
        resp = yield Call("GET", "/v1/backup", timeout_s=max(self.timeout_s, 600.0))
        return resp.content

    @operation
    def restore(self, data: bytes | Path, force: bool = False, progress: Progress | None = None) -> Steps[dict[str, Any]]:
        """Load a backup (`POST /v1/restore`, admin) into an empty registry, or with `force` into one that holds
        something; a `Path` is streamed, calling `progress(sent, total)`. `{"instances", "ontologies", "prefixes"}`."""
        content = FileBody(data, progress) if isinstance(data, Path) else bytes(data)
        resp = yield Call("POST", "/v1/restore", params={"force": "true" if force else None}, content=content,
                          headers={"Content-Type": "application/gzip"}, timeout_s=max(self.timeout_s, 600.0))
        self.cache.expire()
        return resp.json()

    # -- SPARQL and operations ---------------------------------------------------------------------
    @operation
    def sparql(self, query: str, accept: str = "application/sparql-results+json") -> Steps[Any]:
        """Run a SPARQL query; a JSON answer comes back parsed, any other format as text."""
        resp = yield Call("POST", "/sparql", data={"query": query}, headers={"Accept": accept}, idempotent=True,
                          final_statuses=frozenset({503}), timeout_s=max(self.timeout_s, 30.0))
        if "json" in resp.headers.get("content-type", ""):
            return resp.json()
        return resp.text

    @operation
    def cluster(self) -> Steps[dict[str, Any]]:
        """`{"node", "members", "replicas", "checksum"}` of the node that answers."""
        resp = yield Call("GET", "/v1/cluster")
        return resp.json()


__all__ = ["DEFAULT_URL", "ClientBase", "Steps", "operation"]
