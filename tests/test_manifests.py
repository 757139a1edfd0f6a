"""Deployment files checked without a cluster and without docker (neither runs here):

* every Kubernetes manifest in deploy/k8s against the Kubernetes 1.37 schemas, strictly
  (unknown fields refused), with kubernetes-validate (offline; its schemas ship in the wheel);
* what the schemas cannot know: probes on Streamlit's /_stcore/health at the port the
  Dockerfile exposes, non-root as the image's user, selectors that match, the Ingress's cookie
  and websocket timeout, the GPU variant's GPU and path;
* for a course (issue 39, items 7 and 8): TLS on the Ingress with HAProxy's security headers,
  no default secret anywhere (the Kubernetes Secret required, compose refusing to start
  without a password or a certificate), NetworkPolicies that let only the app's pods reach the
  database and only the ingress controller reach the app, a read-only root filesystem with the
  two writable folders the server needs, and every replica started by deploy/launch.py;
* compose.yaml parsed and compared with the Dockerfile and deploy/haproxy-compose.cfg;
* HAProxy's configuration (local and compose) checked by HAProxy itself (haproxy -c).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess

import pytest
import yaml
from conftest import ROOT

K8S = ROOT / "deploy" / "k8s"
DOCKERFILE = (ROOT / "Dockerfile").read_text()
HAPROXY_CFG = (ROOT / "deploy" / "haproxy.cfg").read_text()
COMPOSE_BACKEND = (ROOT / "deploy" / "haproxy-compose.cfg").read_text()


def _docs() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def _by(kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for _, d in _docs() if d["kind"] == kind}


# `streamlit run app.py` through deploy/launch.py (no external-address lookup, issue 39 B17).
LAUNCH = ["python", "deploy/launch.py", "run", "app.py"]


def _exposed_port() -> int:
    return int(re.search(r"^EXPOSE\s+(\d+)", DOCKERFILE, re.M).group(1))


def _image_uid() -> int:
    return int(re.search(r"useradd[^\n]*--uid\s+(\d+)", DOCKERFILE).group(1))


# -- Kubernetes -------------------------------------------------------------------------------

kv = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed (requirements-dev.txt)"
)


@pytest.mark.parametrize("name,doc", _docs(), ids=lambda x: x if isinstance(x, str) else "")
def test_manifest_matches_the_kubernetes_schema(name, doc):
    assert kv.validate(doc, "1.37.0", strict=True) == "1.37"


def test_the_schema_check_can_fail():
    deployment = copy.deepcopy(_by("Deployment")["kvcache-lab"])
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")  # a typo: unknown field
    with pytest.raises(kv.ValidationError):
        kv.validate(deployment, "1.37.0", strict=True)
    deployment = copy.deepcopy(_by("Deployment")["kvcache-lab"])
    deployment["spec"]["replicas"] = "two"  # a wrong type
    with pytest.raises(kv.ValidationError):
        kv.validate(deployment, "1.37.0", strict=True)


def test_kustomization_lists_every_manifest():
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(
        p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"
    )


def _containers(dep: dict) -> list[dict]:
    return dep["spec"]["template"]["spec"]["containers"]


@pytest.mark.parametrize("name", ["kvcache-lab", "kvcache-lab-gpu"])
def test_deployment_probes_resources_and_user(name):
    dep = _by("Deployment")[name]
    pod = dep["spec"]["template"]["spec"]
    (c,) = _containers(dep)
    port = next(p for p in c["ports"] if p["name"] == "http")
    assert port["containerPort"] == _exposed_port()  # the Dockerfile's EXPOSE
    base = "/gpu" if name.endswith("gpu") else ""
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": base + "/_stcore/health", "port": "http"}
    # Liveness is more patient than readiness: a busy pod is taken out of rotation, not killed.
    live, ready = c["livenessProbe"], c["readinessProbe"]
    assert (
        live["periodSeconds"] * live["failureThreshold"]
        > ready["periodSeconds"] * ready["failureThreshold"]
    )
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    sc = pod["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == _image_uid() != 0
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert (
        dep["spec"]["selector"]["matchLabels"].items()
        <= dep["spec"]["template"]["metadata"]["labels"].items()
    )
    assert {"name": "KVLAB_HOSTED", "value": "1"} in c["env"]
    # Behind the ingress controller, whose X-Forwarded-For is the visitor's address.
    assert {"name": "KVLAB_BEHIND_PROXY", "value": "1"} in c["env"]


def test_gpu_variant_asks_for_one_gpu_and_serves_under_its_path():
    (c,) = _containers(_by("Deployment")["kvcache-lab-gpu"])
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "--server.baseUrlPath=gpu" in c["command"]
    assert c["command"][:4] == LAUNCH
    assert f"--server.port={_exposed_port()}" in c["command"]
    (cpu,) = _containers(_by("Deployment")["kvcache-lab"])
    assert "nvidia.com/gpu" not in str(cpu["resources"])
    assert _by("Deployment")["kvcache-lab-gpu"]["spec"]["replicas"] == 1  # one queue per GPU


def test_services_select_their_deployments():
    deps = {**_by("Deployment"), **_by("StatefulSet")}  # the live class's PostgreSQL too
    for name, svc in _by("Service").items():
        labels = deps[name]["spec"]["template"]["metadata"]["labels"]
        assert svc["spec"]["selector"].items() <= labels.items()
        other = [d for n, d in deps.items() if n != name]
        assert not any(
            svc["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
            for d in other
        )
        named = {
            p["name"]
            for c in deps[name]["spec"]["template"]["spec"]["containers"]
            for p in c["ports"]
        }
        assert (
            svc["spec"]["ports"][0]["targetPort"]
            == ("postgres" if name.endswith("-db") else "http")
            and svc["spec"]["ports"][0]["targetPort"] in named
        )


def test_ingress_routes_by_path_with_cookie_affinity_and_websocket_timeouts():
    (ing,) = _by("Ingress").values()
    ann = ing["metadata"]["annotations"]
    assert ann["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert ann["nginx.ingress.kubernetes.io/session-cookie-name"] == "KVLAB_REPLICA"
    value, unit = re.search(r"timeout tunnel (\d+)(s|m|h)\b", HAPROXY_CFG).groups()
    tunnel_s = int(value) * {"s": 1, "m": 60, "h": 3600}[unit]
    for key in ("proxy-read-timeout", "proxy-send-timeout"):  # as HAProxy's tunnel timeout
        assert int(ann[f"nginx.ingress.kubernetes.io/{key}"]) == tunnel_s
    # Connections per source address, as HAProxy's default (a class of 400 behind one address).
    per_source = re.search(r"KVLAB_LB_CONN_PER_SOURCE-(\d+)", HAPROXY_CFG).group(1)
    assert ann["nginx.ingress.kubernetes.io/limit-connections"] == per_source == "4000"
    services = _by("Service")
    paths = {
        p["path"]: p["backend"]["service"]
        for rule in ing["spec"]["rules"]
        for p in rule["http"]["paths"]
    }
    assert paths["/"]["name"] == "kvcache-lab" and paths["/gpu"]["name"] == "kvcache-lab-gpu"
    for backend in paths.values():
        assert backend["port"]["name"] in {
            p["name"] for p in services[backend["name"]]["spec"]["ports"]
        }


def test_autoscaler_scales_the_cpu_deployment_on_cpu():
    (hpa,) = _by("HorizontalPodAutoscaler").values()
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "kvcache-lab",
    }
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]


# -- compose ----------------------------------------------------------------------------------


def test_compose_runs_the_dockerfile_image_behind_haproxy():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    apps = sorted(n for n, s in services.items() if s.get("build"))
    assert apps == ["app1", "app2"]
    servers = re.findall(r"^\s*server (\S+) (\S+):(\d+) cookie (\S+)", COMPOSE_BACKEND, re.M)
    # One HAProxy server line per app service, at its name and the Dockerfile's port.
    assert sorted((s[0], s[1], int(s[2]), s[3]) for s in servers) == [
        (a, a, _exposed_port(), a) for a in apps
    ]
    for a in apps:
        assert services[a]["build"] == "." and (ROOT / "Dockerfile").exists()
        assert str(_exposed_port()) in services[a]["expose"]
        # The app trusts X-Forwarded-For (HAProxy's, which replaces the client's), so a
        # replica is reachable only through HAProxy: exposed to the network, never published.
        assert services[a]["environment"]["KVLAB_BEHIND_PROXY"] == "1"
        assert "ports" not in services[a]
    # The image alone (docker run -p 8501:8501) is reached directly: it must not trust it.
    assert "KVLAB_BEHIND_PROXY" not in DOCKERFILE
    # The image's HEALTHCHECK is what "service_healthy" waits for.
    assert "HEALTHCHECK" in DOCKERFILE and "/_stcore/health" in DOCKERFILE
    lb = services["lb"]
    assert lb["image"].startswith("haproxy:2.")
    assert lb["depends_on"] == {a: {"condition": "service_healthy"} for a in apps}
    mounts = {v.rsplit(":", 2)[1]: v.rsplit(":", 2)[0] for v in lb["volumes"]}
    files = [lb["command"][i + 1] for i, a in enumerate(lb["command"]) if a == "-f"]
    assert [mounts[f] for f in files] == ["./deploy/haproxy.cfg", "./deploy/haproxy-compose.cfg"]
    bind = lb["environment"]["KVLAB_LB_BIND"]
    assert any(p.split(":")[1] == bind.lstrip(":") for p in lb["ports"])
    # Over TLS (issue 39, item 7): HTTPS published on 443, plain HTTP on 80 only redirects.
    assert lb["environment"]["KVLAB_LB_CERT"] in mounts
    published = {p.split(":")[1]: p.split(":")[0] for p in lb["ports"]}
    assert published[bind.lstrip(":")] == "443"
    assert published[lb["environment"]["KVLAB_LB_HTTP_BIND"].lstrip(":")] == "80"


# -- HAProxy's own check ----------------------------------------------------------------------

haproxy = pytest.mark.skipif(
    shutil.which("haproxy") is None,
    reason="HAProxy is not installed (apt-get install haproxy); .ci/run installs it",
)


def _haproxy_check(*files: str, bind: str = "127.0.0.1:18500"):
    env = dict(os.environ, KVLAB_LB_BIND=bind, KVLAB_HAPROXY_SOCKET="/tmp/kvlab-check.sock")
    return subprocess.run(
        ["haproxy", "-c", *(a for f in files for a in ("-f", f))],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )


@haproxy
def test_haproxy_accepts_the_compose_configuration(tmp_path):
    out = _haproxy_check(
        str(ROOT / "deploy/haproxy.cfg"), str(ROOT / "deploy/haproxy-compose.cfg"), bind=":8501"
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # Outside docker the names app1/app2 do not resolve: the only warnings allowed.
    warnings = [ln for ln in (out.stdout + out.stderr).splitlines() if "[WARNING]" in ln]
    assert all("could not resolve address" in w for w in warnings), warnings


@haproxy
def test_haproxy_check_can_fail(tmp_path):
    broken = tmp_path / "backend.cfg"
    broken.write_text("backend replicas\n    server app1 127.0.0.1:8601 cookie app1 chek\n")
    out = _haproxy_check(str(ROOT / "deploy/haproxy.cfg"), str(broken))
    assert out.returncode != 0 and "chek" in out.stdout + out.stderr


# -- for a course: TLS, secrets, network, filesystem (issue 39, items 7 and 8) ---------------------

# ingress-nginx's checks of a custom-headers ConfigMap (internal/ingress/annotations/
# customheaders/main.go): a header or value outside these is refused, and the Ingress with it.
NGINX_HEADER = re.compile(r"^[a-zA-Z\d\-_]+$")
NGINX_VALUE = re.compile(r"^[a-zA-Z\d_ :;.,\\/\"'?!(){}\[\]@<>=\-+*#$&\x60|~^%]+$")


def _haproxy_headers() -> dict[str, str]:
    """The headers deploy/haproxy.cfg sets on every answer (http-after-response)."""
    out = {}
    for name, value in re.findall(
        r"^\s+http-after-response set-header (\S+) (\"[^\"]*\"|\S+)(?:\s+if .*)?$",
        HAPROXY_CFG,
        re.M,
    ):
        out[name] = value.strip('"')
    return out


def test_ingress_serves_https_only_with_haproxys_headers():
    (ing,) = _by("Ingress").values()
    ann = ing["metadata"]["annotations"]
    hosts = [r["host"] for r in ing["spec"]["rules"]]
    assert [h for t in ing["spec"]["tls"] for h in t["hosts"]] == hosts
    assert all(t["secretName"] for t in ing["spec"]["tls"])
    assert ann["nginx.ingress.kubernetes.io/ssl-redirect"] == "true"
    assert ann["nginx.ingress.kubernetes.io/force-ssl-redirect"] == "true"
    namespace, name = ann["nginx.ingress.kubernetes.io/custom-headers"].split("/")
    headers = _by("ConfigMap")[name]["data"]
    want = _haproxy_headers()
    assert want.pop("Strict-Transport-Security").startswith("max-age=")  # HAProxy, over TLS
    assert headers == want  # the same policy and headers as HAProxy's
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    for header, value in headers.items():
        assert NGINX_HEADER.match(header) and NGINX_VALUE.match(value), header
    # The allow-list the controller needs is in the file's comments, header for header.
    allowed = re.search(r"global-allowed-response-headers: \"([^\"]+)\"", INGRESS_TEXT).group(1)
    assert set(allowed.split(",")) == set(headers)


INGRESS_TEXT = (K8S / "ingress.yaml").read_text()


def test_no_default_secret_ships():
    """The database password comes from a Secret that must exist (no optional reference, no
    Secret object, no literal password); compose refuses to start without one."""
    refs = []

    def walk(x):
        if isinstance(x, dict):
            if "secretKeyRef" in x:
                refs.append(x["secretKeyRef"])
            for k, v in x.items():
                assert not (k == "name" and v == "POSTGRES_PASSWORD" and "value" in x)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for _, doc in _docs():
        assert doc["kind"] != "Secret"
        walk(doc)
    assert len(refs) == 3  # the database, the CPU pods, the GPU pod
    assert all(r == {"name": "kvcache-lab-db", "key": "password"} for r in refs)

    compose = (ROOT / "compose.yaml").read_text()
    uses = re.findall(r"\$\{KVLAB_DB_PASSWORD([^}]*)\}", compose)
    assert len(uses) == 2 and all(u.startswith(":?") and len(u) > 2 for u in uses), uses
    assert re.findall(r"\$\{KVLAB_TLS_PEM(:\?[^}]+)\}", compose)
    assert "kvlab@" not in compose.replace("kvlab:${", "")  # no password in a URL


def _matches(selector: dict, labels: dict) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions In/NotIn/Exists)."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for e in selector.get("matchExpressions", []):
        value = labels.get(e["key"])
        op = e["operator"]
        if op == "In" and value not in e["values"]:
            return False
        if op == "NotIn" and value in e["values"]:
            return False
        if op == "Exists" and e["key"] not in labels:
            return False
    return True


def _pods() -> dict[str, dict]:
    """Workload name -> its pods' labels and named ports."""
    out = {}
    for kind in ("Deployment", "StatefulSet"):
        for name, d in _by(kind).items():
            tmpl = d["spec"]["template"]
            ports = {
                p["name"]: p["containerPort"]
                for c in tmpl["spec"]["containers"]
                for p in c.get("ports", [])
            }
            out[name] = {"labels": tmpl["metadata"]["labels"], "ports": ports}
    return out


