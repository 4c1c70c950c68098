"""Saved queries from the clients: saving, reading, listing and removing them (`/v1/queries`), their answers
(`client.saved("horror").discover()`, `.route(path="/books")`), and Prometheus's targets. Written once for
`Client` and `AsyncClient` as the other operations are (`semreg.client.base.operation`): on an `AsyncClient`
each returns an awaitable."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from semreg.client.base import Steps, operation
from semreg.client.calls import Call, RouteURL, json_or_none
from semreg.client.errors import SemregClientError, warn_unknown_terms


class SavedQueryCalls:
    """The saved-query operations a client has (mixed into `Client` and `AsyncClient`)."""

    def saved(self, name: str) -> Saved:
        """A handle on the saved query `name`: `.discover()`, `.route()`, `.targets()`."""
        return Saved(self, name)

    @operation
    def put_query(self, name: str, s: str | None = None, p: str | None = None, o: str | None = None,
                  match: str | Iterable[str] | None = None, environment: str | None = None,
                  meta: Mapping[str, str] | None = None, limit: int | None = None,
                  all: Iterable[Any] | None = None, provided: Iterable[Any] | None = None,
                  min_similarity: float | None = None, rank: str | None = None) -> Steps[dict[str, Any]]:
        """Save a discovery query under `name` (a DNS label): the stored query, with `warnings` if any. One
        pattern (`s`, `p`, `o`), or several (`all`, with `provided` and `rank`: as `discover_all`).
        `min_similarity`: with `similar` in `match`, the floor of a near miss's similarity."""
        body = {"s": s, "p": p, "o": o, "match": match if match is None or isinstance(match, str) else ",".join(match),
                "environment": environment, "meta": dict(meta) if meta else None, "limit": limit,
                "all": list(all) if all is not None else None,
                "provided": list(provided) if provided is not None else None, "min_similarity": min_similarity,
                "rank": rank}
        resp = yield Call("PUT", f"/v1/queries/{quote(name, safe='')}", json={k: v for k, v in body.items()
                                                                               if v is not None})
        result = resp.json()
        warn_unknown_terms(result)
        return result

    @operation
    def get_query(self, name: str) -> Steps[dict[str, Any]]:
        resp = yield Call("GET", f"/v1/queries/{quote(name, safe='')}")
        return resp.json()

    @operation
    def list_queries(self) -> Steps[list[dict[str, Any]]]:
        resp = yield Call("GET", "/v1/queries")
        return resp.json()

    @operation
    def delete_query(self, name: str) -> Steps[None]:
        yield Call("DELETE", f"/v1/queries/{quote(name, safe='')}")

    @operation
    def saved_discover(self, name: str, tags: bool = False) -> Steps[dict[str, Any]]:
        """What the saved query `name` discovers now (the answer of `GET /v1/discover`)."""
        resp = yield Call("GET", f"/v1/queries/{quote(name, safe='')}/discover",
                          params={"tags": "true"} if tags else None)
        return resp.json()

    @operation
    def saved_route(self, name: str, policy: str | None = None, path: str = "") -> Steps[RouteURL]:
        """The URL of the instance the saved query `name` routes to (its 307 `Location`, not followed)."""
        params = {k: v for k, v in {"policy": policy, "path": path or None}.items() if v is not None}
        resp = yield Call("GET", f"/v1/queries/{quote(name, safe='')}/route", params=params or None,
                          final_statuses=frozenset({503}))
        location = resp.headers.get("location")
        if resp.status_code not in (301, 302, 303, 307, 308) or not location:
            raise SemregClientError(f"the registry answered the route of '{name}' with {resp.status_code} and no "
                                    f"redirect.")
        return RouteURL(location, resp.headers.get("x-semreg-instance"))

    @operation
    def prometheus_targets(self, query: str) -> Steps[list[dict[str, Any]]]:
        """The saved query's routable instances in Prometheus's `http_sd_config` form."""
        resp = yield Call("GET", "/v1/prometheus/targets", params={"query": query})
        return json_or_none(resp) or []


class Saved:
    """A saved query by name, on a client (blocking, or awaitable on an `AsyncClient`)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name

    def discover(self, tags: bool = False) -> Any:
        return self.client.saved_discover(self.name, tags=tags)

    def route(self, policy: str | None = None, path: str = "") -> Any:
        return self.client.saved_route(self.name, policy=policy, path=path)

    def targets(self) -> Any:
        return self.client.prometheus_targets(self.name)

    def get(self) -> Any:
        return self.client.get_query(self.name)

    def delete(self) -> Any:
        return self.client.delete_query(self.name)
