"""The deployment files of ``cluster/``: they cannot be deployed here (no Docker engine, no
cloud), so they are checked as far as a file can be: every one parses; the launcher config
is valid for Ray's own schema and its ``ray start`` commands for Ray's own parser; the
commands the README gives are accepted by the ``ortho`` parser; the image installs exactly
pyproject's dependencies at versions inside its ranges, every other package at an exact
version, and records its commit and version; images are pinned; nothing listens publicly by
default; the launcher's nodes and the README's clients use Ray token authentication as the
installed Ray reads it; no password is written in a file. The Kubernetes manifests are
checked in ``test_kubernetes_files.py``.
"""

from __future__ import annotations

import json
import re
import shlex
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import ray.autoscaler
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from ray.scripts.scripts import start as ray_start

from sweeps import provenance
from sweeps.cli import build_parser
from sweeps.spec import load_spec, resolve
from tests.cluster.manifests import (
    CLUSTER,
    PYPROJECT,
    README,
    ROOT,
    dockerfile,
    docs,
    exact_version,
    k8s_docs,
    one,
    ray_client_auth,
    requirements,
    walk,
    yaml_files,
)

DOCKERFILE_INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY",
                           "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD",
                           "STOPSIGNAL", "HEALTHCHECK", "SHELL"}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|ACCESS_KEY", re.IGNORECASE)
INTERPOLATION = re.compile(r"^\$\{[A-Z_]+(:?[-?][^}]*)?\}$")
"""A Compose value taken whole from the environment (``.env``), e.g. ``${X:?message}``."""
DOCKERFILES = sorted(CLUSTER.rglob("Dockerfile"))


def pinned(image: str) -> bool:
    """Whether ``image`` names a fixed tag (not ``latest``, not implicit) or a digest."""
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in {"", "latest"}


def from_image(path: Path) -> str:
    froms = [args for keyword, args in dockerfile(path) if keyword == "FROM"]
    assert len(froms) == 1
    return froms[0]


def pip_installs(path: Path) -> list[list[str]]:
    """The arguments of every ``pip install`` the Dockerfile runs."""
    runs = [args for keyword, args in dockerfile(path) if keyword == "RUN"]
    return [shlex.split(command)[2:] for run in runs for command in run.split("&&")
            if shlex.split(command)[:2] == ["pip", "install"]]


def copies(path: Path) -> dict[str, str]:
    """Source (in the repository, which must hold it) to target of every COPY."""
    copied = {}
    for keyword, args in dockerfile(path):
        if keyword == "COPY":
            *sources, target = [a for a in args.split() if not a.startswith("--")]
            for source in sources:
                assert (ROOT / source).exists(), source
                copied[source] = target
    return copied


def installed(path: Path) -> dict[str, Requirement]:
    """The packages the Dockerfile's ``pip install`` names itself (not through ``-r``)."""
    reqs = [Requirement(a) for args in pip_installs(path) for before, a in pairwise(["", *args])
            if not a.startswith("-") and a != "." and before != "-r"]
    return {canonicalize_name(r.name): r for r in reqs}


def key_values(path: Path, keyword: str) -> dict[str, str]:
    """KEY=VALUE pairs of every ``keyword`` instruction (ARG, ENV, LABEL), quotes removed."""
    pairs = [w.partition("=") for k, args in dockerfile(path) if k == keyword
             for w in shlex.split(args)]
    return {key: value for key, _, value in pairs}


# Every file parses ----------------------------------------------------------------------

@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(CLUSTER)))
def test_yaml_parses_to_mappings(path: Path) -> None:
    parsed = docs(path)
    assert parsed and all(isinstance(d, dict) for d in parsed)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(CLUSTER)))
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
    copied = copies(CLUSTER / "Dockerfile")
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
    ours, server = installed(CLUSTER / "Dockerfile"), installed(CLUSTER / "mlflow" / "Dockerfile")
    assert server["psycopg2-binary"] == requirements()["psycopg2-binary"]
    assert server["boto3"] == ours["boto3"]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(CLUSTER)))
