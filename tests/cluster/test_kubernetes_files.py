"""The Kubernetes manifests of ``cluster/`` (KubeRay and MLflow), checked as files: the
RayCluster and the RayJob are what the README says (the entrypoint is one the ``ortho``
parser accepts and KubeRay's submitter shell cannot change); every Ray pod runs with the
token of a Secret the README creates, as the installed Ray reads it; only the head reaches
MLflow; the NetworkPolicies, evaluated as Kubernetes would, admit exactly the connections the
README lists; Services and Secrets are referenced consistently; nothing is exposed outside the
cluster.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import pytest

from sweeps.cli import build_parser
from sweeps.spec import load_spec, resolve
from sweeps.studies import storage_url
from tests.cluster.manifests import (
    README,
    created_secret_keys,
    env_of,
    exact_version,
    k8s_docs,
    one,
    ray_client_auth,
    requirements,
    walk,
)
from tests.servers import postgres_bindir

NAMESPACE = "ortho"
RAY_CLIENT = {"ortho-sweeps/ray-client": "true"}
MLFLOW_CLIENT = {"ortho-sweeps/mlflow-client": "true"}
OPERATOR = ("kuberay-system", {"app.kubernetes.io/name": "kuberay-operator"})
"""Where the KubeRay Helm chart (README, part B) runs the operator, and its pods' label."""

Pod = tuple[str, dict[str, str]]
"""A pod as NetworkPolicies see it: its namespace and labels."""


def ray_pods() -> dict[str, Pod]:
    """The head's and a worker's labels, as KubeRay sets them."""
    name = one("RayCluster")["metadata"]["name"]
    return {kind: (NAMESPACE, {"ray.io/cluster": name, "ray.io/node-type": kind})
            for kind in ("head", "worker")}


def template_labels(kind: str, name: str) -> Pod:
    return NAMESPACE, one(kind, name)["spec"]["template"]["metadata"]["labels"]


def ray_pod_specs() -> dict[str, dict[str, Any]]:
    """Every pod spec we write for Ray: head, worker groups, the RayJob's submitter."""
    spec = one("RayCluster")["spec"]
    return {"head": spec["headGroupSpec"]["template"]["spec"],
            **{g["groupName"]: g["template"]["spec"] for g in spec["workerGroupSpecs"]},
            "submitter": one("RayJob")["spec"]["submitterPodTemplate"]["spec"]}


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"unsupported selector {selector}"
    return selector.get("matchLabels", {}).items() <= labels.items()


def admits(peer: dict[str, Any], policy_namespace: str, source: Pod) -> bool:
    """Whether one ``from`` entry of a NetworkPolicy admits ``source``."""
    assert set(peer) <= {"podSelector", "namespaceSelector"}, f"unsupported peer {peer}"
    namespace, labels = source
    if "namespaceSelector" in peer:
        in_namespace = matches(peer["namespaceSelector"],
                               {"kubernetes.io/metadata.name": namespace})
    else:
        in_namespace = namespace == policy_namespace
    return in_namespace and matches(peer.get("podSelector", {}), labels)


def may_connect(source: Pod, target: Pod, port: int) -> bool:
    """Whether the NetworkPolicies of the manifests let ``source`` open ``port`` on
    ``target``: admitted by no policy selecting it isolates a pod (Kubernetes' semantics)."""
    policies = [p for p in k8s_docs() if p["kind"] == "NetworkPolicy"
                and p["metadata"]["namespace"] == target[0]
                and matches(p["spec"]["podSelector"], target[1])]
    assert all(p["spec"]["policyTypes"] == ["Ingress"] for p in policies)
    if not policies:
        return True
    return any((not rule.get("ports") or any(p["port"] == port and p.get("protocol", "TCP")
                                             == "TCP" for p in rule["ports"]))
               and ("from" not in rule or any(admits(peer, policy["metadata"]["namespace"],
                                                     source) for peer in rule["from"]))
               for policy in policies for rule in policy["spec"].get("ingress", []))


# The RayCluster and the RayJob ---------------------------------------------------------

