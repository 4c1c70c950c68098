"""Backups of what a node or a ring holds, and their restore (the file itself is `semreg.storage.backup`'s).

A snapshot is taken at once: on a node alone, in one step of the event loop (registrations are immutable,
so holding each with its revision, admin status and registration time is enough, and nothing can change
between two of them); the records are built and compressed later, on a worker thread, while writers go on.
Through a ring it gathers what every member holds, as hand-offs and anti-entropy do (`inventory`, then
`export` of the newest copy of each instance from the member holding it): each instance once, at its
newest revision, and none whose newest revision anywhere is a removal.

A restore is checked whole before anything changes (every registration as the file is read, then every prefix,
saved query and ontology, which is parsed), refused with a `Conflict` when the target already holds something unless forced, then
applied: ontologies (through the same path as an upload, so a ring takes them on every node), prefixes, saved
queries with their owners (after the ontologies and prefixes their terms may need), then the
instances with their owner, registration time and status, on their owners as a hand-off puts them
(`restore_records`), acknowledged at the write quorum.
"""
from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from semreg.errors import BadRequest, Conflict, SemregError, Unavailable
from semreg.knowledge.knowledge import Knowledge
from semreg.knowledge.queries import CONJUNCTIVE_FIELDS, FIELDS, SavedQuery, check_name
from semreg.rdf import parsing
from semreg.rdf.terms import check_iri, validate_prefix_name
from semreg.registry.instances import Registration
from semreg.registry.local_shard import LocalShard
from semreg.registry.placement import Placement
from semreg.registry.quorum import Quorum, Stragglers
from semreg.registry.saved import discovery_of
from semreg.registry.shard import ShardUnavailable
from semreg.storage import backup
from semreg.storage.backup import Contents, OntologyCopy, QueryCopy

EXPORT_BATCH = 2000  # ids a member is asked to export at once (as anti-entropy does)
RESTORE_BATCH = 1000  # records sent to the owners at once

PublishOntology = Callable[[str, str, str], Awaitable[Any]]  # (name, sha256, media type): to every node
PublishPrefix = Callable[[str, str], Awaitable[Any]]
PublishQuery = Callable[[SavedQuery], Awaitable[Any]]


@dataclass
class Snapshot:
    """What a backup holds, taken at one moment: either live registrations (a node alone) with their revision,
    admin status and registration time, or durable records gathered from a ring."""

    ontologies: list[OntologyCopy]
    prefixes: dict[str, str]
    taken_at: float
    held: list[tuple[Registration, int, str, float]] | None = None
    gathered: list[tuple[dict[str, Any], int]] | None = None
    queries: list[QueryCopy] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.held if self.held is not None else self.gathered or ())

    def records(self) -> Iterator[tuple[dict[str, Any], int]]:
        if self.gathered is not None:
            yield from self.gathered
            return
        for reg, revision, admin_status, registered_at in self.held or ():
            rec = reg.record()
            rec["registered_at"] = registered_at
            if admin_status != "up":
                rec["admin_status"] = admin_status
            yield rec, revision

    def chunks(self) -> Iterator[bytes]:
        """The backup file, gzipped, a chunk at a time (pull it from a worker thread)."""
        return backup.encode(self.records(), self.ontologies, self.prefixes, self.taken_at, queries=self.queries)


def whole_knowledge(knowledge: Knowledge) -> tuple[list[OntologyCopy], dict[str, str]]:
    """The ontologies as uploaded (in upload order) and the client-set prefixes, as they are now."""
    ontologies = knowledge.ontologies
    copies = [OntologyCopy(m.name, m.media_type, m.uploaded_at, ontologies.sources[m.name].decode("utf-8"),
                           tuple(ontologies.triples.get(m.name, ())))
              for m in sorted(ontologies.metas.values(), key=lambda m: (m.uploaded_at, m.name))]
    return copies, knowledge.prefixes.explicit


def saved_queries(knowledge: Knowledge) -> list[QueryCopy]:
    """The saved queries with their owners, as they are now."""
    return [QueryCopy(q.name, q.owner, dict(q.query)) for q in knowledge.queries.all()]


async def snapshot(placement: Placement, knowledge: Knowledge, wall: float) -> Snapshot:
    ontologies, prefixes = whole_knowledge(knowledge)
    queries = saved_queries(knowledge)
    readers = placement.readers()
    if len(readers) == 1 and isinstance(readers[0][1], LocalShard):
        instances = readers[0][1].registry.instances
        held = [(i.reg, i.revision, i.admin_status, i.registered_at_wall) for i in instances.values()]
        return Snapshot(ontologies, prefixes, wall, held=held, queries=queries)
    return Snapshot(ontologies, prefixes, wall, gathered=await gather(placement), queries=queries)