def test_every_pip_install_names_exact_versions(path: Path) -> None:
    installs = pip_installs(path)
    assert installs
    for args in installs:
        options = {a for a in args if a.startswith("--")}
        assert options <= {"--no-cache-dir", "--no-deps"}, options
        operands = [a for a in args if not a.startswith("--")]
        while operands:
            operand = operands.pop(0)
            if operand == "-r":
                assert operands.pop(0) == copies(path)["cluster/requirements.txt"]
            elif operand == ".":
                assert "--no-deps" in options  # this package, its dependencies pinned above
            else:
                exact_version(Requirement(operand))


def test_node_image_records_its_commit_and_version() -> None:
    path = CLUSTER / "Dockerfile"
    sha, dirty = provenance.SHA_ENV, provenance.DIRTY_ENV
    assert key_values(path, "ARG") == {sha: provenance.UNKNOWN, dirty: provenance.UNKNOWN}
    env = key_values(path, "ENV")
    assert (env[sha], env[dirty]) == (f"${{{sha}}}", f"${{{dirty}}}")
    labels = key_values(path, "LABEL")
    assert labels["org.opencontainers.image.version"] == PYPROJECT["version"]
    assert labels["org.opencontainers.image.revision"] == f"${{{sha}}}"
    # A build argument is empty in the instructions before its ARG.
    instructions = dockerfile(path)
    for name in (sha, dirty):
        declared = next(i for i, (k, a) in enumerate(instructions) if k == "ARG" and name in a)
        assert all(i > declared for i, (_, a) in enumerate(instructions) if f"${{{name}}}" in a)
    (build,) = [line for line in README.replace("\\\n", " ").splitlines()
                if line.startswith("docker build -f cluster/Dockerfile")]
    assert f"--build-arg {sha}=$(git rev-parse HEAD)" in build
    assert f'--build-arg {dirty}=$(test -z "$(git status --porcelain)" && echo false || ' \
        'echo true)' in build


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


def _docker_env(launcher: dict[str, Any]) -> dict[str, str]:
    """What ``--env`` gives every node's container, where the launcher runs ``ray start``."""
    words = [w for option in launcher["docker"]["run_options"] for w in shlex.split(option)]
    pairs = [w.partition("=") for flag, w in pairwise(words) if flag in {"--env", "-e"}]
    return {key: value for key, _, value in pairs}


def test_launcher_nodes_run_ray_with_the_shipped_token(launcher: dict[str, Any],
                                                       tmp_path: Path) -> None:
    env = _docker_env(launcher)
    assert env["RAY_AUTH_MODE"] == "token"
    token = Path(env["RAY_AUTH_TOKEN_PATH"])
    local = launcher["file_mounts"][str(token.parent)]
    assert f"openssl rand -hex 32 > {local}/{token.name}" in README
    for commands in ("head_start_ray_commands", "worker_start_ray_commands"):
        assert not any("RAY_AUTH" in c for c in launcher[commands])  # the container's hold
    # What the installed Ray makes of that environment, and without its mode.
    (tmp_path / token.name).write_text("from-the-file\n")
    env["RAY_AUTH_TOKEN_PATH"] = str(tmp_path / token.name)
    assert ray_client_auth(env, tmp_path) == {"authorization": "Bearer from-the-file"}
    assert ray_client_auth({**env, "RAY_AUTH_MODE": "disabled"}, tmp_path) == {}