def test_raycluster_gpu_workers_clusterip_head() -> None:
    cluster = one("RayCluster")
    assert cluster["apiVersion"] == "ray.io/v1"
    assert cluster["spec"]["rayVersion"] == str(exact_version(requirements()["ray"]))
    head = cluster["spec"]["headGroupSpec"]
    assert head["serviceType"] == "ClusterIP" and head["rayStartParams"]["num-cpus"] == "0"
    for group in cluster["spec"]["workerGroupSpecs"]:
        for container in group["template"]["spec"]["containers"]:
            assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    claim = one("PersistentVolumeClaim", "ortho-shared")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_rayjob_entrypoint_names_no_variable_and_keeps_its_home_on_the_shared_volume() -> None:
    job = one("RayJob")
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": one("RayCluster")["metadata"]
                                              ["name"]}
    entrypoint = job["spec"]["entrypoint"]
    # KubeRay runs it in the submitter pod's shell, which would expand a variable there.
    assert not re.search(r"[$`\\]", entrypoint), entrypoint
    argv = shlex.split(entrypoint)
    assert argv[:3] == ["python", "-m", "sweeps.cli"]
    args = build_parser().parse_args(argv[3:])
    assert (args.command, args.sweep_command, args.profile, args.address) == \
        ("sweep", "run", "paper", "auto")
    # The tracking URI is the head's ORTHO_TRACKING_URI; Tune's state is HOME/ray.
    assert args.tracking_uri is None and args.storage is None
    (head,) = ray_pod_specs()["head"]["containers"]
    (mount,) = [m["mountPath"] for m in head["volumeMounts"] if m["name"] == "shared"]
    assert Path(args.home).is_relative_to(mount)
    resolve(load_spec(args.spec), args.profile)


def test_only_the_head_is_told_the_tracking_server() -> None:
    tracking = {"configMapKeyRef": {"name": "ortho-tracking", "key": "tracking-uri"}}
    specs = ray_pod_specs()
    for name, spec in specs.items():
        for container in spec["containers"]:
            env = env_of(container)
            assert env.get("ORTHO_TRACKING_URI") == (tracking if name == "head" else None), name
            if name != "submitter":
                assert env["ORTHO_DATA_DIR"] == "/mnt/shared/data"


def test_only_the_head_is_told_the_studies_database(monkeypatch) -> None:
    """The head's ORTHO_OPTUNA_STORAGE is the database the init script creates, as its user,
    with the password of the Secret the PostgreSQL container gives that script; it is what
    the sweep's driver opens there (no --optuna-storage in the RayJob)."""
    for name, spec in ray_pod_specs().items():
        for container in spec["containers"]:
            if name != "head":
                assert "ORTHO_OPTUNA_STORAGE" not in env_of(container), name
    (head,) = ray_pod_specs()["head"]["containers"]
    names = [e["name"] for e in head["env"]]
    env = env_of(head)
    (postgres,) = one("StatefulSet", "mlflow-postgres")["spec"]["template"]["spec"]["containers"]
    secret = env_of(postgres)["OPTUNA_PASSWORD"]
    assert secret == {"secretKeyRef": {"name": "optuna-db", "key": "password"}}
    assert created_secret_keys("optuna-db") == {"password"}
    (variable,) = [n for n, v in env.items() if v == secret]
    # Kubernetes expands $(VAR) only from variables defined earlier in the list.
    assert names.index(variable) < names.index("ORTHO_OPTUNA_STORAGE")
    url = urlparse(env["ORTHO_OPTUNA_STORAGE"].replace(f"$({variable})", "pw"))
    service = one("Service", "mlflow-postgres")
    assert (url.scheme, url.username, url.password, url.hostname, url.port, url.path) == (
        "postgresql+psycopg2", "optuna", "pw", service["metadata"]["name"],
        service["spec"]["ports"][0]["port"], "/optuna")
    assert re.search(r"CREATE USER optuna PASSWORD :'password';\s+"
                     r"CREATE DATABASE optuna OWNER optuna;", init_script())
    monkeypatch.setenv("ORTHO_OPTUNA_STORAGE", url.geturl())
    tracking = one("ConfigMap", "ortho-tracking")["data"]["tracking-uri"]
    assert storage_url(None, tracking) == url.geturl()


