"""Bearer tokens, scopes and ownership.

Tokens file (JSON), reloaded on SIGHUP:
    {"tokens": [{"name": "team-a", "token": "a-long-random-secret", "scopes": ["read", "write"]},
                {"name": "staging", "token": "another-long-secret", "scopes": ["read", "write"], "environments": ["staging"]},
                {"name": "ci", "sha256": "<hex of the token's SHA-256>", "scopes": ["admin"]}]}
Scopes: `read` (GET routes, SPARQL), `write` (instances), `admin` (everything). A `write` token may
renew, replace or remove only the instances it registered (ownership by token name). A token bound to
`environments` reads and writes instances only in those (403 naming the environment otherwise), and
may not query SPARQL, whose default graph holds every environment's instances; an admin token sees all.

A token is at least `MIN_TOKEN_CHARS` characters: a shorter one in the file is refused when it is loaded
(naming the entry, never the token), and a shorter one presented is not valid (so a `sha256` entry of a
short token, which the file cannot show, is never usable either).

Presented tokens are hashed and looked up by their SHA-256, then compared with `hmac.compare_digest`,
so neither the comparison nor the lookup depends on how much of a secret an attacker guessed. Tokens
are never logged.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from semreg.errors import Forbidden, Unauthorized
from semreg.registry.selector import ALL, environment_problem

log = logging.getLogger("semreg.auth")

READ, WRITE, ADMIN = "read", "write", "admin"
SCOPES = (READ, WRITE, ADMIN)
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,128}$")
MIN_TOKEN_CHARS = 16


class TokensFileError(Exception):
    """The tokens file cannot be read or is not in the documented form."""


@dataclass(frozen=True)
class Principal:
    name: str
    scopes: frozenset[str]
    environments: frozenset[str] | None = None  # None: every environment

    @property
    def admin(self) -> bool:
        return ADMIN in self.scopes

    def require(self, scope: str) -> None:
        if self.admin or scope in self.scopes:
            return
        raise Forbidden(f"the token '{self.name}' lacks the '{scope}' scope this request needs.", scope=scope)

    @property
    def bound(self) -> bool:
        """Whether the token is kept to some environments (an admin token never is)."""
        return self.environments is not None and not self.admin

    def sees(self, environment: str) -> bool:
        """Whether instances in `environment` exist for this token: a bound token sees what a server holding
        only its environments would hold."""
        return not self.bound or environment in (self.environments or ())

    def require_environment(self, environment: str) -> None:
        """403 unless this token may read and write instances in `environment` (`*`: in every one)."""
        if not self.bound:
            return
        assert self.environments is not None
        allowed = ", ".join(sorted(self.environments))
        if environment == ALL:
            raise Forbidden(f"the token '{self.name}' is bound to the environments {allowed}; environment=* reaches "
                            f"every environment: name one of them.", environment=environment)
        if environment not in self.environments:
            raise Forbidden(f"the token '{self.name}' is bound to the environments {allowed}, and the environment "
                            f"'{environment[:256]}' is not one of them.", environment=environment[:256])

    def require_every_environment(self, what: str) -> None:
        if self.bound:
            raise Forbidden(f"the token '{self.name}' is bound to environments, and {what} holds every "
                            f"environment's instances; it needs a token that is not bound.")

    def require_owner(self, owner: str | None, instance_id: str) -> None:
        if self.admin or owner == self.name:
            return
        raise Forbidden(f"the instance '{instance_id}' was registered by another token; only its owner or an "
                        f"admin token may change it.")


OPEN = Principal("anonymous", frozenset(SCOPES))  # no tokens configured: everything allowed


class Tokens:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._by_hash: dict[str, tuple[bytes, Principal]] = {}
        if path is not None:
            self.reload()

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def reload(self) -> int:
        """Read the file again; on an error the previous tokens stay in force and the error is raised."""
        assert self.path is not None
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise TokensFileError(f"cannot read the tokens file {self.path}: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise TokensFileError(f"the tokens file {self.path} is not JSON: {exc}") from exc
        self._by_hash = parse_tokens(data, str(self.path))
        log.info("tokens loaded", extra={"tokens": len(self._by_hash), "file": str(self.path)})
        return len(self._by_hash)

    def authenticate(self, authorization: str | None) -> Principal:
        if not self.enabled:
            return OPEN
        if not authorization:
            raise Unauthorized("this server needs a token: send 'Authorization: Bearer <token>'.")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("the Authorization header must be 'Bearer <token>'.")
        if len(token) < MIN_TOKEN_CHARS:
            raise Unauthorized("the token is not valid.")
        digest = hashlib.sha256(token.encode()).digest()
        entry = self._by_hash.get(digest.hex())
        if entry is None or not hmac.compare_digest(entry[0], digest):
            raise Unauthorized("the token is not valid.")
        return entry[1]


def parse_tokens(data: object, where: str = "tokens") -> dict[str, tuple[bytes, Principal]]:
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        raise TokensFileError(f'{where}: expected {{"tokens": [{{"name", "token" or "sha256", "scopes"}}, ...]}}')
    out: dict[str, tuple[bytes, Principal]] = {}
    names: set[str] = set()
    for n, entry in enumerate(data["tokens"]):
        at = f"{where}: tokens[{n}]"
        if not isinstance(entry, dict):
            raise TokensFileError(f"{at} is not an object")
        unknown = set(entry) - {"name", "token", "sha256", "scopes", "environments"}
        if unknown:
            raise TokensFileError(f"{at} has unknown fields: {', '.join(sorted(unknown))}")
        name = entry.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise TokensFileError(f"{at}.name must be 1-128 of letters, digits, '.', '_', '@' or '-'")
        if name in names:
            raise TokensFileError(f"{at}.name '{name}' appears twice")
        names.add(name)
        scopes = entry.get("scopes")
        if not isinstance(scopes, list) or not scopes or any(s not in SCOPES for s in scopes):
            raise TokensFileError(f"{at}.scopes must be a non-empty list of {', '.join(SCOPES)}")
        if ("token" in entry) == ("sha256" in entry):
            raise TokensFileError(f"{at} needs exactly one of token or sha256")
        if "token" in entry:
            token = entry["token"]
            if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
                raise TokensFileError(f"{at}.token (of '{name}') must be a string of at least {MIN_TOKEN_CHARS} "
                                      f"characters")
            digest = hashlib.sha256(token.encode()).digest()
        else:
            hexd = entry["sha256"]
            if not isinstance(hexd, str) or not _HEX64.match(hexd):
                raise TokensFileError(f"{at}.sha256 must be 64 hex digits")
            digest = bytes.fromhex(hexd)
        out[digest.hex()] = (digest, Principal(name, frozenset(scopes), environments_of(entry, at)))
    return out


def environments_of(entry: dict, at: str) -> frozenset[str] | None:
    """A token's `environments`: None when it has none (every environment)."""
    if "environments" not in entry:
        return None
    names = entry["environments"]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise TokensFileError(f"{at}.environments must be a non-empty list of environment names (leave it out "
                              f"for every environment)")
    for name in names:
        problem = environment_problem(name)
        if problem is not None:
            raise TokensFileError(f"{at}.environments: {problem} (leave environments out for every environment)")
    return frozenset(names)
