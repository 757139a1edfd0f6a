"""The live class's database in the deployment files: a PostgreSQL StatefulSet with a volume
and a headless Service in deploy/k8s, the app pods' KVLAB_DATABASE_URL pointing at it with
the password from its Secret; compose.yaml's db service for both replicas. (The Kubernetes
schema check of every manifest is tests/test_manifests.py's.)"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import yaml
from conftest import ROOT

K8S = ROOT / "deploy" / "k8s"


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def _env(container: dict) -> dict:
    return {e["name"]: e for e in container["env"]}


def test_postgres_is_a_statefulset_with_a_volume_and_a_stable_name():
    docs = _docs("database.yaml")
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    (svc,) = [d for d in docs if d["kind"] == "Service"]
    assert (
        svc["spec"]["clusterIP"] == "None"
        and sts["spec"]["serviceName"] == svc["metadata"]["name"] == "kvcache-lab-db"
    )
    pod = sts["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "database"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    (c,) = pod["spec"]["containers"]
    mount = next(m for m in c["volumeMounts"] if m["name"] == claim["metadata"]["name"])
    env = _env(c)
    assert env["PGDATA"]["value"].startswith(mount["mountPath"] + "/")  # not the volume root
    assert env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "kvcache-lab-db",
        "key": "password",
    }
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert "pg_isready" in c["readinessProbe"]["exec"]["command"]
    assert c["image"].startswith("postgres:")
    assert "kubectl create secret generic kvcache-lab-db" in (K8S / "database.yaml").read_text()
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    assert "database.yaml" in listed


def test_every_app_pod_reaches_the_one_database():
    db = next(d for d in _docs("database.yaml") if d["kind"] == "StatefulSet")
    db_env = _env(db["spec"]["template"]["spec"]["containers"][0])
    for name in ("app.yaml", "gpu.yaml"):
        dep = next(d for d in _docs(name) if d["kind"] == "Deployment")
        (c,) = dep["spec"]["template"]["spec"]["containers"]
        env = _env(c)
        names = [e["name"] for e in c["env"]]
        # Kubernetes expands $(KVLAB_DB_PASSWORD) only from a variable defined before it.
        assert names.index("KVLAB_DB_PASSWORD") < names.index("KVLAB_DATABASE_URL")
        assert env["KVLAB_DB_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "kvcache-lab-db"
        u = urlsplit(env["KVLAB_DATABASE_URL"]["value"])
        assert u.scheme == "postgresql" and u.hostname == "kvcache-lab-db" and u.port == 5432
        assert u.username == db_env["POSTGRES_USER"]["value"]
        assert u.path == "/" + db_env["POSTGRES_DB"]["value"]
        assert u.password == "$(KVLAB_DB_PASSWORD)"


def test_compose_gives_both_replicas_one_postgres():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    s = compose["services"]
    db = s["db"]
    assert db["image"].startswith("postgres:") and "ports" not in db
    assert (
        any(v.startswith("kvlab-db:") for v in db["volumes"]) and "kvlab-db" in compose["volumes"]
    )
    assert "pg_isready" in db["healthcheck"]["test"]
    for app in ("app1", "app2"):
        url = s[app]["environment"]["KVLAB_DATABASE_URL"]
        # The password is required (issue 39, item 8: no "kvlab" fallback): ${VAR:?message}.
        m = re.fullmatch(r"postgresql://(\w+):\$\{KVLAB_DB_PASSWORD:\?[^}]+\}@db:5432/(\w+)", url)
        assert m and m.groups() == (
            db["environment"]["POSTGRES_USER"],
            db["environment"]["POSTGRES_DB"],
        )
        assert s[app]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert db["environment"]["POSTGRES_PASSWORD"].startswith("${KVLAB_DB_PASSWORD:?")


def test_replicas_pass_the_database_url_on(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "deploy"))
    import replicas

    c = replicas.Cluster(replicas=1, database_url="postgresql://kvlab@127.0.0.1:5/kvlab")
    seen = {}

    class P:
        def __init__(self, cmd, env, **kw):
            seen.update(env)

    orig = replicas.subprocess.Popen
    replicas.subprocess.Popen = P
    try:
        c._spawn(replicas.Replica("app1", "127.0.0.1:8601", tmp_path / "log"))
    finally:
        replicas.subprocess.Popen = orig
    assert seen["KVLAB_DATABASE_URL"] == "postgresql://kvlab@127.0.0.1:5/kvlab"
    assert seen["KVLAB_BEHIND_PROXY"] == "1"
