"""The JSON bodies of the API as pydantic models: handlers validate with them, and `/openapi.json` is
generated from them, so the documented schema and the enforced one cannot drift apart.

Validation errors become one `BadRequest` sentence naming the field (`port: must be at most 65535`).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import orjson
import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SkipValidation, StringConstraints, WithJsonSchema

from semreg.errors import BadRequest
from semreg.http.instance_views import InstanceView, TagView
from semreg.registry.selector import DEFAULT as DEFAULT_ENVIRONMENT
from semreg.registry.selector import environment_problem

ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
InstanceId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f]+$")]
NonNegativeSeconds = Annotated[float, Field(ge=0, le=10 * 365 * 24 * 3600, allow_inf_nan=False)]
M = TypeVar("M", bound=BaseModel)  # the model `validate` returns


def _as_text(value: Any) -> Any:
    """A meta value: a string, or a number or boolean taken as its JSON text (`1` → "1", `true` → "true"),
    since spillover reads `meta.priority` and people write it as a number."""
    if isinstance(value, (bool, int, float)):
        return orjson.dumps(value).decode()
    return value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


MetaValue = Annotated[str, BeforeValidator(_as_text), StringConstraints(max_length=4096),
                      WithJsonSchema({"type": ["string", "number", "boolean"], "maxLength": 4096,
                                      "description": "numbers and booleans are kept as their JSON text"})]


def _environment(name: str) -> str:
    problem = environment_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


EnvironmentName = Annotated[Name, pydantic.AfterValidator(_environment)]


# Tags are checked by `semreg.rdf.terms.parse_tag`, which names the tag and the term at fault; the schema
# here documents the two forms for /openapi.json.
TAG_SCHEMA = {"oneOf": [
    {"type": "string", "description": "one term, or three: subject predicate object (CURIEs, IRIs, <IRI>, 'a')"},
    {"type": "object", "required": ["s"], "additionalProperties": False,
     "properties": {"s": {"type": "string"}, "p": {"type": "string"}, "o": {"type": "string"}}}]}
TagInput = Annotated[Any, WithJsonSchema(TAG_SCHEMA)]


class Check(BaseModel):
    """An active health check: exactly one of `http` (a URL answering 2xx) or `tcp` (`host:port` accepting)."""

    model_config = ConfigDict(extra="forbid")
    http: str | None = Field(default=None, max_length=2048, pattern=r"^https?://[^\s]+$")
    tcp: str | None = Field(default=None, max_length=300, pattern=r"^[^\s:]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$")
    interval: float = Field(default=10.0, ge=0.1, le=86_400, allow_inf_nan=False)
    timeout: float = Field(default=2.0, gt=0, le=300, allow_inf_nan=False)

    @pydantic.model_validator(mode="after")
    def _one_target(self) -> "Check":
        if (self.http is None) == (self.tcp is None):
            raise ValueError("a check has exactly one of http (a URL) or tcp (host:port)")
        return self


class InstanceBody(BaseModel):
    """A registration. `id` comes from the path (PUT) or the server (POST) unless given here."""

    model_config = ConfigDict(extra="forbid")
    id: InstanceId | None = None
    service: Name
    address: Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\s/?#@]+$")]
    port: int = Field(ge=1, le=65535, strict=True)
    scheme: Annotated[Literal["http", "https"], BeforeValidator(_lower)] = "http"
    tags: list[TagInput] = Field(default_factory=list)
    weight: int = Field(default=1, ge=1, le=10_000, strict=True)
    capacity: int | None = Field(default=None, ge=1, le=1_000_000_000, strict=True)
    ttl: NonNegativeSeconds = 30
    deregister_after: NonNegativeSeconds = Field(default=90, description="0 = never deleted; left out: 90, 0 with ttl 0")
    check: Check | None = None
    meta: dict[Annotated[str, StringConstraints(min_length=1, max_length=128)], MetaValue] = Field(
        default_factory=dict, max_length=64)
    environment: EnvironmentName = Field(default=DEFAULT_ENVIRONMENT, description=(
        "the environment the instance serves in (dev, staging, prod, ...); it never answers for another"),
        json_schema_extra={"not": {"const": "*"}})


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # each one is an InstanceBody, validated one by one as request work (semreg.http.routes.instances): checked
    # here too, pydantic copied every value of 10,000 of them (~200 ms, on the event loop)
    instances: list[SkipValidation[dict[str, Any]]]


class HeartbeatBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    load: float | None = Field(default=None, ge=0, le=1e12, allow_inf_nan=False)
    status: Literal["up", "blocked", "draining"] | None = None


class TagsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tags: list[TagInput]


class PrefixBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    iri: str = Field(min_length=1, max_length=4096)


def parse_json(raw: bytes) -> Any:
    if not raw.strip():
        raise BadRequest("the request body is empty; send a JSON object.")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}.") from exc


def validate(model: type[M], data: Any, where: str = "") -> M:
    """`model` from decoded JSON, or a `BadRequest` naming the first bad field."""
    if not isinstance(data, dict):
        raise BadRequest(f"{where or 'the body'} must be a JSON object, not {_json_type(data)}.")
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise _bad_request(exc, where) from None


# What a field that fails its pattern (or its list of values) may be, in words: a person reads these,
# not the regular expression.
_WORDS = {
    "address": "must be a host name or an IP address (such as 10.1.0.7, books.internal or ::1), without a scheme, "
               "path, user or spaces",
    "scheme": "must be http or https: routes redirect to scheme://address:port, and checks speak HTTP",
    "id": "must be 1-128 letters, digits, '.', '_', ':' or '-'",
    "service": "must be 1-256 characters, none of them a control character",
    "http": "must be an http:// or https:// URL without spaces",
    "tcp": "must be host:port (or [IPv6]:port)",
}
_META_VALUE = "must be a string, a number or a boolean (numbers and booleans are kept as their text)"


def _bad_request(exc: pydantic.ValidationError, where: str) -> BadRequest:
    err = exc.errors(include_url=False)[0]
    loc = [str(x) for x in err["loc"] if not str(x).startswith(("function-", "union["))]
    # pydantic names union branches (str, TagObject) in the location; a person wants the field.
    loc = [x for x in loc if x not in ("str", "TagObject", "constrained-str")]
    field = ""
    for part in loc:
        field += f"[{part}]" if part.isdigit() else (f".{part}" if field else part)
    if where:
        field = f"{where}.{field}" if field else where
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "is not a known field"
    elif err["type"] == "missing":
        msg = "is required"
    elif err["type"] in ("string_pattern_mismatch", "literal_error") and loc and loc[-1] in _WORDS:
        msg = _WORDS[loc[-1]]
    elif err["type"] == "string_type" and len(loc) == 2 and loc[0] == "meta":
        msg = _META_VALUE
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    msg = msg[0].lower() + msg[1:] if msg else msg
    text = f"{field}: {msg}." if field else f"{msg}."
    return BadRequest(text.replace("..", "."), field=field or None)


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean",
            type(None): "null"}.get(type(value), type(value).__name__)


# -- response bodies (documented in /openapi.json; the tests validate live responses against them) --
class TermWarningView(BaseModel):
    field: str = Field(description="where the request named the term first (s, p, o, tags[n], ...)")
    term: str = Field(description="the term's full IRI")
    message: str
    suggestions: list[str] = Field(description="known terms close to it, closest first")


WARNINGS = Field(None, description="the request's terms that no uploaded ontology knows (each matches only itself); "
                                   "left out when there are none")


class RegisteredInstanceView(InstanceView):
    warnings: list[TermWarningView] | None = WARNINGS


class InstanceRef(BaseModel):
    id: str


class BestMatch(BaseModel):
    tag: TagView
    degree: Literal["exact", "narrower", "broader", "overlap", "similar"]
    distance: int
    similarity: float | None = None  # a similar match's closeness in [0, 1]


class MatchView(BestMatch):
    instances: list[InstanceRef]


class RankedView(InstanceView):
    match: BestMatch


class DiscoverView(BaseModel):
    query: TagView
    matches: list[MatchView] = Field(description="the matched tags, best first, each naming its instances by id")
    truncated: bool = Field(description="true when more tags matched than the 1,000 listed")
    instances: list[RankedView] = Field(description="each instance once, ranked, with its best match")
    warnings: list[TermWarningView] | None = WARNINGS


class TagCount(TagView):
    instances: int


class TagsView(BaseModel):
    tags: list[TagCount]


class PeersView(BaseModel):
    peers: dict[str, list[InstanceView]]
    warnings: list[TermWarningView] | None = WARNINGS


class RegisteredView(BaseModel):
    registered: int
    warnings: list[TermWarningView] | None = WARNINGS


class HeartbeatView(BaseModel):
    id: str
    status: str
    expires_at: str | None


class ExpansionRow(BaseModel):
    iri: str
    degree: str
    distance: int
    wildcard: bool | None = None


class MatchedTag(BaseModel):
    tag: TagView
    degree: str
    distance: int
    why: dict[str, Any] | None = Field(default=None, description="per component (s, p, o): its degree and the "
                                       "chain of subClassOf, subPropertyOf, type or equivalence steps between the "
                                       "registered and the queried term")


class ExpandView(BaseModel):
    query: TagView
    match: list[str]
    components: dict[str, list[ExpansionRow]]
    tags: list[MatchedTag]
    warnings: list[TermWarningView] | None = WARNINGS


class ConceptView(BaseModel):
    iri: str
    kind: str
    label: str | None
    equivalents: list[str]
    parents: list[str]
    children: list[str]
    ancestors: list[str]
    descendants: list[str]


class OntologyView(BaseModel):
    name: str
    triples: int
    inferred: int = Field(description="the entailed triples its upload added to the closure of the ontologies "
                                      "already there")
    uploaded_at: str
    media_type: str


class OntologyStored(OntologyView):
    inferred_total: int = Field(description="the entailed triples of all ontologies together (urn:semreg:inferred)")
    reasoning_ms: float
    timings_ms: dict[str, float]
    concepts: int
    ms: float
    applied: list[str] | None = Field(None, description="in a cluster: the members that applied the upload")
    laggards: list[str] | None = Field(None, description="in a cluster: live members that had not applied it "
                                                         "when the upload answered")


class RouteCandidate(BaseModel):
    id: str
    weight: int
    effective_load: float
    capacity: int | None


class RoutePreview(BaseModel):
    policy: str
    limit: bool = Field(description="whether instances at their capacity are left out")
    instance: InstanceView | None = Field(description="the instance a route would go to now; null when none is "
                                                      "eligible (a route would answer 503)")
    candidates: list[RouteCandidate] = Field(description="the up instances it chose among, ranked as discovery ranks")


class ConceptEntry(BaseModel):
    iri: str
    kind: str
    label: str | None
    parents: list[str]


class ConceptsView(BaseModel):
    concepts: list[ConceptEntry] = Field(description="every concept of the hierarchy, by IRI, with its asserted "
                                                     "parents (a class and property tree)")


class TokenView(BaseModel):
    name: str = Field(description="the token's name ('anonymous' when no tokens are in force)")
    scopes: list[Literal["read", "write", "admin"]]
    tokens: bool = Field(description="whether this server checks tokens")
    environments: list[str] | None = Field(None, description="the environments a bound token is kept to")


class PrefixView(BaseModel):
    prefix: str
    iri: str


class RestoredView(BaseModel):
    instances: int = Field(description="instances the backup held, now registered")
    ontologies: int
    prefixes: int = Field(description="client-set prefixes")


class ErrorView(BaseModel):
    model_config = ConfigDict(extra="allow")
    error: str


class MemberView(BaseModel):
    id: str
    address: str
    status: Literal["alive", "suspect", "faulty", "left"]
    sparql: bool = Field(True, description="whether the member serves /sparql itself (the others forward to one "
                         "that does)")


class ClusterView(BaseModel):
    node: str
    members: list[MemberView]
    replicas: int
    checksum: int
    revision: int = Field(0, description="the etcd revision of the member list the ring was built from")
    degraded: bool = Field(False, description="etcd cannot be reached: serving on the last ring known")
