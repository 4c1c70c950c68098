"""Leases, statuses and change notifications, on a clock the tests move (no sleeping)."""
from __future__ import annotations

import pytest

from semreg.errors import NotFound
from semreg.instances import CRITICAL, UP, Registration
from semreg.registry import Registry
from semreg.terms import Tag

T = Tag("http://x/A")


def reg(iid="a", ttl=10.0, dereg=30.0, **kw):
    return Registration(id=iid, service="svc", address="10.0.0.1", port=80, tags=(T,), ttl_s=ttl,
                        deregister_after_s=dereg, **kw)


@pytest.fixture
def registry():
    changes = []
    r = Registry(on_change=changes.extend)
    r.changes = changes
    return r


def test_ttl_expiry_makes_critical_then_deletes(registry):
    registry.put(reg(ttl=10, dereg=30), now=100)
    assert registry.next_deadline() == 110
    assert registry.expire(109.9) == []
    [c] = registry.expire(110)
    assert c.reason == "expired" and c.membership and registry.get("a").status == CRITICAL
    assert registry.next_deadline() == 130  # deregister_after counts from the last heartbeat
    [c] = registry.expire(130)
    assert c.reason == "deleted" and c.after is None
    with pytest.raises(NotFound):
        registry.get("a")
    assert registry.catalogue.holders == {}


def test_heartbeat_revives_a_critical_instance_and_renews(registry):
    registry.put(reg(ttl=10), now=0)
    registry.expire(10)
    inst = registry.heartbeat("a", now=12, load=3)
    assert inst.status == UP and inst.expires_at == 22 and inst.load == 3
    assert registry.changes[-1].membership and registry.changes[-1].reason == "status"
    registry.heartbeat("a", now=13)
    assert not registry.changes[-1].membership  # a renewal alone changes no result


def test_ttl_zero_never_expires(registry):
    registry.put(reg(ttl=0), now=0)
    assert registry.next_deadline() is None and registry.expire(1e12) == []


def test_deregister_after_zero_keeps_critical_instances(registry):
    registry.put(reg(ttl=1, dereg=0), now=0)
    registry.expire(1)
    assert registry.next_deadline() is None and registry.get("a").status == CRITICAL


def test_admin_status_and_checks(registry):
    registry.put(reg(ttl=0), now=0)
    assert registry.heartbeat("a", now=1, status="draining").status == "draining"
    registry.set_check_result("a", False, now=2)
    assert registry.get("a").status == CRITICAL
    registry.set_check_result("a", True, now=3)
    assert registry.get("a").status == "draining"


def test_replace_keeps_registration_time_and_reindexes(registry):
    registry.put(reg(), now=5)
    inst, created = registry.put(Registration(id="a", service="other", address="h", port=1, tags=(Tag("http://x/B"),)),
                                 now=9)
    assert not created and inst.registered_at == 5 and inst.revision == 2
    assert set(registry.catalogue.holders) == {Tag("http://x/B")}
    assert registry.by_service == {"other": {"a"}}


def test_heartbeat_unknown_is_not_found(registry):
    with pytest.raises(NotFound):
        registry.heartbeat("nope", now=0)
