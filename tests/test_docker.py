"""The files in docker/: no container engine runs here, so what can be checked without one is: the compose
files parse, every semreg service's flags and SEMREG_* variables are valid for `semreg serve` (the
cluster's checks included), and what they name (files copied by the Dockerfile, the etcd service, each
node's address) is where the files say it is, and the image installs the product alone (`pip install .`, no
test tools) with its licence."""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from support.paths import ROOT

from semreg.access.tokens import Tokens
from semreg.cli import serve
from semreg.config import Settings

DOCKER = ROOT / "docker"
CONTAINER_PORT = 8080
CLUSTER_PORT = "7080"  # node-to-node, not published on the host


def dockerfile_env() -> dict[str, str]:
    text = (DOCKER / "Dockerfile").read_text()
    block = re.search(r"^ENV (.*?)(?:\n(?!\s))", text, re.M | re.S)
    assert block, "the Dockerfile sets the SEMREG_* defaults with ENV"
    return dict(re.findall(r"(SEMREG_\w+)=(\S+)", block.group(1)))


def copied_paths() -> dict[str, Path]:
    """Container path → source path, for the Dockerfile's COPY lines into absolute paths."""
    out = {}
    for src, dest in re.findall(r"^COPY (\S+) (/\S+)$", (DOCKER / "Dockerfile").read_text(), re.M):
        out[dest] = ROOT / src
    return out


def local(path: str, mounts: dict[str, Path]) -> Path:
    for container, here in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        if path == container or path.startswith(container + "/"):
            return here / path[len(container):].lstrip("/") if here.is_dir() else here
    raise AssertionError(f"{path} is neither copied by the Dockerfile nor mounted")


def settings_of(service: dict, mounts: dict[str, Path]) -> Settings:
    env = {**dockerfile_env(), **{k: str(v) for k, v in (service.get("environment") or {}).items()}}
    parser = argparse.ArgumentParser()
    serve.add_parser(parser.add_subparsers(), env)
    args = parser.parse_args(["serve", *[str(a) for a in service.get("command") or []]])
    settings = serve.settings_from(args)
    files = {}
    for name in ("tokens_file", "cluster_secret_file"):
        value = getattr(settings, name)
        if value is not None:
            files[name] = local(str(value), mounts)
    ontologies = tuple(local(str(p), mounts) for p in settings.ontologies)
    return settings.replace(**files, ontologies=ontologies)


def compose(name: str) -> dict:
    doc = yaml.safe_load((DOCKER / name).read_text())
    assert isinstance(doc, dict) and doc["services"]
    return doc


def mounts_of(service: dict, tmp_path: Path, doc: dict) -> dict[str, Path]:
    mounts = dict(copied_paths())
    for volume in service.get("volumes") or []:
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            example = DOCKER / source[2:]
            mounts[target] = example if example.exists() else DOCKER / "tokens.example.json"
    for secret in service.get("secrets") or []:
        path = tmp_path / secret
        path.write_text("a-secret-of-at-least-sixteen-characters\n")
        assert doc["secrets"][secret]["file"].startswith("./")
        mounts[f"/run/secrets/{secret}"] = path
    return mounts


def test_the_single_node_file_runs_one_valid_node(tmp_path):
    doc = compose("compose.yaml")
    (service,) = doc["services"].values()
    settings = settings_of(service, mounts_of(service, tmp_path, doc))
    assert not settings.etcd and settings.port == CONTAINER_PORT and str(settings.data_dir) == "/data"
    assert all(p.is_file() for p in settings.ontologies)
    Tokens(settings.tokens_file)


def test_the_cluster_file_runs_etcd_and_three_valid_nodes_holding_two_copies(tmp_path):
    doc = compose("cluster.yaml")
    services = doc["services"]
    etcd = services["etcd"]
    flags = dict(a.lstrip("-").split("=", 1) for a in etcd["command"][1:])
    nodes = {name: s for name, s in services.items() if name.startswith("semreg-")}
    assert len(nodes) == 3
    seen_ids, host_ports, data_volumes = set(), set(), set()
    for name, service in nodes.items():
        settings = serve.cluster_settings(settings_of(service, mounts_of(service, tmp_path, doc)))
        assert settings.replicas == 2 and settings.cluster
        assert all(p.is_file() for p in settings.ontologies)
        Tokens(settings.tokens_file)
        etcd_url = urlsplit(settings.etcd)
        assert etcd_url.hostname == "etcd" and f"http://etcd:{etcd_url.port}" in flags["advertise-client-urls"]
        assert etcd_url.port == urlsplit(flags["listen-client-urls"]).port
        advertised = urlsplit(settings.advertise)
        assert settings.port == CONTAINER_PORT and not any(CLUSTER_PORT in p for p in service["ports"])
        assert advertised.hostname == name and advertised.port == int(CLUSTER_PORT)  # the cluster listener's
        assert settings.cluster_listen == f"0.0.0.0:{CLUSTER_PORT}"
        assert "etcd" in service["depends_on"]
        seen_ids.add(settings.node_id)
        host_ports.add(service["ports"][0].split(":")[0])
        data_volumes.update(v.split(":")[0] for v in service["volumes"] if v.endswith(":/data"))
    assert len(seen_ids) == len(host_ports) == len(data_volumes) == 3
    assert data_volumes <= set(doc["volumes"])


@pytest.mark.parametrize("name", ["compose.yaml", "cluster.yaml"])
def test_the_image_builds_from_files_that_exist(name):
    service = next(s for s in compose(name)["services"].values() if "build" in s)
    context = (DOCKER / service["build"]["context"]).resolve()
    assert context == ROOT and (context / service["build"]["dockerfile"]).is_file()
    for src in re.findall(r"^COPY (\S+(?: \S+)*) \S+$", (DOCKER / "Dockerfile").read_text(), re.M):
        for part in src.split():
            assert (ROOT / part).exists(), f"COPY {part}: not in the project"


def test_the_image_installs_the_product_alone_with_its_licence():
    """`pip install .` in the image: the runtime dependencies, no extra (no test tools), and the files the package's
    metadata names (its readme and licence) copied in, so that the build finds them."""
    import tomllib

    text = (DOCKER / "Dockerfile").read_text()
    (install,) = re.findall(r"^RUN pip install (.*?)(?: &&|$)", text, re.M)
    assert install.split()[-1] == "." and "[" not in install, install
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    copied = {part for src in re.findall(r"^COPY (\S+(?: \S+)*) \S+$", text, re.M) for part in src.split()}
    assert {project["readme"], *project["license-files"]} <= copied
    licence = " ".join((ROOT / "LICENSE").read_text().split()[:5])
    assert project["license"] == "Apache-2.0" and licence == "Apache License Version 2.0, January"
    runtime = {re.split(r"[<>=\[;]", requirement)[0] for requirement in project["dependencies"]}
    assert not runtime & {"pytest", "playwright", "mypy", "schemathesis", "ruff", "mkdocs", "mkdocs-material", "owlrl"}


def test_the_docker_files_point_to_pages_that_exist():
    """The compose files' comments send a reader to the documentation: to pages the site has."""
    for name in ("Dockerfile", "compose.yaml", "cluster.yaml"):
        for page in re.findall(r"docs/[\w/-]+\.md", (DOCKER / name).read_text()):
            assert (ROOT / page).is_file(), f"docker/{name} names {page}"
    assert "README" not in (DOCKER / "compose.yaml").read_text()
