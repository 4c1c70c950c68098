"""Fitting the matchmaker (`semreg.tune.matchmaker`): the fit as a table on made-up rows, and on OWLS-TC 3's
development half in-process: the shipped weights are that fit, and they rank known requests sensibly."""
from __future__ import annotations

import pytest
from support.paths import DATA

from semreg.bench import retrieval
from semreg.bench.owlstc import read_collection
from semreg.registry import matchmaker
from semreg.registry.matchmaker import FEATURES
from semreg.tune import matchmaker as tune


def row(**values: float) -> tuple[float, ...]:
    return tuple(values.get(name, 0.0) for name in FEATURES)


def test_the_fit_learns_which_signals_tell_the_relevant_apart():
    rows = [(row(text=t / 10, given_up=1 - t / 10), 1.0 if t >= 6 else 0.0, 1.0) for t in range(11)] * 3
    model = tune.fit(rows)
    weights = dict(zip(FEATURES, model.weights))
    assert weights["text"] > 0 > weights["given_up"]
    assert weights["similar"] == 0.0  # a feature never seen is left at nothing (the penalty)
    scores = [model.score(x) for x, _, _ in rows[:11]]
    assert scores == sorted(scores) and scores[-1] > 0.9 > 0.1 > scores[0]


def test_a_rows_weight_counts_as_that_many_rows():
    rows = [(row(text=t / 10), 1.0 if t >= 6 else 0.0, 1.0) for t in range(11)]
    heavier = [(x, y, 3.0 if y else 1.0) for x, y, _ in rows]
    repeated = rows + [r for r in rows if r[1]] * 2
    assert tune.fit(heavier) == tune.fit(repeated)


@pytest.mark.slow
def test_each_request_weighs_the_same_in_the_fit(asked):
    rows = tune.rows_of(asked)
    assert len(rows) == sum(len(a.candidates) for a in asked)
    start = 0
    sums = []
    for a in asked:
        sums.append(sum(w for _, _, w in rows[start:start + len(a.candidates)]))
        start += len(a.candidates)
    assert max(sums) == pytest.approx(min(sums)) == pytest.approx(len(rows) / len(asked))


@pytest.mark.parametrize("grade, expected", [(0, 0.0), (1, 2 / 3), (2, 5 / 6), (3, 1.0)])
def test_the_target_counts_relevance_and_grade_half_each(grade, expected):
    assert tune.target(grade) == pytest.approx(expected)


@pytest.fixture(scope="module")
def asked():
    collection = read_collection(DATA / "owls-tc3")
    return tune.ask_all(collection, tune.registry_of(collection), None)


@pytest.mark.slow
def test_the_shipped_weights_are_the_fit_of_the_development_half(asked):
    assert tune.fit(tune.rows_of(asked)) == matchmaker.shipped()


@pytest.mark.slow
@pytest.mark.parametrize("request_file, across, least_ap", [
    ("country_skilledoccupation_service.owls", False, 0.95),
    ("surfinghiking_destination_service.owls", True, 0.95),
    ("title_comedyfilm_service.owls", True, 0.9),
])
def test_the_shipped_weights_rank_known_requests_sensibly(asked, request_file, across, least_ap):
    found = next(a for a in asked if a.request == request_file)
    ranked = tune.ranking(found, matchmaker.shipped(), across)
    assert retrieval.binary(ranked, found.relevant)["AP"] >= least_ap
    top = ranked[:10]
    assert all(found.grades.get(s, 0) > 0 for s in top)  # the first ten are all relevant
    # the best graded come before the least: the mean grade of the first ten is above the relevant ones'
    relevant_grades = [g for g in found.grades.values() if g > 0]
    assert sum(found.grades[s] for s in top) / 10 >= sum(relevant_grades) / len(relevant_grades)


@pytest.mark.slow
def test_the_cross_validation_holds_each_request_out(asked):
    folds = tune.cross_validated(asked[:3])
    assert len(folds) == 3 and len({f.weights for f in folds}) == 3
