"""An answer cut to the size its transport carries (`semreg.dns.fit`): for any records and any size, the bytes
parse, fit, hold whole records that are a prefix of the answer (each with its additional records), with TC
set exactly when something was cut, and one more record would not have fitted."""
from __future__ import annotations

import ipaddress

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.dns.fit import Unit, fitted

DOMAIN = dns.name.from_text("semreg.")
QNAME = dns.name.from_text("_big._tcp.semreg.")
LABEL = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40)


def rrset(name: dns.name.Name, rdtype: str, text: str) -> dns.rrset.RRset:
    return dns.rrset.from_text(name, 5, "IN", rdtype, text)


@st.composite
def srv_units(draw) -> list[Unit]:
    ids = draw(st.lists(st.lists(LABEL, min_size=1, max_size=3).map(".".join), max_size=400, unique=True))
    units = []
    for n, ident in enumerate(ids):
        target = dns.name.Name([*ident.encode().split(b"."), b"instance", *DOMAIN.labels])
        srv = rrset(QNAME, "SRV", f"{draw(st.integers(0, 65535))} {draw(st.integers(0, 65535))} {n % 65536} {target}")
        glue = draw(st.sampled_from(["A", "AAAA", "CNAME", None]))
        extra: tuple[dns.rrset.RRset, ...] = ()
        if glue == "A":
            extra = (rrset(target, "A", str(ipaddress.IPv4Address(draw(st.integers(0, 2**32 - 1))))),)
        elif glue == "AAAA":
            extra = (rrset(target, "AAAA", str(ipaddress.IPv6Address(draw(st.integers(0, 2**128 - 1))))),)
        elif glue == "CNAME":
            extra = (rrset(target, "CNAME", f"{draw(LABEL)}.{draw(st.sampled_from(['example', 'example.com']))}."),)
        units.append(Unit((srv,), extra))
    return units


ADDRESSES = st.lists(st.one_of(st.integers(0, 2**32 - 1).map(lambda n: ("A", str(ipaddress.IPv4Address(n)))),
                               st.integers(0, 2**128 - 1).map(lambda n: ("AAAA", str(ipaddress.IPv6Address(n))))),
                     max_size=5000, unique=True)
A_NAME = dns.name.from_text("big.semreg.")


def response(edns: bool, rdtype: str = "SRV") -> dns.message.Message:
    query = dns.message.make_query(QNAME if rdtype == "SRV" else A_NAME, rdtype, use_edns=0 if edns else None)
    out = dns.message.make_response(query, our_payload=1232)
    out.flags |= dns.flags.AA
    return out


def records(sections: list[dns.rrset.RRset]) -> set[str]:
    return {f"{rr.name} {rr.ttl} {dns.rdatatype.to_text(rr.rdtype)} {r}" for rr in sections for r in rr}


def check(units: list[Unit], edns: bool, limit: int, rdtype: str = "SRV") -> int:
    wire = fitted(response(edns, rdtype), units, limit)
    assert len(wire) <= limit
    parsed = dns.message.from_wire(wire)  # whole records: anything cut short would not parse
    answer = records(parsed.answer)
    kept = 0
    while kept < len(units) and records(list(units[kept].answer)) <= answer:
        kept += 1
    assert answer == records([rr for u in units[:kept] for rr in u.answer])  # a prefix, nothing else
    assert records(parsed.additional) == records([rr for u in units[:kept] for rr in u.additional])
    assert bool(parsed.flags & dns.flags.TC) == (kept < len(units))
    assert (parsed.edns >= 0) == edns
    if kept < len(units):  # as many as fit: one more unit would not
        more = response(edns, rdtype)
        more.answer = [rr for u in units[:kept + 1] for rr in u.answer]
        more.additional = [rr for u in units[:kept + 1] for rr in u.additional]
        with pytest.raises(dns.exception.TooBig):
            more.to_wire(max_size=limit)
    return kept


@settings(max_examples=200, deadline=None)
@given(srv_units(), st.booleans(), st.integers(512, 65535))
def test_any_srv_answer_cut_to_any_size_keeps_a_prefix_of_whole_records_with_their_addresses(units, edns, limit):
    check(units, edns, limit)


@settings(max_examples=100, deadline=None)
@given(ADDRESSES, st.booleans(), st.integers(512, 65535))
def test_any_address_answer_cut_to_any_size_keeps_a_prefix_of_whole_records(addresses, edns, limit):
    units = [Unit((rrset(A_NAME, kind, ip),)) for kind, ip in addresses]
    check(units, edns, limit, "ANY")


def srv_answer(count: int, id_chars: int = 23) -> list[Unit]:
    units = []
    for n in range(count):
        target = dns.name.Name([f"{n:0{id_chars}d}".encode(), b"instance", *DOMAIN.labels])
        units.append(Unit((rrset(QNAME, "SRV", f"0 1 80 {target}"),),
                          (rrset(target, "A", f"10.{n // 62500}.{n // 250 % 250}.{n % 250 + 1}"),)))
    return units


# Bytes: a header (12) and the question `_big._tcp.semreg.` (22); with EDNS its OPT record (11). An instance with a
# 23-character id adds 99: its SRV record (59: the target is never compressed, RFC 2782) and its A record (40, its
# name a pointer to `instance.semreg.`), the first 9 more. Past 16,383 bytes no pointer reaches the additional
# section's first `instance.semreg.`: each A record is then 49.
@pytest.mark.parametrize("count, edns, limit, kept", [
    (0, False, 512, 0), (4, False, 512, 4), (5, False, 512, 4), (150, False, 512, 4), (150, True, 1232, 11),
    (1500, False, 65535, 606)])
def test_the_instances_kept_are_as_many_as_fit(count, edns, limit, kept):
    assert check(srv_answer(count), edns, limit) == kept
