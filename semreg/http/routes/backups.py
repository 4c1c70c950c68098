"""Backup and restore: the whole registry (instances, ontologies as uploaded, client-set prefixes, saved
queries with their owners) as one gzipped N-Quads file, streamed out, and taken back in as it streams in
(`semreg.registry.backups`, `semreg.storage.backup`, `semreg.storage.backup_reading`)."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from semreg.access.tokens import ADMIN
from semreg.errors import Conflict, PayloadTooLarge, UnsupportedMediaType
from semreg.http import schemas as s
from semreg.http.endpoints import Endpoints, Param, Reply
from semreg.http.requests import bool_param
from semreg.http.responses import JSONResponse
from semreg.http.routes.common import cluster_of, coordinator_of, knowledge_of, principal_of
from semreg.http.state import app_state
from semreg.registry import backups
from semreg.storage import backup, backup_reading
from semreg.timefmt import rfc3339

API = Endpoints()
GZIP = {backup.MEDIA_TYPE: {"schema": {"type": "string", "contentMediaType": backup.MEDIA_TYPE}}}
# a restore also takes the file as plain bytes (`curl --data-binary` sends it so): a gzip file is one
RESTORE_BODY = {**GZIP, "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
GZIP_TYPES = (backup.MEDIA_TYPE, "application/x-gzip", "application/octet-stream")
FEED_BYTES = 256 * 1024  # body bytes handed to the reading at once


@API.route("GET", "/v1/backup", scope=ADMIN, summary="one consistent snapshot of the registry: gzipped N-Quads",
           replies=[Reply(200, description="the backup, streamed", content=GZIP,
                          headers={"Content-Disposition": {"schema": {"type": "string"}}})], errors=(503,))
async def get_backup(request: Request) -> Response:
    wall = app_state(request).clock.wall()
    # taken here, in one step of the loop on a node alone; built and compressed on a worker thread
    snap = await backups.snapshot(coordinator_of(request).placement, knowledge_of(request), wall)
    name = "semreg-backup-" + (rfc3339(wall) or "").replace(":", "").replace("-", "") + ".nq.gz"
    return StreamingResponse(_streamed(snap.chunks()), media_type=backup.MEDIA_TYPE,
                             headers={"Content-Disposition": f'attachment; filename="{name}"',
                                      "X-Semreg-Instances": str(len(snap))})


async def _streamed(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
        if chunk:
            yield chunk


@API.route("POST", "/v1/restore", scope=ADMIN, summary="load a backup into an empty node or ring",
           params=(Param("force", schema={"type": "boolean"}, description="restore into a registry that holds "
                         "something: the backup's instances, ontologies and prefixes replace those of the same "
                         "id or name; nothing else is removed"),),
           body=RESTORE_BODY, replies=[Reply(200, s.RestoredView)], errors=(409, 413, 415, 503))
async def post_restore(request: Request) -> Response:
    force = bool_param(request, "force", False)
    media = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if media not in GZIP_TYPES:
        raise UnsupportedMediaType(f"a restore takes a backup as {backup.MEDIA_TYPE} (what semreg backup and GET "
                                   f"/v1/backup write), not '{media[:60] or 'no Content-Type'}'.")
    cluster = cluster_of(request)
    coordinator = coordinator_of(request)
    lock = app_state(request).restore_lock
    if lock.locked():
        raise Conflict("another restore is running on this node; wait for it to finish.")
    async with lock:
        reading = backup_reading.Reading(backup_reading.limits_of(app_state(request).settings), backups.check_record)
        try:
            await _read(request, reading, app_state(request).settings.restore_body_limit_bytes)
            contents = await asyncio.to_thread(reading.finish)
            counts = await backups.restore(
                coordinator.placement, coordinator.stragglers, knowledge_of(request), contents, force,
                by=principal_of(request).name,
                publish_ontology=cluster.publish_ontology if cluster is not None else None,
                publish_prefix=cluster.publish_prefix if cluster is not None else None,
                publish_query=cluster.publish_query if cluster is not None else None)
        finally:
            reading.close()
    return JSONResponse(counts)


async def _read(request: Request, reading: backup_reading.Reading, limit_bytes: int) -> None:
    """The body read into `reading` as it arrives, `FEED_BYTES` at a time on a worker thread (inflating and parsing
    grow with the body, so they stay off the event loop), never more than `limit_bytes` of it (413, from
    Content-Length when it says so). A body past a limit of the reading is refused as soon as it passes it."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit_bytes:
        raise PayloadTooLarge(f"the backup is {int(declared)} bytes; the limit is {limit_bytes} bytes "
                              f"(--restore-body-limit).", limit_bytes=limit_bytes)
    size, held, pending = 0, 0, list[bytes]()
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit_bytes:
            raise PayloadTooLarge(f"the backup is larger than the limit of {limit_bytes} bytes (--restore-body-limit).",
                                  limit_bytes=limit_bytes)
        pending.append(chunk)
        held += len(chunk)
        if held >= FEED_BYTES:
            await asyncio.to_thread(reading.feed, pending[0] if len(pending) == 1 else b"".join(pending))
            held, pending = 0, []
    if pending:
        await asyncio.to_thread(reading.feed, b"".join(pending))
