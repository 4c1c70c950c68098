"""What the client commands print: aligned tables for people, the server's JSON for scripts, CURIEs,
error sentences on stderr, and exit codes.
"""
from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

from semreg.client import ApiError, NoInstanceAvailable, NotFound, SemregClientError, Unreachable

OK, API_ERROR, USAGE, UNREACHABLE, NOT_FOUND, INTERRUPTED = 0, 1, 2, 3, 4, 130

EXIT_CODES = """\
exit codes:
  0  success
  1  the registry answered with an error (4xx/5xx); its sentence is on stderr
  2  usage error (bad arguments)
  3  no registry URL could be reached
  4  not found (deregister, heartbeat, instances ID, concept, ontology get/delete)
  130 interrupted (Ctrl-C); register --keep-alive deregisters first, and ends with 0 on SIGTERM

environment: SEMREG_URL (default http://127.0.0.1:8080; a comma-separated list is tried in turn),
SEMREG_TOKEN (a bearer token), SEMREG_TIMEOUT (seconds per request)."""

_LOCAL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$|^$")


class UsageError(Exception):
    """Arguments that parse but make no sense together; exit code 2."""


class Curies:
    """Shortens IRIs to CURIEs with the registry's prefixes (longest namespace wins)."""

    def __init__(self, prefixes: Mapping[str, str] | None = None) -> None:
        self.namespaces = sorted(((ns, p) for p, ns in (prefixes or {}).items()), key=lambda x: -len(x[0]))

    def __call__(self, iri: Any) -> str:
        if not isinstance(iri, str):
            return "" if iri is None else str(iri)
        for ns, prefix in self.namespaces:
            if iri.startswith(ns) and _LOCAL.match(iri[len(ns):]):
                return f"{prefix}:{iri[len(ns):]}"
        return iri

    def tag(self, tag: Mapping[str, Any]) -> str:
        return " ".join(self(tag.get(k)) for k in ("s", "p", "o"))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None) -> None:
    """Plain aligned columns (no wrapping, so `grep`, `awk` and `cut` keep working)."""
    out = out or sys.stdout
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    for row in [list(headers)] + cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip(), file=out)
    out.flush()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).replace("\n", " ")


def print_json(data: Any, compact: bool = False, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")) if compact else \
        json.dumps(data, ensure_ascii=False, indent=2)
    print(text, file=out, flush=True)


def say(text: str) -> None:
    print(text, file=sys.stdout, flush=True)


def warn(text: str) -> None:
    print(f"semreg: {text}", file=sys.stderr, flush=True)


def show_term_warnings() -> None:
    """The client's `UnknownTermWarning`s on stderr as `semreg: warning: <the registry's sentence>`, each
    one (other warnings as Python shows them)."""
    import warnings

    from semreg.client import UnknownTermWarning

    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None,
             line: str | None = None) -> None:
        if issubclass(category, UnknownTermWarning):
            warn(f"warning: {message}")
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    warnings.simplefilter("always", UnknownTermWarning)


def guarded(run: Callable[[Any], int | None]) -> Callable[[Any], int]:
    """Map the client's errors to exit codes, with the server's sentence on stderr."""

    @functools.wraps(run)
    def wrapper(args: Any) -> int:
        try:
            return int(run(args) or OK)
        except UsageError as exc:
            warn(str(exc))
            return USAGE
        except NotFound as exc:
            warn(exc.message)
            return NOT_FOUND if getattr(args, "not_found_exit", False) else API_ERROR
        except NoInstanceAvailable as exc:
            after = f" (retry after {exc.retry_after:g} s)" if exc.retry_after is not None else ""
            warn(exc.message + after)
            return API_ERROR
        except ApiError as exc:
            warn(exc.message)
            return API_ERROR
        except Unreachable as exc:
            warn(str(exc))
            return UNREACHABLE
        except SemregClientError as exc:
            warn(str(exc))
            return API_ERROR

    return wrapper


def instances_table(views: Sequence[Mapping[str, Any]], short: Curies) -> None:
    rows = []
    for v in views:
        tags = v.get("tags") or []
        shown = short.tag(tags[0]) if tags else "-"
        if len(tags) > 1:
            shown += f" (+{len(tags) - 1})"
        rows.append([v["id"], v["service"], f"{v['address']}:{v['port']}", v["status"], v.get("load"),
                     v.get("weight"), v.get("expires_at") or "never", shown])
    if not rows:
        say("no instances.")
        return
    table(["ID", "SERVICE", "ADDRESS", "STATUS", "LOAD", "WEIGHT", "EXPIRES", "TAGS"], rows)


def discover_table(result: Mapping[str, Any], short: Curies) -> None:
    """One row per instance, in the registry's ranking, with the best tag it matched by."""
    rows = []
    for v in result.get("instances", []):
        m = v.get("match") or {}
        rows.append([v["id"], v["service"], f"{v['scheme']}://{v['address']}:{v['port']}", v["status"], v.get("load"),
                     m.get("degree"), m.get("distance"), short.tag(m["tag"]) if m.get("tag") else "-"])
    if result.get("stale"):
        warn("the registry is unreachable; this is the last answer it gave.")
    if not rows:
        say("no instances match.")
        return
    table(["ID", "SERVICE", "URL", "STATUS", "LOAD", "DEGREE", "DISTANCE", "TAG"], rows)


def sparql_table(result: Mapping[str, Any], short: Curies) -> None:
    if "boolean" in result:
        say("true" if result["boolean"] else "false")
        return
    names = result.get("head", {}).get("vars", [])
    rows = [[_term(b.get(n), short) for n in names] for b in result.get("results", {}).get("bindings", [])]
    table(names or ["(no variables)"], rows)
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})", file=sys.stderr)


def _term(term: Mapping[str, Any] | None, short: Curies) -> str | None:
    if term is None:
        return None
    kind, value = term.get("type"), term.get("value", "")
    if kind == "uri":
        return short(value)
    if kind == "bnode":
        return f"_:{value}"
    if kind == "triple":
        inner = term.get("value", {})
        return "<< " + " ".join(_term(inner.get(k), short) or "" for k in ("subject", "predicate", "object")) + " >>"
    lang = term.get("xml:lang")
    return f"{value}@{lang}" if lang else value