def test_network_policies_admit_only_the_app_to_the_database_and_the_ingress_to_the_app():
    pods = _pods()
    policies = _by("NetworkPolicy")
    # Every pod is selected by a policy of ingress type: nothing is left open to the cluster.
    for name, pod in pods.items():
        mine = [p for p in policies.values() if _matches(p["spec"]["podSelector"], pod["labels"])]
        assert len(mine) == 1 and mine[0]["spec"]["policyTypes"] == ["Ingress"], name
    db = next(
        p
        for p in policies.values()
        if _matches(p["spec"]["podSelector"], pods["kvcache-lab-db"]["labels"])
    )
    (rule,) = db["spec"]["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}  # pods of this namespace, no other namespace
    admitted = {n for n, p in pods.items() if _matches(peer["podSelector"], p["labels"])}
    assert admitted == {"kvcache-lab", "kvcache-lab-gpu"}
    assert [p["port"] for p in rule["ports"]] == [pods["kvcache-lab-db"]["ports"]["postgres"]]

    web = next(
        p
        for p in policies.values()
        if _matches(p["spec"]["podSelector"], pods["kvcache-lab"]["labels"])
    )
    assert _matches(web["spec"]["podSelector"], pods["kvcache-lab-gpu"]["labels"])
    (rule,) = web["spec"]["ingress"]
    (peer,) = rule["from"]
    # Only the ingress controller's namespace, and no pod of the app's own namespace.
    assert set(peer) == {"namespaceSelector"}
    assert peer["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}
    }
    assert [p["port"] for p in rule["ports"]] == [_exposed_port()]


@pytest.mark.parametrize("name", ["kvcache-lab", "kvcache-lab-gpu"])
def test_app_pods_run_read_only_as_the_image_user_through_the_launcher(name):
    pod = _by("Deployment")[name]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == _image_uid() != 0
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
    # Exactly the folders the server writes (tests/test_deploy.py watches it): /tmp and the
    # image user's cache, each an emptyDir with a size limit. Never the app's code (/app).
    assert set(writable) == set(WRITABLE)
    assert all(v["emptyDir"]["sizeLimit"] for v in writable.values())
    assert not any(p == "/app" or p.startswith("/app/") for p in writable)
    assert c["command"][:4] == LAUNCH


# The folders a replica may write, in the container: tests/test_deploy.py maps them to folders
# of its own and checks that the server writes nowhere else.
WRITABLE = {"/tmp": "TMPDIR", "/home/app/.cache": "HOME/.cache"}


def test_compose_runs_the_apps_read_only_through_the_launcher():
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    for name in ("app1", "app2"):
        app = services[name]
        assert app["read_only"] is True and app["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in app["security_opt"]
        writable = set(app["tmpfs"]) | {v.split(":")[1] for v in app["volumes"]}
        assert writable == set(WRITABLE)
        assert app["command"][:4] == LAUNCH
        assert "user" not in app  # the image's own user (Dockerfile USER), never root
    lb = services["lb"]
    assert lb["read_only"] is True and lb["cap_drop"] == ["ALL"]
    assert lb["environment"]["KVLAB_HAPROXY_SOCKET"].startswith("/tmp/") and "/tmp" in lb["tmpfs"]
    assert re.search(r"^USER\s+(?!root|0)\S+", DOCKERFILE, re.M)


def test_launcher_exists_and_is_in_the_image():
    assert (ROOT / "deploy" / "launch.py").is_file()
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not any(i.strip("/") in ("deploy", "deploy/launch.py") for i in ignored)
