"""Route declarations: the query parameters a route takes are the ones it declares, families by prefix."""
from __future__ import annotations

import pytest

from semreg.errors import BadRequest
from semreg.http.endpoints import Endpoint, Param


async def _handler(request):  # never called: the declarations are what is tested
    raise AssertionError


READS = Endpoint("GET", "/v1/things", _handler, "read", "things",
                 params=(Param("service"), Param("meta.", prefix=True, description="meta.KEY=VALUE filters")))


@pytest.mark.parametrize("names", [[], ["service"], ["meta.zone"], ["meta.zone", "meta.rack", "service"]])
def test_declared_parameters_and_families_pass(names):
    READS.check_query(names)


@pytest.mark.parametrize("names, unknown", [(["servce"], ["servce"]), (["metazone"], ["metazone"]),
                                            (["meta", "service", "x"], ["meta", "x"])])
def test_others_are_named(names, unknown):
    with pytest.raises(BadRequest) as caught:
        READS.check_query(names)
    assert caught.value.extra["parameters"] == unknown
    assert caught.value.message.endswith("of GET /v1/things; it takes service, meta.KEY.")


def test_an_open_route_takes_anything():
    Endpoint("GET", "/sparql", _handler, "read", "sparql", open_query=True).check_query(["format", "output"])
