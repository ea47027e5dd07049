"""The deployment files of ``cluster/``: they cannot be deployed here (no Docker engine, no
cloud), so they are checked as far as a file can be: every one parses; the launcher config
is valid for Ray's own schema and its ``ray start`` commands for Ray's own parser; the
commands the README and the RayJob give are accepted by the ``ortho`` parser; the image
installs exactly pyproject's dependencies at versions inside its ranges; images are pinned;
nothing listens publicly by default; no password is written in a file.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray.autoscaler
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from ray.scripts.scripts import start as ray_start

from sweeps.cli import build_parser
from sweeps.spec import load_spec, resolve

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DOCKERFILE_INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY",
                           "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD",
                           "STOPSIGNAL", "HEALTHCHECK", "SHELL"}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|ACCESS_KEY", re.IGNORECASE)
INTERPOLATION = re.compile(r"^\$\{[A-Z_]+(:?[-?][^}]*)?\}$")
"""A Compose value taken whole from the environment (``.env``), e.g. ``${X:?message}``."""


def yaml_files() -> list[Path]:
    return sorted(p for p in CLUSTER.rglob("*") if p.suffix in {".yaml", ".yml"})


def docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def k8s_docs() -> list[dict[str, Any]]:
    return [d for p in (CLUSTER / "kuberay").glob("*.yaml") for d in docs(p)] + \
        docs(CLUSTER / "mlflow" / "kubernetes.yaml")


def walk(node: Any) -> Iterator[tuple[str | int, Any, Any]]:
    """(key, value, parent) for every entry of nested mappings and lists."""
    items = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield key, value, node
        yield from walk(value)


def dockerfile(path: Path) -> list[tuple[str, str]]:
    """(instruction, arguments), continuation lines joined, comments dropped."""
    instructions, current = [], ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        current += " " + stripped.removesuffix("\\").strip()
        if stripped.endswith("\\"):
            continue
        keyword, _, arguments = current.strip().partition(" ")
        instructions.append((keyword, arguments.strip()))
        current = ""
    assert not current, f"{path}: dangling continuation"
    return instructions


def pinned(image: str) -> bool:
    """Whether ``image`` names a fixed tag (not ``latest``, not implicit) or a digest."""
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in {"", "latest"}


def requirements() -> dict[str, Requirement]:
    lines = (CLUSTER / "requirements.txt").read_text().splitlines()
    reqs = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return {canonicalize_name(r.name): r for r in reqs}


def exact_version(req: Requirement) -> Version:
    (spec,) = req.specifier
    assert spec.operator == "==", f"{req} is not pinned exactly"
    return Version(spec.version)


def from_image(path: Path) -> str:
    froms = [args for keyword, args in dockerfile(path) if keyword == "FROM"]
    assert len(froms) == 1
    return froms[0]


# Every file parses ----------------------------------------------------------------------

@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(CLUSTER)))
def test_yaml_parses_to_mappings(path: Path) -> None:
    parsed = docs(path)
    assert parsed and all(isinstance(d, dict) for d in parsed)


@pytest.mark.parametrize("path", sorted(CLUSTER.rglob("Dockerfile")),
                         ids=lambda p: str(p.relative_to(CLUSTER)))
def test_dockerfile_parses_pinned_non_root(path: Path) -> None:
    instructions = dockerfile(path)
    assert {keyword for keyword, _ in instructions} <= DOCKERFILE_INSTRUCTIONS
    assert instructions[0][0] == "FROM" and pinned(instructions[0][1])
    users = [args for keyword, args in instructions if keyword == "USER"]
    assert users and users[-1] not in {"root", "0"}


# The node image -------------------------------------------------------------------------

def test_image_requirements_are_pyprojects_dependencies_pinned_in_range() -> None:
    ours = requirements()
    theirs = {canonicalize_name(r.name): r for r in map(Requirement, PYPROJECT["dependencies"])}
    assert set(ours) == set(theirs)
    for name, req in ours.items():
        assert req.extras == theirs[name].extras, name
        assert exact_version(req) in theirs[name].specifier, f"{req} vs {theirs[name]}"


def test_node_image_base_matches_pins_and_python() -> None:
    image = from_image(CLUSTER / "Dockerfile")
    match = re.fullmatch(r"rayproject/ray:(?P<ray>[\d.]+)-py(?P<py>\d)(?P<minor>\d+)-gpu", image)
    assert match, image
    assert Version(match["ray"]) == exact_version(requirements()["ray"])
    python = Version(f"{match['py']}.{match['minor']}")
    assert python in SpecifierSet(PYPROJECT["requires-python"])


def test_node_image_installs_requirements_then_this_package() -> None:
    instructions = dockerfile(CLUSTER / "Dockerfile")
    copied = {}
    for keyword, args in instructions:
        if keyword == "COPY":
            *sources, target = [a for a in args.split() if not a.startswith("--")]
            for source in sources:
                assert (ROOT / source).exists(), source
                copied[source] = target
    runs = " ".join(args for keyword, args in instructions if keyword == "RUN")
    requirements_target = copied["cluster/requirements.txt"]
    assert f"pip install --no-cache-dir -r {requirements_target}" in runs
    assert re.search(r"pip install --no-cache-dir --no-deps \.( |$)", runs)
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()
                and any(p.match(pattern) for pattern in ("ortho_core*", "sweeps*", "analysis*"))}
    assert packages == {"ortho_core", "sweeps", "analysis"}
    assert packages | {"pyproject.toml", PYPROJECT["readme"]} <= set(copied)


def test_mlflow_image_matches_pins() -> None:
    image = from_image(CLUSTER / "mlflow" / "Dockerfile")
    assert image == f"ghcr.io/mlflow/mlflow:v{exact_version(requirements()['mlflow'])}"
    runs = " ".join(a for k, a in dockerfile(CLUSTER / "mlflow" / "Dockerfile") if k == "RUN")
    assert f'"{requirements()["psycopg2-binary"]}"' in runs


def test_every_image_is_pinned_and_ours_carry_the_package_version() -> None:
    images = [v for p in yaml_files() for d in docs(p) for k, v, _ in walk(d) if k == "image"]
    assert images and all(pinned(i) for i in images), images
    ours = {i for i in images if "/ortho-sweeps:" in i}
    assert ours == {f"ACCOUNT_ID.dkr.ecr.us-west-2.amazonaws.com/ortho-sweeps:"
                    f"{PYPROJECT['version']}"}


# Ray cluster launcher --------------------------------------------------------------------

@pytest.fixture(scope="module")
def launcher() -> dict[str, Any]:
    return docs(CLUSTER / "ray-cluster.aws.yaml")[0]


def test_launcher_config_valid_for_rays_schema(launcher: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(launcher, schema)


def _ray_start(commands: list[str]) -> dict[str, Any]:
    (command,) = [c for c in commands if "ray start" in c]
    args = shlex.split(command.split("ray start", 1)[1])
    return ray_start.make_context("start", args).params  # Ray's own option parser


def test_launcher_dashboard_on_loopback_and_nodes_in_private_group(
        launcher: dict[str, Any]) -> None:
    head = _ray_start(launcher["head_start_ray_commands"])
    assert head["head"] and head["dashboard_host"] == "127.0.0.1"
    worker = _ray_start(launcher["worker_start_ray_commands"])
    assert not worker["head"] and worker["address"] == "$RAY_HEAD_IP:6379"
    assert "0.0.0.0" not in (CLUSTER / "ray-cluster.aws.yaml").read_text()
    # Without SecurityGroupIds the launcher creates a group admitting SSH from anywhere.
    for node_type in launcher["available_node_types"].values():
        assert node_type["node_config"]["SecurityGroupIds"] == ["sg-RAYCLUSTER"]


def test_launcher_cpu_head_gpu_workers_shared_storage(launcher: dict[str, Any]) -> None:
    types = launcher["available_node_types"]
    head = types[launcher["head_node_type"]]
    assert head["resources"] == {"CPU": 0}
    workers = [t for name, t in types.items() if name != launcher["head_node_type"]]
    assert workers and all(re.fullmatch(r"g[56]\.\w+", t["node_config"]["InstanceType"])
                           for t in workers)
    assert "--volume /mnt/efs:/mnt/efs" in launcher["docker"]["run_options"]
    assert any("mount -t nfs4" in c and "fs-EFSID" in c
               for c in launcher["initialization_commands"])


# KubeRay -------------------------------------------------------------------------------

def _one(kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [d for d in k8s_docs() if d["kind"] == kind
                and (name is None or d["metadata"]["name"] == name)]
    return found


def test_raycluster_gpu_workers_clusterip_head() -> None:
    cluster = _one("RayCluster")
    assert cluster["apiVersion"] == "ray.io/v1"
    assert cluster["spec"]["rayVersion"] == str(exact_version(requirements()["ray"]))
    head = cluster["spec"]["headGroupSpec"]
    assert head["serviceType"] == "ClusterIP" and head["rayStartParams"]["num-cpus"] == "0"
    for group in cluster["spec"]["workerGroupSpecs"]:
        for container in group["template"]["spec"]["containers"]:
            assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    claim = _one("PersistentVolumeClaim", "ortho-shared")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_rayjob_runs_the_paper_profile_on_the_cluster() -> None:
    job = _one("RayJob")
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": _one("RayCluster")["metadata"]
                                              ["name"]}
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "sweeps.cli"]
    args = build_parser().parse_args(argv[3:])
    assert (args.command, args.sweep_command, args.profile, args.address) == \
        ("sweep", "run", "paper", "auto")
    assert args.tracking_uri == "$ORTHO_TRACKING_URI"
    assert args.storage.startswith("/mnt/shared/")
    resolve(load_spec(args.spec), args.profile)


def test_config_maps_and_secrets_referenced_exist_or_are_documented() -> None:
    config_maps = {d["metadata"]["name"] for d in k8s_docs() if d["kind"] == "ConfigMap"}
    readme = (CLUSTER / "README.md").read_text()
    for doc in k8s_docs():
        for key, value, _ in walk(doc):
            if key == "configMapKeyRef":
                assert value["name"] in config_maps
            if key in {"secretKeyRef", "secretRef"}:
                assert f"create secret generic {value['name']}" in readme


def test_services_select_pods() -> None:
    labels = [d["spec"]["template"]["metadata"]["labels"] for d in k8s_docs()
              if d["kind"] in {"Deployment", "StatefulSet"}]
    services = [d for d in k8s_docs() if d["kind"] == "Service"]
    assert services
    for service in services:
        selector = service["spec"]["selector"].items()
        assert any(selector <= pod.items() for pod in labels), service["metadata"]["name"]


def test_mlflow_deployment_backend_is_postgres_with_password_from_secret() -> None:
    (container,) = _one("Deployment", "mlflow")["spec"]["template"]["spec"]["containers"]
    env = [e["name"] for e in container["env"]]
    values = {e["name"]: e.get("value") for e in container["env"]}
    uri = values["MLFLOW_BACKEND_STORE_URI"]
    assert uri == "postgresql+psycopg2://mlflow:$(DB_PASSWORD)@mlflow-postgres:5432/mlflow"
    # Kubernetes expands $(VAR) only from variables defined earlier in the list.
    assert env.index("DB_PASSWORD") < env.index("MLFLOW_BACKEND_STORE_URI")
    tracking = _one("ConfigMap", "ortho-tracking")["data"]["tracking-uri"]
    service = _one("Service", "mlflow")
    port = service["spec"]["ports"][0]["port"]
    namespace = service["metadata"]["namespace"]
    assert tracking == f"http://mlflow.{namespace}.svc.cluster.local:{port}"
    assert tracking.removeprefix("http://") in values["MLFLOW_SERVER_ALLOWED_HOSTS"].split(",")


# Nothing public, no secret in a file -----------------------------------------------------

def test_kubernetes_exposes_nothing_outside_the_cluster() -> None:
    kinds = {d["kind"] for d in k8s_docs()}
    assert not kinds & {"Ingress", "Gateway", "HTTPRoute"}
    for doc in k8s_docs():
        if doc["kind"] == "Service":
            assert doc["spec"].get("type", "ClusterIP") == "ClusterIP"
        for key, value, _ in walk(doc):
            assert key not in {"hostNetwork", "hostPort", "nodePort"} or not value


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return docs(CLUSTER / "mlflow" / "docker-compose.yaml")[0]


def _default(value: str) -> str:
    """A Compose interpolation with the environment empty: ``${X:-d}`` → ``d``."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_compose_publishes_mlflow_on_loopback_only(compose: dict[str, Any]) -> None:
    published = {name: [_default(p) for p in s.get("ports", [])]
                 for name, s in compose["services"].items()}
    assert published.pop("mlflow") == ["127.0.0.1:5000:5000"]
    assert all(ports == [] for ports in published.values())
    for service in compose["services"].values():
        assert service.get("network_mode") != "host"
        for dependency in service.get("depends_on", {}):
            assert dependency in compose["services"]