async def inventories(placement: Placement) -> dict[str, tuple[int, Any]]:
    """The newest revision of every instance anywhere (a removal's negated, as in `inventory`), with a shard
    that holds it; `Unavailable` when a member that did not answer may hold records no other covered.

    At a million instances each inventory is a fraction of a second's loop and merging them more: both are
    done off the event loop (`Shard.inventory`, `newest_of`), which goes on serving meanwhile."""
    held: list[tuple[Any, dict[str, int]]] = []
    failed = []
    for member, shard in placement.readers():
        try:
            held.append((shard, await shard.inventory()))
        except ShardUnavailable:
            placement.failed(member)
            failed.append(member)
    missing = placement.missing(failed)
    if missing:
        raise Unavailable(f"members {', '.join(missing)} did not answer, and only they hold some records; a backup "
                          f"or restore needs them all. Try again.", retry_after_s=5)
    return await asyncio.to_thread(newest_of, held)


def newest_of(held: list[tuple[Any, dict[str, int]]]) -> dict[str, tuple[int, Any]]:
    """id → (its newest revision among the inventories, the first shard holding it at that revision)."""
    newest: dict[str, tuple[int, Any]] = {}
    for shard, revisions in held:
        for iid, revision in revisions.items():
            if abs(revision) > abs(newest.get(iid, (0, None))[0]):
                newest[iid] = (revision, shard)
    return newest


def by_holder(newest: dict[str, tuple[int, Any]]) -> list[tuple[Any, list[str]]]:
    """The instances whose newest revision is a registration, by the shard to export each from, ids sorted."""
    groups: dict[int, tuple[Any, list[str]]] = {}
    for iid, (revision, shard) in newest.items():
        if revision > 0:
            groups.setdefault(id(shard), (shard, []))[1].append(iid)
    for _, ids in groups.values():
        ids.sort()
    return list(groups.values())


async def gather(placement: Placement) -> list[tuple[dict[str, Any], int]]:
    """The newest durable copy of every registered instance in the ring (removed ones left out)."""
    found: dict[str, tuple[dict[str, Any], int]] = {}
    for shard, ids in await asyncio.to_thread(by_holder, await inventories(placement)):
        for start in range(0, len(ids), EXPORT_BATCH):
            for rec, revision in await shard.export(ids[start:start + EXPORT_BATCH]):
                if not rec.get("deleted"):  # removed since the inventory
                    found[rec["id"]] = (rec, revision)
            await asyncio.sleep(0)
    return await asyncio.to_thread(lambda: [found[iid] for iid in sorted(found)])


# -- restore --------------------------------------------------------------------------------------------
def check_record(rec: dict[str, Any]) -> None:
    """One registration of a backup checked as the registry would take it (400 naming it if it is not one),
    its health check kept as a registration stores it: only the target it names. `backup_reading` calls it on
    each record as it is read."""
    if isinstance(rec.get("check"), dict):
        rec["check"] = {k: v for k, v in rec["check"].items() if v is not None}
    try:
        reg = Registration.from_record(rec)
        if not 1 <= reg.port <= 65535 or reg.weight < 1:
            raise ValueError("its port or weight is out of range")
    except (KeyError, TypeError, ValueError) as exc:
        raise BadRequest(f"the backup's instance '{rec.get('id')}' is not a valid registration: {exc}.",
                         instance=rec.get("id")) from None


def check(contents: Contents) -> None:
    """Every prefix and ontology name of a backup, checked (400 naming the first that is not one); its
    registrations were as it was read (`check_record`)."""
    for prefix, iri in contents.prefixes:
        validate_prefix_name(prefix)
        check_iri(iri)
    for o in contents.ontologies:
        parsing.validate_name(o.name)
        try:
            parsing.media_type_of(o.media_type)
        except SemregError as exc:
            raise BadRequest(f"the backup's ontology '{o.name}' has a media type semreg does not read: "
                             f"{exc.message}", ontology=o.name) from None


async def check_ontologies(contents: Contents, knowledge: Knowledge) -> None:
    """Each ontology parses as its media type (what its upload will do again)."""
    for o in contents.ontologies:
        try:
            await asyncio.to_thread(knowledge.ontologies.parse, o.source.encode(), o.media_type)
        except BadRequest as exc:
            raise BadRequest(f"the backup's ontology '{o.name}' does not parse: {exc.message}", ontology=o.name) from None


def check_queries(contents: Contents) -> None:
    """Each saved query's name is one, and its fields are those of a saved query (their terms are read once
    the backup's ontologies and prefixes are in)."""
    for q in contents.queries:
        check_name(q.name)
        unknown = set(q.query) - set(FIELDS) - set(CONJUNCTIVE_FIELDS)
        if unknown or not (isinstance(q.query.get("s"), str) or isinstance(q.query.get("all"), list)):
            raise BadRequest(f"the backup's saved query '{q.name}' is not a saved query (fields "
                             f"{', '.join(sorted(q.query))}).", query=q.name)


