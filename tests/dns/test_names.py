"""What a DNS question's name asks (`semreg.dns.names`): a table."""
from __future__ import annotations

import dns.name
import pytest
from hypothesis import given
from hypothesis import strategies as st

from semreg.dns.names import ADDRESS, APEX, INSTANCE, SERVICE, SRV, UNKNOWN, Asked, asked, instance_name, zone

DOMAIN = zone("semreg")


@pytest.mark.parametrize("name, expected", [
    ("semreg.", Asked(APEX)),
    ("_horror._tcp.semreg.", Asked(SRV, "horror")),
    ("_Horror._TCP.SEMREG.", Asked(SRV, "horror")),
    ("_horror._tcp.staging.semreg.", Asked(SRV, "horror", "staging")),
    ("horror.semreg.", Asked(ADDRESS, "horror")),
    ("horror.Staging.semreg.", Asked(ADDRESS, "horror", "Staging")),
    ("livro-1.instance.semreg.", Asked(INSTANCE, "livro-1")),
    ("a.b:c.instance.semreg.", Asked(INSTANCE, "a.b:c")),
    ("_horror._udp.semreg.", Asked(UNKNOWN)),
    ("a.b.c.semreg.", Asked(UNKNOWN)),
    ("_horror._tcp.a.b.semreg.", Asked(UNKNOWN)),
    ("horror.service.semreg.", Asked(SERVICE, "horror")),
    ("Horror.SERVICE.semreg.", Asked(SERVICE, "horror")),
    ("Primary.horror.service.semreg.", Asked(SERVICE, "horror", None, "primary")),
    ("_horror._primary.service.semreg.", Asked(SERVICE, "horror", None, "primary")),
    ("_horror._tcp.service.semreg.", Asked(SERVICE, "horror")),
    ("horror.service.Staging.semreg.", Asked(SERVICE, "horror", "Staging")),
    ("v1.horror.service.staging.semreg.", Asked(SERVICE, "horror", "staging", "v1")),
    ("horror.service.service.semreg.", Asked(SERVICE, "horror", "service")),
    ("service.semreg.", Asked(ADDRESS, "service")),  # a saved query named `service` keeps its name
    ("service.staging.semreg.", Asked(ADDRESS, "service", "staging")),
    ("a.b.horror.service.semreg.", Asked(UNKNOWN)),
    ("_horror.primary.service.semreg.", Asked(UNKNOWN)),
    ("example.com.", None),
    ("semreg.example.com.", None),
])
def test_a_name_asks_what_its_place_in_the_zone_says(name, expected):
    assert asked(dns.name.from_text(name), DOMAIN) == expected


@pytest.mark.parametrize("domain, expected", [("semreg", "semreg."), ("semreg.", "semreg."),
                                              ("svc.example.com.", "svc.example.com.")])
def test_the_zone_is_absolute_with_or_without_its_final_dot(domain, expected):
    assert zone(domain).to_text() == expected


@pytest.mark.parametrize("domain", ["", ".", "a..b"])
def test_a_zone_that_is_no_name_is_refused(domain):
    with pytest.raises(ValueError):
        zone(domain)


def test_an_instance_name_round_trips_and_an_id_too_long_for_a_label_has_none():
    name = instance_name("a.b:c", DOMAIN)
    assert name is not None and asked(name, DOMAIN) == Asked(INSTANCE, "a.b:c")
    assert instance_name("x" * 64, DOMAIN) is None


@given(st.lists(st.sampled_from([b"service", b"SERVICE", b"_tcp", b"_x", b"x", b"instance", b"_"])
                | st.binary(min_size=1, max_size=8), max_size=6))
def test_any_name_in_the_zone_asks_something_and_never_raises(labels):
    what = asked(dns.name.Name([*labels, b"semreg", b""]), DOMAIN)
    assert what is not None and what.kind in (ADDRESS, APEX, INSTANCE, SERVICE, SRV, UNKNOWN)
    assert what.tag is None or what.kind == SERVICE
