"""TLS between the nodes, mutual: a ring whose nodes call each other over https with certificates the CA
signed works as one over http; a client without such a certificate cannot even finish the handshake with a
cluster listener, secret or not."""
from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
from support.certs import certificates
from support.inprocess_ring import InProcessRing

from semreg.cli.serve import cluster_settings
from semreg.config import Settings

PROCESS_FIXTURES = ("certs",)  # made by the openssl command (installed by `dev.py test`)


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    return certificates(tmp_path / "certs")



def tls_flags(d: Path, name: str = "server") -> dict[str, Path]:
    return {"cluster_tls_cert": d / f"{name}.crt", "cluster_tls_key": d / f"{name}.key", "cluster_tls_ca": d / "ca.crt"}


def test_nodes_call_each_other_over_mutual_tls(in_ring: InProcessRing, certs: Path) -> None:
    n1, n2 = in_ring.add("n1", **tls_flags(certs)), in_ring.add("n2", **tls_flags(certs))
    assert n1.url.startswith("https://") and in_ring.converged()
    for i in range(8):  # some owned by each node, so that every write crosses to the other
        r = n1.put(f"/v1/instances/i{i}", json={"id": f"i{i}", "service": "svc", "address": "127.0.0.1",
                                                "port": 10000 + i, "tags": [], "ttl": 0})
        assert r.status_code == 201, r.text
    held = {iid for node in (n1, n2) for iid in node.node.shard.registry.instances}
    assert held == {f"i{i}" for i in range(8)}
    assert len(n2.node.shard.registry.instances) == 8  # replicas = 2: n2 holds every record, sent over TLS
    secret = {"X-Semreg-Cluster": in_ring.secret.read_text().strip()}
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    context.load_cert_chain(str(certs / "client.crt"), str(certs / "client.key"))
    r = httpx.post(n1.url + "/internal/v1/inventory", json={"ids": None}, headers=secret, verify=context)
    assert r.status_code == 200
    without = ssl.create_default_context(cafile=str(certs / "ca.crt"))  # the CA trusted, no certificate shown
    with pytest.raises(httpx.HTTPError):
        httpx.post(n1.url + "/internal/v1/inventory", json={"ids": None}, headers=secret, verify=without)
    with pytest.raises(httpx.HTTPError):
        httpx.post(n1.url.replace("https", "http") + "/internal/v1/inventory", json={"ids": None}, headers=secret)


def test_cluster_tls_flags_go_together_and_make_the_advertised_address_https(certs: Path) -> None:
    base = Settings(etcd="http://127.0.0.1:2379", cluster_listen="127.0.0.1:9081",
                    cluster_secret_file=certs / "ca.key")  # any file of 16 characters or more
    s = cluster_settings(base.replace(**tls_flags(certs)))
    assert s.advertise == "https://127.0.0.1:9081"
    with pytest.raises(ValueError, match="go together"):
        cluster_settings(base.replace(cluster_tls_cert=certs / "server.crt"))
    with pytest.raises(ValueError, match="speaks https"):
        cluster_settings(base.replace(advertise="http://127.0.0.1:9081", **tls_flags(certs)))
    with pytest.raises(ValueError, match="no such file"):
        cluster_settings(base.replace(**{**tls_flags(certs), "cluster_tls_ca": certs / "absent.crt"}))
