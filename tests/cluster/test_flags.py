"""The flags of a cluster node (`semreg serve --etcd ...`): checked before anything starts, each refusal
saying what to give instead."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from semreg.cli.serve import cluster_settings
from semreg.config import Settings


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.secret"
    path.write_text("s3cret-of-thirty-two-characters!\n")
    return path


def settings(**kw) -> Settings:
    return Settings(**{"etcd": "http://127.0.0.1:2379", "host": "127.0.0.1", "port": 8081,
                       "cluster_listen": "127.0.0.1:9081", **kw})


def test_a_node_defaults_its_address_and_id_to_where_its_cluster_listener_listens(secret):
    s = cluster_settings(settings(cluster_secret_file=secret))
    assert s.advertise == "http://127.0.0.1:9081" and s.node_id == "127.0.0.1:9081"
    s = cluster_settings(settings(cluster_secret_file=secret, cluster_listen="0.0.0.0:9081",
                                  advertise="http://10.0.0.5:9081/", node_id="n1"))
    assert s.advertise == "http://10.0.0.5:9081" and s.node_id == "n1"


@pytest.mark.parametrize("kw, says", [
    ({}, "--cluster-secret"),
    ({"cluster_listen": "0.0.0.0:9081"}, "wildcard"),
    ({"cluster_listen": ""}, "--cluster-listen"),
    ({"cluster_listen": "9081"}, "HOST:PORT"),
    ({"cluster_listen": "127.0.0.1:http"}, "HOST:PORT"),
    ({"advertise": "http://[::]:8081"}, "wildcard"),
    ({"advertise": "10.0.0.5:8081"}, "http://HOST:PORT"),
    ({"advertise": "http://10.0.0.5"}, "http://HOST:PORT"),
    ({"replicas": 0}, "--replicas"),
    ({"etcd": "etcd:notaport"}, "etcd"),
    ({"cluster_listen": "127.0.0.1:8081"}, "a port of their own"),
    ({"cluster_listen": "0.0.0.0:8081", "advertise": "http://10.0.0.5:8081"}, "a port of their own"),
    ({"host": "0.0.0.0", "cluster_listen": "10.0.0.5:8081"}, "a port of their own"),
])
def test_bad_cluster_flags_are_refused_with_the_reason(secret, kw, says):
    kw = {"cluster_secret_file": secret, **kw} if says != "--cluster-secret" else kw
    with pytest.raises(ValueError, match=None) as raised:
        cluster_settings(settings(**kw))
    assert says in str(raised.value)


def test_the_cluster_listener_may_share_a_port_number_on_another_address(secret):
    s = cluster_settings(settings(cluster_secret_file=secret, host="10.0.0.4", cluster_listen="10.0.0.5:8081"))
    assert s.advertise == "http://10.0.0.5:8081"


def test_a_short_or_missing_secret_is_refused(tmp_path):
    short = tmp_path / "short"
    short.write_text("tiny\n")
    with pytest.raises(ValueError, match="at least 16"):
        cluster_settings(settings(cluster_secret_file=short))
    with pytest.raises(ValueError, match="No such file"):
        cluster_settings(settings(cluster_secret_file=tmp_path / "absent"))


@pytest.mark.process
def test_serve_refuses_a_cluster_node_without_a_secret_before_starting():
    out = subprocess.run([sys.executable, "-m", "semreg", "serve", "--memory", "--port", "1",
                          "--etcd", "http://127.0.0.1:2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--cluster-secret" in out.stderr
