"""Which instances a read covers: one environment (or all of them) and metadata that must hold.

Every read of instances (discovery, the multi-tag lookup, tags, listings, routing, and their watches)
is narrowed by a `Selector`: `environment` names the one environment the read sees (`default` unless
the reader says otherwise, as Nacos's `public` namespace; `*` sees all), and `meta` lists `KEY=VALUE`
pairs, all of which an instance's `meta` must hold. Instances in one environment never answer for
another. A selector is part of a query's identity: two reads that differ only in it are two questions,
with two answers and two watches.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from semreg.errors import BadRequest

DEFAULT = "default"
ALL = "*"
# a name as `service` is one (1-256 characters, none a control character), `*` excepted: it means all
_NAME = re.compile(r"^[^\x00-\x1f]{1,256}$")
META_KEY_MAX, META_VALUE_MAX = 128, 4096


class Registered(Protocol):
    """What a selector reads of a registration (a local one, or one another node sent)."""

    @property
    def environment(self) -> str: ...

    @property
    def meta(self) -> Mapping[str, str]: ...


def environment_problem(name: str) -> str | None:
    """Why `name` cannot be an instance's environment, or None when it can."""
    if name == ALL:
        return "'*' is not an environment: it means every environment in a read"
    if not _NAME.match(name):
        return "an environment is 1-256 characters, none of them a control character"
    return None


@dataclass(frozen=True, slots=True)
class Selector:
    environment: str = DEFAULT  # or ALL
    meta: tuple[tuple[str, str], ...] = ()  # sorted, each pair once

    @property
    def everything(self) -> bool:
        """Whether the selector leaves no instance out."""
        return self.environment == ALL and not self.meta

    def admits(self, reg: Registered) -> bool:
        if self.environment != ALL and reg.environment != self.environment:
            return False
        if self.meta:
            meta = reg.meta
            for key, value in self.meta:
                if meta.get(key) != value:
                    return False
        return True

    def covers(self, environments: Iterable[str]) -> bool:
        """Whether a change to instances in these environments can touch what this selector admits."""
        return self.environment == ALL or self.environment in environments

    def as_json(self) -> dict[str, Any]:
        return {"environment": self.environment, "meta": [list(pair) for pair in self.meta]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Selector:
        if not data:
            return cls()
        return cls(str(data.get("environment") or DEFAULT), tuple((str(k), str(v)) for k, v in data.get("meta") or ()))


EVERYTHING = Selector(ALL)


def parse_selector(environment: str | None, meta: Iterable[tuple[str, str]] = ()) -> Selector:
    """The selector of a read's `environment=` and `meta.KEY=VALUE` parameters (keys without the prefix);
    a 400 naming the parameter at fault otherwise."""
    env = environment or DEFAULT
    if env != ALL:
        problem = environment_problem(env)
        if problem is not None:
            raise BadRequest(f"environment: {problem}, not '{env[:60]}'.", field="environment")
    pairs = set()
    for key, value in meta:
        if not key or len(key) > META_KEY_MAX:
            raise BadRequest(f"meta.{key[:60]}: a metadata filter is meta.KEY=VALUE, with a key of 1-{META_KEY_MAX} "
                             f"characters.", field=f"meta.{key[:60]}")
        if len(value) > META_VALUE_MAX:
            raise BadRequest(f"meta.{key}: a metadata value is at most {META_VALUE_MAX} characters.",
                             field=f"meta.{key}")
        pairs.add((key, value))
    return Selector(env, tuple(sorted(pairs)))
