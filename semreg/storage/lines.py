"""A backup's bytes as lines, inflated as they arrive, with a limit on the inflated size and on a line's length.

`GzipLines` takes gzip bytes in pieces of any size (a request body's chunks, a file read 64 KiB at a time),
inflates them `STEP` bytes at a time (`zlib.decompressobj` with a `max_length`: never the whole, so a small
body that inflates to gigabytes is seen growing step by step) and gives back blocks of whole lines. Both
limits are checked as the bytes stream: past `Limits.inflated_bytes` or `Limits.line_bytes` is a
`LimitPassed` naming the limit and the line, raised at the step that passes it. What it holds at once is one
step's output and the line being gathered (at most the line limit), whatever the size of the input.

Several gzip members one after another read as one stream (`cat a.gz b.gz`, as `gzip` reads them); zero
bytes after a member are padding, as `gzip` takes them. Bytes that are not gzip are `NotGzip`; a damaged
member, or a stream that ends inside one, is `Damaged` naming the last whole line. All three are
`BadRequest` (400): no input gives another exception.

No I/O: the caller feeds what it read and takes the lines back.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from semreg.errors import BadRequest

STEP = 64 * 1024  # inflated bytes per step
MAGIC = b"\x1f\x8b"
GZIP_WBITS = 31  # zlib's window bits for the gzip container


@dataclass(frozen=True)
class Limits:
    """What a restore reads at most: bytes once inflated, and bytes in one line (its newline not counted)."""

    inflated_bytes: int
    line_bytes: int


class LimitPassed(BadRequest):
    """The stream inflates past its limit, or has a line longer than the line limit."""


class NotGzip(BadRequest):
    """The stream does not start as gzip data."""


class Damaged(BadRequest):
    """A gzip member is damaged, or the stream ends inside one."""


class GzipLines:
    """Feed gzip bytes (`feed`), take blocks of whole lines back; `end()` once the input is over."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.inflated = 0  # bytes inflated so far
        self.lines = 0  # whole lines handed back so far
        self.members = 0  # gzip members started
        self._inflater: zlib._Decompress | None = None
        self._between = b""  # bytes after a member, before the next one is known to start
        self._partial: list[bytes] = []  # the line being gathered, in pieces (no newline yet)
        self._partial_bytes = 0

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        """`(number of its first line, block)` for each block of whole lines `data` completes; each block ends
        with a newline. Inflates `STEP` bytes at a time, so it is read block by block as it comes."""
        while True:
            if self._inflater is None:
                data = self._next_member(data)
                if self._inflater is None:
                    return
            inflater, given = self._inflater, len(data)
            try:
                out = inflater.decompress(data, STEP)
            except zlib.error as exc:
                raise Damaged(f"the gzip data is damaged after line {self.lines} ({exc}).", line=self.lines + 1) from None
            if inflater.eof:
                data, self._inflater = inflater.unused_data, None
            else:
                data = inflater.unconsumed_tail
            if out:
                yield from self._take(out)
            # a full step may leave output pending inside the inflater, even with no input left
            if not data and (inflater.eof or len(out) < STEP) or not out and len(data) == given and not inflater.eof:
                return

    def end(self) -> tuple[int, bytes] | None:
        """The input is over: the last line when it has no newline, `(number, text)`; None when there is none.
        `Damaged` when the stream ends inside a member; `NotGzip` when it never started one."""
        if not self.members and self._between and not MAGIC.startswith(self._between):
            raise NotGzip("the data is not gzip-compressed.", line=0)
        if self._inflater is not None or self._between.strip(b"\x00"):
            raise Damaged(f"the gzip data ends early after line {self.lines}.", line=self.lines + 1)
        if not self._partial:
            return None
        last = b"".join(self._partial)
        self._partial, self._partial_bytes = [], 0
        self.lines += 1
        return self.lines, last

    def _next_member(self, data: bytes) -> bytes:
        """Start the next gzip member if `data` (after what was left over) begins one; the bytes it begins with."""
        data = (self._between + data).lstrip(b"\x00") if self.members else self._between + data
        self._between = b""
        if len(data) < len(MAGIC):
            self._between = data  # too few bytes to tell yet
            return b""
        if not data.startswith(MAGIC):
            if not self.members:
                raise NotGzip("the data is not gzip-compressed.", line=0)
            raise Damaged(f"the gzip data is followed by {len(data)} bytes or more that are not gzip, after line "
                          f"{self.lines}.", line=self.lines + 1)
        self._inflater = zlib.decompressobj(GZIP_WBITS)
        self.members += 1
        return data

    def _take(self, out: bytes) -> Iterator[tuple[int, bytes]]:
        self.inflated += len(out)
        if self.inflated > self.limits.inflated_bytes:
            raise LimitPassed(f"the backup inflates to more than {self.limits.inflated_bytes} bytes, the limit "
                              f"(--restore-inflated-limit); it was refused at line {self.lines + 1}.",
                              limit="restore-inflated-limit", limit_bytes=self.limits.inflated_bytes, line=self.lines + 1)
        cut = out.rfind(b"\n")
        if cut < 0:
            self._gather(out)
            return
        head = out[:cut + 1]
        if self._partial:
            head = b"".join(self._partial) + head
            self._partial, self._partial_bytes = [], 0
        self._check_lines(head)
        first = self.lines + 1
        self.lines += head.count(b"\n")
        yield first, head
        if cut + 1 < len(out):
            self._gather(out[cut + 1:])

    def _gather(self, piece: bytes) -> None:
        self._partial.append(piece)
        self._partial_bytes += len(piece)
        if self._partial_bytes > self.limits.line_bytes:
            self._too_long(self.lines + 1)

    def _check_lines(self, block: bytes) -> None:
        """Every line of `block` (whole lines) within the line limit: a line longer than a block cannot be in
        it, so only blocks longer than the limit are looked through."""
        limit = self.limits.line_bytes
        if len(block) - 1 <= limit:
            return
        for n, line in enumerate(block.split(b"\n")[:-1]):
            if len(line) > limit:
                self._too_long(self.lines + 1 + n)

    def _too_long(self, line: int) -> None:
        raise LimitPassed(f"line {line} of the backup is longer than {self.limits.line_bytes} bytes, the limit "
                          f"(--restore-line-limit).", limit="restore-line-limit",
                          limit_bytes=self.limits.line_bytes, line=line)
