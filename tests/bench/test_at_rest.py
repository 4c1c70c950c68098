"""The at-rest scenario's pure parts: each acknowledged batch's lag until the count at rest covers it,
weighed by its registrations; its quantiles; and its settings."""
from __future__ import annotations

import argparse

import pytest

from semreg.bench import configure
from semreg.bench.peers import BenchError
from semreg.bench.scenarios import SCENARIOS, default_names
from semreg.bench.scenarios.at_rest import lags_s, quantiles
from semreg.bench.settings import from_args


def test_a_batch_is_at_rest_at_the_first_reading_that_counts_it_and_its_lag_weighs_its_registrations():
    acks = [(1.0, 100), (2.0, 200), (3.0, 300), (4.0, 1000)]  # acknowledged at, registrations so far
    readings = [(0.5, 0), (1.5, 50), (2.5, 250), (3.2, 300), (9.0, 1000)]  # read at, registrations at rest
    lags = lags_s(acks, readings)
    # 100 at 1.5 s (batch 1: 2.5 - 1.0), 100 at 0.5 s, 100 at 0.2 s, 700 at 5 s
    assert lags == {"p50": 5.0, "p90": 5.0, "p99": 5.0, "max": 5.0}
    assert lags_s(acks[:3], readings) == {"p50": 0.5, "p90": 1.5, "p99": 1.5, "max": 1.5}


def test_a_reading_before_its_acknowledgement_is_no_negative_lag():
    assert lags_s([(2.0, 10)], [(1.9, 10)])["max"] == 0.0


def test_registrations_never_counted_at_rest_are_an_error_not_a_figure():
    with pytest.raises(BenchError, match="never showed as at rest"):
        lags_s([(1.0, 10), (2.0, 20)], [(3.0, 10)])


def test_quantiles_are_read_off_the_sorted_values():
    assert quantiles([float(v) for v in range(100, 0, -1)], 1) == {"p50": 51.0, "p90": 91.0, "p99": 100.0,
                                                                   "max": 100.0}


def _settings(*argv: str):
    parser = argparse.ArgumentParser()
    configure(parser)
    return from_args(parser.parse_args(list(argv)), tuple(SCENARIOS))


def test_the_scenario_runs_only_when_named_and_takes_its_rate_and_length():
    assert "at-rest" in SCENARIOS and "at-rest" not in default_names()
    s = _settings("--only", "at-rest")
    assert (s.at_rest_rate, s.at_rest_seconds) == (2000, 60)
    assert (_settings("--quick").at_rest_rate, _settings("--quick").at_rest_seconds) == (200, 5)
    assert _settings("--at-rest-rate", "3000", "--at-rest-seconds", "20").at_rest_rate == 3000
    with pytest.raises(ValueError, match="--at-rest-rate must be at least 1"):
        _settings("--at-rest-rate", "0")