def same_ontology(o: OntologyCopy, knowledge: Knowledge) -> bool:
    """Whether the registry holds the backup's ontology `o` as it is: under its name, the same document as
    uploaded. A node that preloads the ontology its backup also holds (`--ontology`, `dev.py serve`) is empty
    for a restore: restoring changes nothing of it."""
    held = knowledge.ontologies.sources.get(o.name)
    return held is not None and held == o.source.encode()


def refuse_unless_empty(held: dict[str, tuple[int, Any]], knowledge: Knowledge, contents: Contents) -> None:
    """409 unless the registry holds nothing a restore would replace or keep beside the backup's: no instance,
    client-set prefix or saved query, and no ontology other than those the backup holds the same."""
    instances = sum(1 for revision, _ in held.values() if revision > 0)
    same = {o.name for o in contents.ontologies if same_ontology(o, knowledge)}
    others = sorted(name for name in knowledge.ontologies.metas if name not in same)
    ontologies, prefixes, queries = len(others), len(knowledge.prefixes.explicit), len(knowledge.queries)
    if instances or ontologies or prefixes or queries:
        held_text = ", ".join(part for n, part in (
            (instances, f"{instances} instances"),
            (ontologies, f"{ontologies} ontologies the backup does not hold as they are ({', '.join(others[:3])}"
                         f"{', ...' if len(others) > 3 else ''})"),
            (prefixes, f"{prefixes} client-set prefixes"), (queries, f"{queries} saved queries")) if n)
        raise Conflict(f"the registry is not empty ({held_text}): restore into an empty node or ring, or with force "
                       f"(semreg restore --force, or ?force=true) to replace what the backup names and keep the rest.",
                       instances=instances, ontologies=ontologies, prefixes=prefixes, queries=queries)


async def restore(placement: Placement, stragglers: Stragglers, knowledge: Knowledge, contents: Contents, force: bool,
                  by: str | None = None, publish_ontology: PublishOntology | None = None,
                  publish_prefix: PublishPrefix | None = None, publish_query: PublishQuery | None = None
                  ) -> dict[str, int]:
    """Apply a backup read with `check_record` (see the module's docstring); the counts of what it held. The
    instances are read back from where the reading put them aside a batch at a time, on a worker thread."""
    await asyncio.to_thread(check, contents)
    check_queries(contents)
    await check_ontologies(contents, knowledge)
    held = await inventories(placement)
    if not force:
        refuse_unless_empty(held, knowledge, contents)
    placement.check_writable()
    for o in contents.ontologies:
        change = await knowledge.ontologies.put(o.name, o.source.encode(), o.media_type)
        if publish_ontology is not None:
            await publish_ontology(o.name, change.meta.sha256, change.meta.media_type)
    for prefix, iri in contents.prefixes:
        await knowledge.put_prefix(prefix, iri, by=by, forced=True)
        if publish_prefix is not None:
            await publish_prefix(prefix, iri)
    for q in contents.queries:
        saved = SavedQuery(q.name, dict(q.query), q.owner)
        discovery_of(saved, knowledge.prefixes)  # its terms, now that the backup's prefixes are in
        await knowledge.queries.put(saved, by=by)
        if publish_query is not None:
            await publish_query(saved)
    batches = _batches(iter(contents.records), RESTORE_BATCH)
    while (batch := await asyncio.to_thread(next, batches, None)) is not None:
        # a copy older than what the target holds of that id (a replaced instance, a removal) would be
        # ignored: it is written at a new revision instead
        await _send(placement, stragglers, [(rec, revision if revision > abs(held.get(rec["id"], (0, None))[0])
                                              else placement.next_revision()) for rec, revision in batch])
    return contents.counts()


def _batches(items: Iterator[tuple[dict[str, Any], int]], n: int) -> Iterator[list[tuple[dict[str, Any], int]]]:
    while batch := list(itertools.islice(items, n)):
        yield batch


async def _send(placement: Placement, stragglers: Stragglers, items: list[tuple[dict[str, Any], int]]) -> None:
    by_id = {rec["id"]: (rec, revision) for rec, revision in items}

    def send(member: str, shard: Any, ids: list[str], first: bool) -> Any:
        return shard.restore_records([by_id[i] for i in ids])

    quorum = Quorum(placement, stragglers, list(by_id), send)
    short = await quorum.run(lambda member, ids, answer: None)
    if short:
        raise Unavailable(f"the restore reached too few owners of '{short[0]}' (and maybe others); what was "
                          f"restored stays. Try again with force.", retry_after_s=1)


