"""A node reaches etcd over TLS with a client certificate, and as an etcd user, against a real etcd started
that way (`/usr/bin/etcd`); without the certificate or the password, etcd does not answer it."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from support.certs import certificates
from support.server import wait_for

from semreg.bench.localcluster import SECRET, LocalCluster
from semreg.cluster.etcd_access import read_access

pytestmark = pytest.mark.process  # etcd and openssl, installed by `dev.py test`


ROUND_TRIP = """
import asyncio, json, sys
from pathlib import Path
from semreg.clock import LoopClock
from semreg.cluster.etcd_access import client_factory, read_access
from semreg.cluster.kv import EtcdKV, KVUnavailable

port, attempts, args = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
access = read_access(*[Path(a) if a else None for a in args[:3]], args[3], Path(args[4]) if args[4] else None)

async def once():
    kv = EtcdKV([("127.0.0.1", port)], timeout_s=3, clock=LoopClock(), client=client_factory(access))
    try:
        revision = await kv.put("/semreg/t/members/a", b"{}")
        events = kv.watch_prefix("/semreg/t/", revision)
        first = await asyncio.wait_for(events.__anext__(), 5)
        await events.aclose()
        return [first.key] + [key for key, _ in (await kv.get_prefix("/semreg/t/"))[1]]
    finally:
        await kv.close()

async def main():
    for attempt in range(attempts):
        try:
            return await once()
        except KVUnavailable:
            await asyncio.sleep(0.5)  # etcd still starting
    return "unavailable"

print(json.dumps(asyncio.run(main())))
"""


def round_trip(port: int, ca: Path | None = None, cert: Path | None = None, key: Path | None = None,
               user: str = "", password: Path | None = None, attempts: int = 1) -> object:
    """Put, watch and read a key through `EtcdKV` made as a node makes it, in a process of its own (gRPC's
    poller thread outlives its event loop); "unavailable" if etcd did not answer."""
    args = [str(p) if p else "" for p in (ca, cert, key)] + [user, str(password) if password else ""]
    out = subprocess.run([sys.executable, "-c", ROUND_TRIP, str(port), str(attempts), json.dumps(args)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_etcd_with_client_certificates_answers_a_node_with_its_certificate_only(
        etcd_factory, tmp_path: Path) -> None:
    d = certificates(tmp_path / "certs")
    _, port = etcd_factory("https", "--cert-file", str(d / "server.crt"), "--key-file", str(d / "server.key"),
                           "--client-cert-auth", "--trusted-ca-file", str(d / "ca.crt"))
    ok = ["/semreg/t/members/a"] * 2
    assert round_trip(port, d / "ca.crt", d / "client.crt", d / "client.key", attempts=40) == ok
    assert round_trip(port, d / "ca.crt") == "unavailable"  # no client certificate
    assert round_trip(port) == "unavailable"  # no TLS at all


def test_etcd_with_auth_enabled_answers_a_node_with_its_user_and_password_only(
        etcd_factory, tmp_path: Path) -> None:
    _, port = etcd_factory("http")
    gateway = f"http://127.0.0.1:{port}/v3/auth/"
    for _ in range(100):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)  # etcd starting: waiting for a state, bounded
    for path, body in (("user/add", {"name": "root", "password": "root-password-123"}),
                       ("role/add", {"name": "root"}), ("user/grant", {"user": "root", "role": "root"}),
                       ("enable", {})):
        r = httpx.post(gateway + path, json=body, timeout=10)
        assert r.status_code == 200, (path, r.text)
    password = tmp_path / "etcd.password"
    password.write_text("root-password-123\n")
    assert round_trip(port, user="root", password=password) == ["/semreg/t/members/a"] * 2
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password\n")
    assert round_trip(port) == "unavailable"
    assert round_trip(port, user="root", password=wrong) == "unavailable"


@pytest.mark.parametrize("kw, says", [
    ({"cert": Path("c")}, "--etcd-cert and --etcd-key"),
    ({"user": "root"}, "--etcd-user and --etcd-password-file"),
    ({"ca": Path("/nonexistent/ca.crt")}, "--etcd-ca /nonexistent/ca.crt"),
])
def test_etcd_access_flags_that_do_not_fit_are_refused_with_the_reason(kw: dict, says: str) -> None:
    args = {"ca": None, "cert": None, "key": None, "user": "", "password_file": None, **kw}
    with pytest.raises(ValueError, match=None) as raised:
        read_access(args["ca"], args["cert"], args["key"], args["user"], args["password_file"])
    assert says in str(raised.value)


def test_a_ring_runs_with_tls_and_client_certificates_to_etcd_and_between_its_nodes(
        etcd_factory, tmp_path: Path) -> None:
    d = certificates(tmp_path / "certs")
    _, port = etcd_factory("https", "--cert-file", str(d / "server.crt"), "--key-file", str(d / "server.key"),
                           "--client-cert-auth", "--trusted-ca-file", str(d / "ca.crt"))
    tls = ("--etcd-ca", str(d / "ca.crt"), "--etcd-cert", str(d / "client.crt"), "--etcd-key", str(d / "client.key"),
           "--cluster-tls-cert", str(d / "server.crt"), "--cluster-tls-key", str(d / "server.key"),
           "--cluster-tls-ca", str(d / "ca.crt"))
    cluster = LocalCluster(tmp_path / "ring", extra=tls)
    cluster.workdir.mkdir(parents=True)
    cluster.secret.write_text(SECRET + "\n")
    cluster.etcd = SimpleNamespace(url=f"https://127.0.0.1:{port}")  # type: ignore[assignment]
    try:
        a, b = cluster.add(), cluster.add()
        wait_for(cluster.converged, 60, "two nodes on one ring")
        for i in range(6):
            r = httpx.put(f"{a.url}/v1/instances/i{i}", timeout=30, json={
                "id": f"i{i}", "service": "svc", "address": "127.0.0.1", "port": 10000 + i, "tags": [], "ttl": 0})
            assert r.status_code == 201, r.text
        listed = httpx.get(f"{b.url}/v1/instances", params={"tags": "false"}, timeout=30).json()
        assert sorted(i["id"] for i in listed) == [f"i{i}" for i in range(6)]
        assert httpx.get(f"{a.url}/v1/cluster", timeout=10).json()["members"][0]["address"].startswith("https://")
    finally:
        cluster.close()
