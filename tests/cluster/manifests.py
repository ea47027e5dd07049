"""Reading the deployment files of ``cluster/`` for the tests that check them
(``test_cluster_files.py``, ``test_kubernetes_files.py``): YAML documents, Dockerfile
instructions, the image's pinned requirements, and what Ray would run with in an environment.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
README = (CLUSTER / "README.md").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def yaml_files() -> list[Path]:
    return sorted(p for p in CLUSTER.rglob("*") if p.suffix in {".yaml", ".yml"})


def docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def k8s_docs() -> list[dict[str, Any]]:
    return [d for p in sorted((CLUSTER / "kuberay").glob("*.yaml")) for d in docs(p)] + \
        docs(CLUSTER / "mlflow" / "kubernetes.yaml")


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    """The one Kubernetes object of ``kind`` (and ``name``)."""
    (found,) = [d for d in k8s_docs() if d["kind"] == kind
                and (name is None or d["metadata"]["name"] == name)]
    return found


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


def requirements() -> dict[str, Requirement]:
    lines = (CLUSTER / "requirements.txt").read_text().splitlines()
    reqs = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return {canonicalize_name(r.name): r for r in reqs}


def exact_version(req: Requirement) -> Version:
    (spec,) = req.specifier
    assert spec.operator == "==", f"{req} is not pinned exactly"
    return Version(spec.version)


def ray_client_auth(env: dict[str, str], home: Path) -> dict[str, str]:
    """The HTTP headers a Ray client (the job CLI, ``ortho sweep submit``) sends to a cluster's
    job API when run with ``env`` and nothing else: what the installed Ray itself reads."""
    probe = ("import json; from ray._private.authentication.http_token_authentication import "
             "get_auth_headers_if_auth_enabled as h; print(json.dumps(h({})))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env={**env, "HOME": str(home)}, check=True, timeout=60)
    return json.loads(result.stdout.strip().splitlines()[-1])


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    """A container's environment: name to value, or to its ``valueFrom``."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def created_secret_keys(name: str) -> set[str]:
    """The keys the README's ``kubectl create secret generic NAME`` gives Secret ``name``."""
    commands = re.findall(rf"create secret generic {re.escape(name)}\b(.*)",
                          README.replace("\\\n", " "))
    return {key for command in commands for key in re.findall(r"--from-literal=(\w+)=", command)}