def test_compose_mlflow_uses_postgres_and_the_bucket_it_creates(compose: dict[str, Any]) -> None:
    services = compose["services"]
    env = services["mlflow"]["environment"]
    assert re.fullmatch(r"postgresql\+psycopg2://mlflow:\$\{POSTGRES_PASSWORD:\?[^}]*\}"
                        r"@postgres:5432/mlflow", env["MLFLOW_BACKEND_STORE_URI"])
    postgres = services["postgres"]["environment"]
    assert (postgres["POSTGRES_USER"], postgres["POSTGRES_DB"]) == ("mlflow", "mlflow")
    assert env["MLFLOW_S3_ENDPOINT_URL"] == "http://minio:9000"
    bucket = env["MLFLOW_ARTIFACTS_DESTINATION"].removeprefix("s3://").split("/")[0]
    assert f"mc mb --ignore-existing store/{bucket}" in services["create-bucket"]["command"][0]
    assert ".env" in (CLUSTER / "mlflow" / ".gitignore").read_text().split()


def test_no_secret_written_in_a_file(compose: dict[str, Any]) -> None:
    for service in compose["services"].values():
        for name, value in service.get("environment", {}).items():
            if SECRET_NAME.search(name):
                assert INTERPOLATION.match(str(value)), name
    for doc in k8s_docs():
        if doc["kind"] == "Secret":
            pytest.fail(f"Secret {doc['metadata']['name']} written in a manifest")
        for key, value, parent in walk(doc):
            if key == "name" and isinstance(value, str) and SECRET_NAME.search(value) \
                    and "value" in parent:
                pytest.fail(f"{value} given inline")
    for path in yaml_files():
        for user_info in re.findall(r"://[^/\s:@]+:([^@\s]+)@", path.read_text()):
            assert user_info.startswith(("${", "$(")), path


