"""An answer cut to the size its transport carries: as many whole records as fit, in the answer's order.

An answer is a list of units, each the records one instance brings: its SRV record (or its address) in the
answer section, and its target's A/AAAA/CNAME in the additional section. A cut keeps a prefix of units, each
whole, so that the additional section names exactly the SRV targets kept (Consul trims the same way), and sets
TC when any unit was left out (over UDP the client may ask again over TCP; over TCP, whose message is at most
65,535 bytes, it says the answer is partial). dnspython writes the bytes; this module only chooses how many
units. Pure.

Writing a record with dnspython takes about 10 µs, so the count is found without writing the whole answer
again and again: once with no limit, up to the first unit whose answer records alone pass the limit, to learn
what each unit adds; then the count this predicts, and the one after it, written within the limit (each stops
at the first record that does not fit). Name compression makes a unit's size depend on what came before it;
where the prediction misses, a search from it finds the count.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dns.exception
import dns.flags
import dns.message
import dns.renderer
import dns.rrset

UNLIMITED = 2**31  # a renderer's size for measuring, never reached


@dataclass(frozen=True)
class Unit:
    """What one instance adds to an answer: records of the answer section, and of the additional section."""

    answer: tuple[dns.rrset.RRset, ...]
    additional: tuple[dns.rrset.RRset, ...] = ()


def fitted(response: dns.message.Message, units: Sequence[Unit], limit: int, left_out: bool = False) -> bytes:
    """`response` (its question, flags, EDNS and authority section) with as many of `units` as fit in `limit`
    bytes (at least 512), in order, TC set when some were left out (or, with `left_out`, others were before
    these were given). `response`'s answer and additional sections are replaced."""

    def render(count: int) -> bytes | None:
        response.answer = [rr for unit in units[:count] for rr in unit.answer]
        response.additional = [rr for unit in units[:count] for rr in unit.additional]
        if count < len(units) or left_out:
            response.flags |= dns.flags.TC
        else:
            response.flags &= ~dns.flags.TC
        try:
            return response.to_wire(max_size=limit)
        except dns.exception.TooBig:
            return None

    whole = render(len(units))
    if whole is not None:
        return whole
    return largest(render, len(units), predicted(response, units, limit, len(render(0) or b"")))


def predicted(response: dns.message.Message, units: Sequence[Unit], limit: int, empty: int) -> int:
    """How many units fit in `limit` bytes, from what each adds when all are written one after another with no
    limit (stopping once the answer section alone passes it); `empty` is the size of the answer without any."""
    out = dns.renderer.Renderer(response.id, response.flags, UNLIMITED)
    for question in response.question:
        out.add_question(question.name, question.rdtype, question.rdclass)
    start = out.output.tell()
    answers: list[int] = []  # where each unit's answer records end
    for unit in units:
        for rr in unit.answer:
            out.add_rrset(dns.renderer.ANSWER, rr)
        answers.append(out.output.tell() - start)
        if answers[-1] > limit:
            break
    extra = 0
    for count, unit in enumerate(units[:len(answers)], 1):
        before = out.output.tell()
        for rr in unit.additional:
            out.add_rrset(dns.renderer.ADDITIONAL, rr)
        extra += out.output.tell() - before
        if empty + answers[count - 1] + extra > limit:
            return count - 1
    return len(answers)


def largest(render: Callable[[int], bytes | None], total: int, guess: int) -> bytes:
    """The bytes of the largest count (below `total`, which does not fit) whose bytes fit, searched from `guess`:
    up or down by doubling steps from it, then halving between the last count that fit and the first that did
    not. A count of 0 (no units) always fits."""
    low, high = 0, total  # `low` fits (or is 0), `high` does not
    best: bytes | None = None
    guess = min(max(guess, 0), total - 1)
    step = 1
    wire = render(guess)
    if wire is not None:
        low, best = guess, wire
        while low + step < high and (wire := render(low + step)) is not None:
            low, best, step = low + step, wire, step * 2
        high = min(high, low + step)
    else:
        high = guess
        while high - step > low and (wire := render(high - step)) is None:
            high, step = high - step, step * 2
        if high - step > low:
            low, best = high - step, wire
    while high - low > 1:
        middle = (low + high) // 2
        wire = render(middle)
        if wire is None:
            high = middle
        else:
            low, best = middle, wire
    if best is None:
        best = render(low)
    if best is None:  # not even the question fits: cannot happen from 512 bytes up, but never send a broken answer
        raise dns.exception.TooBig("not even the question fits")
    return best
