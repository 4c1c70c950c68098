"""The Consul listener's tests share one registry to read: four services registered through the agent API, two
of them tagged with horror by meaning, and a saved query that finds those two."""
from __future__ import annotations

import pytest
from support.case_study import horror_by_meaning
from support.inprocess import InProcess


@pytest.fixture
def srv(in_process) -> InProcess:
    srv = in_process(consul_listen="127.0.0.1:8500", node_id="n1")
    horror_by_meaning(srv.client())
    consul = srv.consul()
    for sid, name, tags in [("livro-1", "livros", ["ex:Livro ex:temUmGenero ex:Terror", "blue"]),
                            ("filme-1", "filmes", ["ex:Filme ex:temUmGenero ex:Terror", "red"]),
                            ("pintura-1", "pinturas", ["ex:Pintura ex:temUmGenero ex:Drama", "blue"]),
                            ("livro-2", "livros", ["ex:Livro ex:temUmGenero ex:Comedia", "green"])]:
        assert consul.put("/v1/agent/service/register", json={
            "ID": sid, "Name": name, "Tags": tags, "Address": "10.0.0.1", "Port": 9000,
            "Check": {"TTL": "30s", "Status": "passing"}}).status_code == 200
    return srv