def init_script() -> str:
    """The script PostgreSQL's image runs at its first start (ConfigMap optuna-db-init)."""
    statefulset = one("StatefulSet", "mlflow-postgres")["spec"]["template"]["spec"]
    (container,) = statefulset["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "init"]
    assert mount["mountPath"] == "/docker-entrypoint-initdb.d"
    (volume,) = [v for v in statefulset["volumes"] if v["name"] == "init"]
    assert volume["configMap"]["defaultMode"] == 0o555  # run, not sourced by the entrypoint
    (script,) = one("ConfigMap", volume["configMap"]["name"])["data"].values()
    return script


@pytest.mark.cluster
def test_the_init_script_makes_a_studies_database_closed_to_others(postgres, tmp_path) -> None:
    """Run as PostgreSQL's image runs it (its superuser and database in the environment), on
    a real server: Optuna then keeps a study there as user optuna, who may not open the
    database MLflow's server uses, and no other user but a superuser may open the studies'.
    The password holds a quote: psql's :'password' makes it a literal, not SQL."""
    import optuna
    import psycopg2

    password = "it's-a-secret"
    mlflow_db = urlparse(postgres.create_database("mlflow_of_the_init_script")).path[1:]
    script = tmp_path / "optuna.sh"
    script.write_text(init_script())
    script.chmod(0o555)
    env = {"PATH": f"{postgres_bindir()}:{os.environ['PATH']}", "POSTGRES_USER": postgres.user,
           "POSTGRES_DB": mlflow_db, "OPTUNA_PASSWORD": password, "PGHOST": "127.0.0.1",
           "PGPORT": str(postgres.port), "PGPASSWORD": postgres.password}
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    studies = (f"postgresql+psycopg2://optuna:{quote(password, safe='')}@127.0.0.1:"
               f"{postgres.port}/optuna")
    optuna.create_study(storage=studies, study_name="s").optimize(lambda t: 1.0, n_trials=1)
    assert len(optuna.load_study(study_name="s", storage=studies).trials) == 1

    def connect(user: str, secret: str, database: str) -> None:
        psycopg2.connect(host="127.0.0.1", port=postgres.port, user=user, password=secret,
                         dbname=database).close()

    admin = psycopg2.connect(host="127.0.0.1", port=postgres.port, user=postgres.user,
                             password=postgres.password, dbname="postgres")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("CREATE USER someone_else PASSWORD 'x'")
    admin.close()
    connect("someone_else", "x", "postgres")  # a database left open: the user can log in
    for user, secret, database in (("optuna", password, mlflow_db),
                                   ("someone_else", "x", "optuna")):
        with pytest.raises(psycopg2.OperationalError, match="permission denied"):
            connect(user, secret, database)


# Ray token authentication --------------------------------------------------------------

def test_every_ray_pod_runs_with_the_token_of_a_documented_secret(tmp_path: Path) -> None:
    auth = one("RayCluster")["spec"]["authOptions"]
    # authOptions gives the token to the operator's dashboard client and the autoscaler.
    assert auth["mode"] == "token"
    secret = auth["secretName"]
    specs = ray_pod_specs()
    assert {"head", "submitter"} < set(specs)
    for name, spec in specs.items():
        for container in spec["containers"]:
            env = env_of(container)
            assert env["RAY_AUTH_MODE"] == "token", name
            assert env["RAY_AUTH_TOKEN"] == {"secretKeyRef": {"name": secret,
                                                              "key": "auth_token"}}, name
    # KubeRay reads the key auth_token; the README creates it.
    assert created_secret_keys(secret) == {"auth_token"}
    # What the installed Ray makes of such a container's environment, the Secret's value in.
    (head,) = specs["head"]["containers"]
    env = {name: value if isinstance(value, str) else "from-the-secret"
           for name, value in env_of(head).items() if name.startswith("RAY_AUTH")}
    assert ray_client_auth(env, tmp_path) == {"authorization": "Bearer from-the-secret"}


def test_readme_submits_from_a_laptop_with_the_secrets_token() -> None:
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", README, re.DOTALL)
              if "ortho sweep submit" in b and "port-forward svc/" in b]
    assert len(blocks) == 1
    exports = dict(re.findall(r"^export (\w+)=(.*)$", blocks[0], re.MULTILINE))
    secret = one("RayCluster")["spec"]["authOptions"]["secretName"]
    assert exports["RAY_AUTH_MODE"] == "token"
    assert exports["RAY_AUTH_TOKEN"] == (f"$(kubectl -n {NAMESPACE} get secret {secret} -o "
                                         "jsonpath='{.data.auth_token}' | base64 -d)")


def test_submitter_is_a_labelled_ray_client() -> None:
    template = one("RayJob")["spec"]["submitterPodTemplate"]
    assert RAY_CLIENT.items() <= template["metadata"]["labels"].items()
    submitter = (NAMESPACE, template["metadata"]["labels"])
    assert may_connect(submitter, ray_pods()["head"], 8265)


# NetworkPolicies ------------------------------------------------------------------------

def test_only_the_mlflow_server_and_the_ray_head_reach_postgres() -> None:
    postgres = template_labels("StatefulSet", "mlflow-postgres")
    mlflow = template_labels("Deployment", "mlflow")
    pods = ray_pods()
    assert may_connect(mlflow, postgres, 5432)
    assert may_connect(pods["head"], postgres, 5432)  # the Optuna studies' database
    assert not may_connect(mlflow, postgres, 22)
    for source in (pods["worker"], (NAMESPACE, {}), (NAMESPACE, MLFLOW_CLIENT),
                   (NAMESPACE, RAY_CLIENT), ("default", mlflow[1]), ("default", pods["head"][1])):
        assert not may_connect(source, postgres, 5432), source


