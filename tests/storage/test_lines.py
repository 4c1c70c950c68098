"""A backup's bytes as lines (`semreg.storage.lines`): wherever the input is cut into pieces, the same lines come
out; any mix of gzip members and other bytes gives lines or a 400, never another exception; and both limits are
checked as the bytes stream, naming the line."""
from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.errors import BadRequest
from semreg.storage.lines import STEP, Damaged, GzipLines, LimitPassed, Limits, NotGzip

WIDE = Limits(1 << 40, 1 << 30)
text_lines = st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b" ")), max_size=40)


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    at = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *at], [*at, len(data)])]


def read(chunks: list[bytes], limits: Limits = WIDE) -> bytes:
    """Everything `GzipLines` gives back, joined; the line numbers it gives checked as it goes."""
    lines, out = GzipLines(limits), []
    for chunk in chunks:
        for first, block in lines.feed(chunk):
            assert first == sum(b.count(b"\n") for b in out) + 1 and block.endswith(b"\n")
            out.append(block)
    last = lines.end()
    if last is not None:
        out.append(last[1])
    return b"".join(out)


def members(text: bytes, splits: list[int], level: int) -> bytes:
    """`text` as one gzip member or several (`cat a.gz b.gz`), cut where `splits` say."""
    return b"".join(gzip.compress(part, compresslevel=level, mtime=0) for part in pieces(text, splits) if part) or \
        gzip.compress(b"", mtime=0)


@settings(max_examples=200, deadline=None)
@given(text_lines, st.lists(st.integers(0, 1 << 20), max_size=5), st.lists(st.integers(0, 1 << 20), max_size=12),
       st.integers(0, 9), st.booleans())
def test_wherever_the_bytes_are_cut_the_same_lines_come_out(lines, splits, cuts, level, ends_with_newline):
    text = b"\n".join(lines) + (b"\n" if ends_with_newline and lines else b"")
    data = members(text, splits, level)
    assert read(pieces(data, cuts)) == text


def test_a_bomb_is_inflated_a_step_at_a_time_and_each_step_read_before_the_next():
    data = gzip.compress(b"line\n" * (4 * STEP // 5), mtime=0)  # 4 steps of output from 1 KiB
    lines, seen = GzipLines(WIDE), []
    for _, block in lines.feed(data):
        seen.append((lines.inflated, len(block)))
    assert len(seen) == 4 and all(inflated <= STEP * (k + 1) for k, (inflated, _) in enumerate(seen))


parts = st.lists(st.one_of(st.binary(max_size=200).map(lambda b: gzip.compress(b, mtime=0)), st.binary(max_size=40),
                           st.just(b"\x00\x00"), st.just(b"\x1f\x8b"), st.just(b"\x1f")), max_size=6)


@settings(max_examples=300, deadline=None)
@given(parts, st.lists(st.integers(0, 1 << 12), max_size=8))
def test_any_mix_of_gzip_and_other_bytes_gives_lines_or_a_400(parts, cuts):
    data = b"".join(parts)
    try:
        expected = gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        expected = None
    try:
        got = read(pieces(data, cuts))
    except BadRequest as exc:
        assert isinstance(exc, (NotGzip, Damaged)) and exc.message
        assert expected is None or not data, (data, exc.message)  # what gzip reads, this reads (empty aside)
        return
    assert got == expected or (not data and got == b"")


@settings(max_examples=150, deadline=None)
@given(text_lines, st.integers(1, 400), st.lists(st.integers(0, 1 << 20), max_size=6))
def test_the_first_line_past_the_line_limit_is_named(lines, limit, cuts):
    text = b"".join(line + b"\n" for line in lines)
    long = [n for n, line in enumerate(lines, 1) if len(line) > limit]
    try:
        got = read(pieces(gzip.compress(text, mtime=0), cuts), Limits(1 << 40, limit))
    except LimitPassed as exc:
        assert long and exc.extra["line"] == long[0] and exc.extra["limit"] == "restore-line-limit", exc.message
        return
    assert not long and got == text


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5 * STEP), st.integers(0, 1 << 20))
def test_the_inflated_limit_is_checked_as_the_bytes_stream(limit, cut):
    text = b"0123456789abcde\n" * (3 * STEP // 16)
    data = gzip.compress(text, mtime=0)
    if limit >= len(text):
        assert read(pieces(data, [cut]), Limits(limit, 1 << 20)) == text
        return
    lines = GzipLines(Limits(limit, 1 << 20))
    with pytest.raises(LimitPassed, match="--restore-inflated-limit") as passed:
        for chunk in pieces(data, [cut]):
            for _ in lines.feed(chunk):
                pass
    assert passed.value.extra["limit"] == "restore-inflated-limit"
    assert limit < lines.inflated <= limit + STEP  # refused at the step that passed it, not at the end


@pytest.mark.parametrize("data, error", [
    (b"plain text\n", NotGzip), (b"x", NotGzip), (gzip.compress(b"a\nb\n")[:-4], Damaged),
    (gzip.compress(b"a\n") + b"\x00\x00\x00", None), (gzip.compress(b"a\n") + b"trailing", Damaged),
    (b"\x1f\x8b" + b"\x00" * 20, Damaged), (b"", None),
], ids=["plain", "one byte", "cut", "zero padding", "trailing bytes", "a damaged header", "nothing"])
def test_what_is_not_whole_gzip_says_so(data, error):
    if error is None:
        read([data])
    else:
        with pytest.raises(error):
            read([data])