def test_readme_submits_to_the_launchers_cluster_with_its_token(
        launcher: dict[str, Any], tmp_path: Path) -> None:
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", README, re.DOTALL)
              if "ortho sweep submit" in b and "$VM_PRIVATE" in b]
    assert len(blocks) == 1
    (line,) = [line for line in blocks[0].splitlines() if line.startswith("export ")]
    exports = dict(w.partition("=")[::2] for w in shlex.split(line)[1:])
    token = Path(_docker_env(launcher)["RAY_AUTH_TOKEN_PATH"])
    local = launcher["file_mounts"][str(token.parent)]
    assert exports["RAY_AUTH_TOKEN_PATH"] == f"{local}/{token.name}".replace("~", "$HOME", 1)
    (tmp_path / local.removeprefix("~/")).mkdir(parents=True)
    (tmp_path / local.removeprefix("~/") / token.name).write_text("laptop")
    exports["RAY_AUTH_TOKEN_PATH"] = exports["RAY_AUTH_TOKEN_PATH"].replace("$HOME",
                                                                            str(tmp_path))
    assert ray_client_auth(exports, tmp_path) == {"authorization": "Bearer laptop"}


# Nothing public, no secret in a file -----------------------------------------------------

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


def test_every_mlflow_server_runs_one_uvicorn_worker(compose: dict[str, Any]) -> None:
    """With several workers uvicorn leaves Nagle's algorithm on for each connection
    (Kludex/uvicorn#3149): each request after a connection's first then waits ~40 ms for the
    client's delayed ACK, 44 ms against 1 ms on this machine, which makes the sweep's writer
    3x slower (``benchmarks/server_workers.py``, RESULTS.md)."""
    (cmd,) = [json.loads(args) for keyword, args in dockerfile(CLUSTER / "mlflow" / "Dockerfile")
              if keyword == "CMD"]
    (pod,) = one("Deployment", "mlflow")["spec"]["template"]["spec"]["containers"]
    for args in (cmd, compose["services"]["mlflow"]["command"], pod["args"]):
        assert args[0] == "server" and args[args.index("--workers") + 1] == "1", args


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
    """The arguments of every ``program`` command in the README's bash blocks: after
    variables set for it alone (``NAME=value program ...``), or as the command ``ray exec``
    runs on the head (its last word); those with a ``...`` to fill in are left out."""
    blocks = re.findall(r"```bash\n(.*?)```", README, re.DOTALL)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            if f"{program} " not in line:
                continue
            argv = shlex.split(line.split(" #")[0].removesuffix("&"))
            if argv[:2] == ["ray", "exec"]:
                argv = shlex.split(argv[-1])
            while argv and re.fullmatch(r"[A-Z_]+=.*", argv[0], re.DOTALL):
                argv.pop(0)
            if argv and argv[0] == program and "..." not in argv:
                commands.append(argv[1:])
    return commands


def test_readme_ortho_commands_parse() -> None:
    commands = _readme_commands("ortho")
    assert {tuple(c[:2]) for c in commands} >= {("sweep", "submit"), ("sweep", "status"),
                                                ("report", "synthetic-max-length"),
                                                ("sweep", "studies")}
    for argv in commands:
        args = build_parser().parse_args(argv)
        if argv[:2] == ["sweep", "studies"]:
            # optuna-dashboard on loopback: a tunnel or port-forward brings it to the laptop
            assert args.dashboard and args.host == "127.0.0.1" and args.port == 8080
        if argv[:2] == ["sweep", "submit"]:
            assert args.address == "http://127.0.0.1:8265"
            # The home on shared storage outlives the head; Tune's state (HOME/ray) is the
            # driver's alone.
            assert args.home.startswith(("/mnt/efs/", "/mnt/shared/")) and not args.storage
            resolve(load_spec(args.spec), args.profile)


def test_readme_names_every_value_to_replace() -> None:
    for marker in ("ACCOUNT_ID", "sg-RAYCLUSTER", "fs-EFSID", "ami-GPUHOST", "BUCKET"):
        assert marker in README
    for path in yaml_files():
        for marker in re.findall(r"ACCOUNT_ID|sg-RAYCLUSTER|fs-EFSID|ami-GPUHOST|\bBUCKET\b",
                                 path.read_text()):
            assert marker in README, (path, marker)