def test_only_the_ray_head_and_labelled_clients_reach_the_mlflow_server() -> None:
    mlflow = template_labels("Deployment", "mlflow")
    (port,) = [p["targetPort"] for p in one("Service", "mlflow")["spec"]["ports"]]
    pods = ray_pods()
    assert may_connect(pods["head"], mlflow, port)
    assert may_connect((NAMESPACE, MLFLOW_CLIENT), mlflow, port)
    # The workers hand their results to the driver's writer on the head.
    for source in (pods["worker"], (NAMESPACE, {}), (NAMESPACE, RAY_CLIENT),
                   ("default", MLFLOW_CLIENT), OPERATOR):
        assert not may_connect(source, mlflow, port), source


@pytest.mark.parametrize(("source", "ports"), [
    ("worker", {6379, 8265, 10001, 8076, 52365}),
    ("ray-client", {8265, 10001}),
    ("operator", {8265}),
    ("unlabelled", set()),
    ("ray-client elsewhere", set()),
    ("mlflow", set()),
])
def test_who_reaches_the_ray_head_on_which_port(source: str, ports: set[int]) -> None:
    pods = ray_pods()
    sources = {"worker": pods["worker"], "ray-client": (NAMESPACE, RAY_CLIENT),
               "operator": OPERATOR, "unlabelled": (NAMESPACE, {}),
               "ray-client elsewhere": ("default", RAY_CLIENT),
               "mlflow": template_labels("Deployment", "mlflow")}
    reached = {p for p in (6379, 8265, 10001, 8076, 52365)
               if may_connect(sources[source], pods["head"], p)}
    assert reached == ports


def test_ray_pods_reach_each_other_and_nothing_else_reaches_a_worker() -> None:
    pods = ray_pods()
    assert may_connect(pods["head"], pods["worker"], 6379)
    assert may_connect(pods["worker"], pods["worker"], 12345)
    for source in ((NAMESPACE, RAY_CLIENT), OPERATOR, (NAMESPACE, {})):
        assert not may_connect(source, pods["worker"], 8265), source


def test_every_other_pod_of_the_namespace_admits_nothing() -> None:
    assert not may_connect((NAMESPACE, {}), (NAMESPACE, {"app": "anything"}), 80)
    # A namespace without the policies is left alone: the evaluation is not vacuous.
    assert may_connect((NAMESPACE, {}), ("elsewhere", {}), 80)


# References, Services, MLflow --------------------------------------------------------------

def test_config_maps_and_secrets_referenced_exist_or_are_documented() -> None:
    config_maps = {d["metadata"]["name"] for d in k8s_docs() if d["kind"] == "ConfigMap"}
    for doc in k8s_docs():
        for key, value, _ in walk(doc):
            if key == "configMapKeyRef":
                assert value["name"] in config_maps
            if key in {"secretKeyRef", "secretRef"}:
                assert f"create secret generic {value['name']}" in README


def test_services_select_pods() -> None:
    labels = [d["spec"]["template"]["metadata"]["labels"] for d in k8s_docs()
              if d["kind"] in {"Deployment", "StatefulSet"}]
    services = [d for d in k8s_docs() if d["kind"] == "Service"]
    assert services
    for service in services:
        selector = service["spec"]["selector"].items()
        assert any(selector <= pod.items() for pod in labels), service["metadata"]["name"]


def test_mlflow_deployment_backend_is_postgres_with_password_from_secret() -> None:
    (container,) = one("Deployment", "mlflow")["spec"]["template"]["spec"]["containers"]
    env = [e["name"] for e in container["env"]]
    values = {e["name"]: e.get("value") for e in container["env"]}
    uri = values["MLFLOW_BACKEND_STORE_URI"]
    assert uri == "postgresql+psycopg2://mlflow:$(DB_PASSWORD)@mlflow-postgres:5432/mlflow"
    # Kubernetes expands $(VAR) only from variables defined earlier in the list.
    assert env.index("DB_PASSWORD") < env.index("MLFLOW_BACKEND_STORE_URI")
    tracking = one("ConfigMap", "ortho-tracking")["data"]["tracking-uri"]
    service = one("Service", "mlflow")
    port = service["spec"]["ports"][0]["port"]
    namespace = service["metadata"]["namespace"]
    assert tracking == f"http://mlflow.{namespace}.svc.cluster.local:{port}"
    assert tracking.removeprefix("http://") in values["MLFLOW_SERVER_ALLOWED_HOSTS"].split(",")


def test_kubernetes_exposes_nothing_outside_the_cluster() -> None:
    kinds = {d["kind"] for d in k8s_docs()}
    assert not kinds & {"Ingress", "Gateway", "HTTPRoute"}
    assert {d["metadata"]["namespace"] for d in k8s_docs()} == {NAMESPACE}
    for doc in k8s_docs():
        if doc["kind"] == "Service":
            assert doc["spec"].get("type", "ClusterIP") == "ClusterIP"
        for key, value, _ in walk(doc):
            assert key not in {"hostNetwork", "hostPort", "nodePort"} or not value