# The README's commands -------------------------------------------------------------------

def _readme_commands(program: str) -> list[list[str]]:
    text = (CLUSTER / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            if not re.match(rf"\s*([A-Z_]+=\S*\s+)*{program}\s", line):
                continue
            argv = shlex.split(line.split(" #")[0].removesuffix("&"))
            while re.fullmatch(r"[A-Z_]+=\S*", argv[0]):
                argv.pop(0)
            if "..." not in argv:
                commands.append(argv[1:])
    return commands


def test_readme_ortho_commands_parse() -> None:
    commands = _readme_commands("ortho")
    assert {tuple(c[:2]) for c in commands} >= {("sweep", "submit"), ("sweep", "status"),
                                                ("report", "synthetic-max-length")}
    for argv in commands:
        args = build_parser().parse_args(argv)
        if argv[:2] == ["sweep", "submit"]:
            assert args.address == "http://127.0.0.1:8265" and args.storage
            resolve(load_spec(args.spec), args.profile)


def test_readme_names_every_value_to_replace() -> None:
    readme = (CLUSTER / "README.md").read_text()
    for marker in ("ACCOUNT_ID", "sg-RAYCLUSTER", "fs-EFSID", "BUCKET"):
        assert marker in readme
    for path in yaml_files():
        for marker in re.findall(r"ACCOUNT_ID|sg-RAYCLUSTER|fs-EFSID|\bBUCKET\b",
                                 path.read_text()):
            assert marker in readme, (path, marker)
