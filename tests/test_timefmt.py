"""One RFC 3339 form for every timestamp semreg writes: views, ontology records, logs."""
from __future__ import annotations

import datetime as dt
import json
import logging
import time

import pytest

from semreg.logs import JsonFormatter
from semreg.registry.instances import Instance, Registration
from semreg.timefmt import now_rfc3339, rfc3339


@pytest.mark.parametrize(("ts", "text"), [
    (0.0, "1970-01-01T00:00:00.000Z"),
    (1.2345, "1970-01-01T00:00:01.234Z"),  # milliseconds, truncated
    (951_782_400.999, "2000-02-29T00:00:00.999Z"),
    (1_796_000_000.5, "2026-11-30T00:53:20.500Z"),
    (None, None),
])
def test_rfc3339(ts, text):
    assert rfc3339(ts) == text


def test_now_is_the_current_time_in_the_same_form():
    before = time.time()
    stamped = dt.datetime.fromisoformat(now_rfc3339().replace("Z", "+00:00")).timestamp()
    assert before - 0.001 <= stamped <= time.time() and now_rfc3339().endswith("Z")


def test_views_and_logs_use_it():
    reg = Registration("i", "svc", "127.0.0.1", 80)
    inst = Instance(reg, registered_at=5.0, last_heartbeat=5.0, expires_at=35.0, registered_at_wall=0.0,
                    expires_at_wall=1.2345)
    view = inst.view()
    assert (view["registered_at"], view["expires_at"]) == ("1970-01-01T00:00:00.000Z", "1970-01-01T00:00:01.234Z")
    forever = Instance(reg, 5.0, 5.0, expires_at=None, registered_at_wall=0.0, expires_at_wall=None)
    assert forever.view()["expires_at"] is None
    record = logging.LogRecord("semreg.test", logging.INFO, __file__, 1, "ontology stored", (), None)
    record.created = 1_796_000_000.5
    assert json.loads(JsonFormatter().format(record))["ts"] == "2026-11-30T00:53:20.500Z"
