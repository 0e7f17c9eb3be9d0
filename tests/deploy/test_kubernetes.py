"""Offline validation of the Kubernetes manifests (deploy/kubernetes/) and the container recipe (Dockerfile).

No cluster and no image build: every kustomization (the base and each overlay) is rendered with
``kubectl kustomize``, every object is validated against the Kubernetes OpenAPI schemas shipped by the
``kubernetes-validate`` package (strict: an unknown field fails), the Prometheus Operator's PodMonitor (a CRD
those schemas lack) against a structural schema written here from the CRD's fields, and the rendered objects are
linted: resources, probes, security contexts, pinned image tags, selectors against labels, the worker's master
address against the master Service, ports against llmload's and Locust's defaults (read from the code), the
profile and dashboard copies against their originals.

kubectl (the pinned one scripts/setup_kubectl.sh puts in .venv/bin, else one on PATH) missing: every test that
renders skips with one line, or fails when ``LLMLOAD_REQUIRE_KUBECTL=1`` (CI,
which installs it with scripts/setup_kubectl.sh).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from harness.config import load_profile
from harness.exporter import DEFAULT_PORT

ROOT = Path(__file__).resolve().parents[2]
KDIR = ROOT / "deploy" / "kubernetes"
#: Every kustomization that `kubectl apply -k` takes (a Component is rendered through the overlay that uses it).
KUSTOMIZATIONS = ("base", "overlays/monitoring", "overlays/soak-job")
#: Plain manifests (`kubectl apply -f`).
PLAIN = ("tools/runs-reader.yaml",)
#: The oldest Kubernetes minor the manifests are validated for, and the newest the schemas know.
K8S_VERSIONS = ("1.30.0", latest_version())
NAMESPACE = "llmload"
#: profile copy -> (original, the keys the copy changes): every other key and value must be the original's.
PROFILE_COPIES = {
    "base/profile.yaml": ("profiles/k26.yaml", (("target", "base_url"), ("output", "dir"))),
    "overlays/soak-job/profile.yaml": ("profiles/soak.yaml",
                                       (("target", "base_url"), ("target", "api_key_env"), ("output", "dir"))),
}
DASHBOARD_COPIES = {"base/llmload.json": "grafana/dashboards/llmload.json"}


def _kubectl() -> str:
    """The kubectl scripts/setup_kubectl.sh put in the project's .venv (pinned), else one on PATH."""
    venv = ROOT / ".venv" / "bin" / "kubectl"
    path = str(venv) if os.access(venv, os.X_OK) else shutil.which("kubectl")
    if path is None:
        if os.environ.get("LLMLOAD_REQUIRE_KUBECTL") == "1":
            pytest.fail("LLMLOAD_REQUIRE_KUBECTL=1 but kubectl is missing (bash scripts/setup_kubectl.sh)")
        pytest.skip("kubectl not found: the Kubernetes manifests are not rendered (bash scripts/setup_kubectl.sh)")
    return path


@functools.cache
def _render_cached(kubectl: str, name: str) -> tuple[dict[str, Any], ...]:
    out = subprocess.run([kubectl, "kustomize", str(KDIR / name)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"kubectl kustomize {name} failed:\n{out.stderr}"
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def render(name: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize deploy/kubernetes/<name>` renders (skips/fails without kubectl)."""
    return list(_render_cached(_kubectl(), name))


def plain(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KDIR / name).read_text()) if d]


def objects(name: str) -> list[dict[str, Any]]:
    return plain(name) if name in PLAIN else render(name)


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pod_specs(objs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(workload name, pod template metadata, pod spec) of every Deployment, Job and bare Pod."""
    out = []
    for o in objs:
        if o["kind"] in ("Deployment", "Job"):
            t = o["spec"]["template"]
            out.append((o["metadata"]["name"], t["metadata"], t["spec"]))
        elif o["kind"] == "Pod":
            out.append((o["metadata"]["name"], o["metadata"], o["spec"]))
    return out


def containers(objs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(workload name, pod spec, container) of every container."""
    return [(n, spec, c) for n, _meta, spec in pod_specs(objs) for c in spec["containers"]]


def arg(c: dict[str, Any], flag: str) -> str | None:
    """The value following ``flag`` in the container's args (None when absent)."""
    args = c.get("args", [])
    return args[args.index(flag) + 1] if flag in args else None


def role(c: dict[str, Any]) -> str | None:
    args = c.get("args", [])
    return "master" if "--master" in args else "worker" if "--worker" in args else None


def locust_defaults() -> dict[str, Any]:
    """Locust's own option defaults (its argument parser, no locustfile)."""
    from locust.argument_parser import get_parser

    return vars(get_parser().parse_args([]))


def project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of each Dockerfile instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instr, _, rest = line.partition(" ")
            out.append((instr.upper(), rest.strip()))
    return out


ALL = KUSTOMIZATIONS + PLAIN


def test_every_kustomization_is_listed() -> None:
    """A kustomization added under deploy/kubernetes/ is rendered and validated here (listed in KUSTOMIZATIONS,
    or a Component that a listed overlay uses)."""
    found = {str(p.parent.relative_to(KDIR)) for p in KDIR.rglob("kustomization.yaml")}
    components = {d for d in found
                  if yaml.safe_load((KDIR / d / "kustomization.yaml").read_text())["kind"] == "Component"}
    assert found - components == set(KUSTOMIZATIONS)
    used = set()
    for k in KUSTOMIZATIONS:
        for c in yaml.safe_load((KDIR / k / "kustomization.yaml").read_text()).get("components", []):
            used.add(str((KDIR / k / c).resolve().relative_to(KDIR)))
    assert components <= used, f"components no overlay renders: {sorted(components - used)}"


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_objects_validate_against_the_kubernetes_schemas(name: str, version: str) -> None:
    checked = 0
    for o in objects(name):
        if o["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: not in the Kubernetes schemas; test_podmonitor_matches_the_crd_fields checks it
        try:
            kubernetes_validate.validate(o, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{name}: {o['kind']} {o['metadata']['name']}: {'.'.join(map(str, e.path))}: {e.message}")
        checked += 1
    assert checked >= 1


#: The PodMonitor fields llmload uses, with their types from the Prometheus Operator's CRD
#: (monitoring.coreos.com_podmonitors.yaml, v1): unknown keys are refused, as the API server's structural schema
#: prunes or refuses them.
_DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
_LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": "array"},
    },
}
PODMONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PodMonitor"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["selector"],
            "additionalProperties": False,
            "properties": {
                "selector": _LABEL_SELECTOR,
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"any": {"type": "boolean"},
                                   "matchNames": {"type": "array", "items": {"type": "string"}}},
                },
                "jobLabel": {"type": "string"},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "sampleLimit": {"type": "integer", "minimum": 0},
                "podMetricsEndpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "portNumber": {"type": "integer", "minimum": 1, "maximum": 65535},
                            "path": {"type": "string"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": _DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": _DURATION},
                            "honorLabels": {"type": "boolean"},
                            "honorTimestamps": {"type": "boolean"},
                            "relabelings": {"type": "array"},
                            "metricRelabelings": {"type": "array"},
                        },
                    },
                },
            },
        },
    },
}


#: The PrometheusRule fields (monitoring.coreos.com_prometheusrules.yaml, v1): spec.groups[] of name, interval and
#: rules[] (alert or record, expr, for, keep_firing_for, labels, annotations); unknown keys refused.
PROMETHEUSRULE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": _DURATION},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": {"type": "string", "pattern": _DURATION},
                                        "keep_firing_for": {"type": "string", "pattern": _DURATION},
                                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                        "annotations": {"type": "object",
                                                        "additionalProperties": {"type": "string"}},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_prometheusrule_is_alerts_yml_and_valid() -> None:
    """The monitoring overlay ships llmload's alerts as a PrometheusRule equal to prometheus/alerts.yml (the copy is
    generated by scripts/k8s_prometheusrule.py; the rules themselves are tested by promtool in tests/test_alerts.py)."""
    rules = of_kind(render("overlays/monitoring"), "PrometheusRule")
    assert len(rules) == 1
    jsonschema.validate(rules[0], PROMETHEUSRULE_SCHEMA)
    assert rules[0]["metadata"].get("namespace") == NAMESPACE
    original = yaml.safe_load((ROOT / "prometheus" / "alerts.yml").read_text())["groups"]
    assert rules[0]["spec"]["groups"] == original, (
        "deploy/kubernetes/components/monitoring/prometheusrule.yaml drifted from prometheus/alerts.yml: "
        ".venv/bin/python scripts/k8s_prometheusrule.py")
    assert {r["alert"] for g in original for r in g["rules"]} >= {"LlmloadThroughputDrift", "LlmloadWorkerLost"}


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)(ms|y|w|d|h|m|s)", duration))


def test_podmonitor_matches_the_crd_fields_and_selects_the_masters_exporter() -> None:
    objs = render("overlays/monitoring")
    monitors = of_kind(objs, "PodMonitor")
    assert len(monitors) == 1
    pm = monitors[0]
    jsonschema.validate(pm, PODMONITOR_SCHEMA)
    assert pm["metadata"].get("namespace") == NAMESPACE
    selector = pm["spec"]["selector"]["matchLabels"]
    for name in ("overlays/monitoring", "overlays/soak-job"):  # the web-UI master and the Job's master
        masters = [(meta, spec) for _n, meta, spec in pod_specs(render(name))
                   if selector.items() <= meta["labels"].items()]
        assert len(masters) == 1, f"{name}: the PodMonitor selects {len(masters)} pod templates, not the master's"
        meta, spec = masters[0]
        (c,) = spec["containers"]
        assert role(c) == "master"
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        for ep in pm["spec"]["podMetricsEndpoints"]:
            assert ports[ep["port"]] == DEFAULT_PORT
            assert ep["path"] == meta["annotations"]["prometheus.io/path"] == "/metrics"
            assert _seconds(ep["scrapeTimeout"]) <= _seconds(ep["interval"])
    # the interval the dashboard's rates assume: prometheus/prometheus.yml's scrape_interval
    interval = yaml.safe_load((ROOT / "prometheus" / "prometheus.yml").read_text())["global"]["scrape_interval"]
    assert all(ep["interval"] == interval for ep in pm["spec"]["podMetricsEndpoints"])


@pytest.mark.parametrize("name", ALL)
def test_every_container_has_resources_pinned_image_and_a_locked_down_context(name: str) -> None:
    objs = objects(name)
    runs_as = int(dict(dockerfile())["USER"].split(":")[0])
    assert runs_as != 0
    assert containers(objs)
    for workload, spec, c in containers(objs):
        where = f"{name}: {workload}/{c['name']}"
        for kind in ("requests", "limits"):
            assert set(c.get("resources", {}).get(kind, {})) >= {"cpu", "memory"}, f"{where}: resources.{kind}"
        image = c["image"]
        assert image == f"llmload:{project_version()}", f"{where}: image {image} is not this version's llmload"
        psc, csc = spec["securityContext"], c["securityContext"]
        assert psc["runAsNonRoot"] is True and psc["runAsUser"] == runs_as, where
        assert psc["seccompProfile"]["type"] == "RuntimeDefault", where
        assert csc == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                       "capabilities": {"drop": ["ALL"]}}, where
        if c["image"].startswith("llmload:") and c.get("command") is None:  # the locust entrypoint
            mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
            assert "/tmp" in mounts, f"{where}: read-only root: HOME and MPLCONFIGDIR (Dockerfile) need /tmp"


@pytest.mark.parametrize("name", ALL)
def test_probes_cover_every_port_and_point_at_declared_ports(name: str) -> None:
    objs = objects(name)
    deployments = {o["metadata"]["name"] for o in of_kind(objs, "Deployment")}
    for workload, _spec, c in containers(objs):
        where = f"{name}: {workload}/{c['name']}"
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        if not ports:
            # only a worker has no port: Locust's worker quits by itself when its master is silent this long,
            # and the kubelet restarts it (worker.yaml)
            from locust.runners import MASTER_HEARTBEAT_TIMEOUT

            assert role(c) == "worker" or c.get("command", [None])[0] == "sleep", f"{where}: no port, no probe"
            assert 0 < MASTER_HEARTBEAT_TIMEOUT <= 120
            continue
        assert "readinessProbe" in c, f"{where}: no readinessProbe"
        if workload in deployments:
            assert "livenessProbe" in c, f"{where}: a Deployment's container without livenessProbe"
        for kind in ("readinessProbe", "livenessProbe"):
            if kind in c:
                port = c[kind]["httpGet"]["port"]
                assert port in ports, f"{where}: {kind} on port {port}, not a declared port {sorted(ports)}"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_ports_are_llmloads_and_locusts_defaults(name: str) -> None:
    """Container ports, Service ports, annotations and arguments all equal the defaults in the code."""
    defaults = locust_defaults()
    expected = {"master": defaults["master_bind_port"], "web": defaults["web_port"], "metrics": DEFAULT_PORT}
    objs = render(name)
    for workload, meta, spec in pod_specs(objs):
        (c,) = spec["containers"]
        for p in c.get("ports", []):
            assert p["containerPort"] == expected[p["name"]], f"{name}: {workload} port {p['name']}"
        if role(c) == "master":
            assert arg(c, "--metrics-port") == str(DEFAULT_PORT)
            assert arg(c, "--metrics-addr") == "0.0.0.0", "the exporter binds 127.0.0.1 by default"
            assert meta["annotations"]["prometheus.io/scrape"] == "true"
            assert meta["annotations"]["prometheus.io/port"] == str(DEFAULT_PORT)
            web = "--headless" not in c["args"]
            assert ("web" in {p["name"] for p in c["ports"]}) == web, f"{name}: web port iff the web UI runs"
        if role(c) == "worker":
            assert arg(c, "--master-port") == str(defaults["master_bind_port"])
    svc = one(objs, "Service", "llmload-master")
    for p in svc["spec"]["ports"]:
        assert p["port"] == expected[p["name"]] and p["targetPort"] == p["name"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_services_select_pods_that_declare_their_ports(name: str) -> None:
    objs = render(name)
    templates = pod_specs(objs)
    for svc in of_kind(objs, "Service"):
        sel = svc["spec"]["selector"]
        chosen = [(n, spec) for n, meta, spec in templates if sel.items() <= meta["labels"].items()]
        assert chosen, f"{name}: Service {svc['metadata']['name']} selects no pod"
        for n, spec in chosen:
            declared = {p["name"] for c in spec["containers"] for p in c.get("ports", [])}
            for p in svc["spec"]["ports"]:
                if p["targetPort"] == "web" and any("--headless" in c["args"] for c in spec["containers"]):
                    continue  # a headless master has no web UI
                assert p["targetPort"] in declared, f"{name}: Service port {p['name']} -> {n} has no such port"
    for d in of_kind(objs, "Deployment"):
        sel = d["spec"]["selector"]["matchLabels"]
        assert sel.items() <= d["spec"]["template"]["metadata"]["labels"].items(), d["metadata"]["name"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_workers_reach_the_master_service(name: str) -> None:
    objs = render(name)
    services = {s["metadata"]["name"]: s for s in of_kind(objs, "Service")}
    roles: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {"master": [], "worker": []}
    for _n, meta, spec in pod_specs(objs):
        (c,) = spec["containers"]
        roles[str(role(c))].append((meta, c))
    assert len(roles["master"]) == 1 and len(roles["worker"]) == 1, name
    master_labels = roles["master"][0][0]["labels"]
    for _meta, c in roles["worker"]:
        host = arg(c, "--master-host")
        assert host in services, f"{name}: --master-host {host} is not a Service ({sorted(services)})"
        svc = services[host]
        assert svc["spec"]["selector"].items() <= master_labels.items(), f"{name}: {host} does not select the master"
        port = {p["name"]: p["port"] for p in svc["spec"]["ports"]}["master"]
        assert arg(c, "--master-port") == str(port)


def test_worker_count_is_consistent() -> None:
    base = render("base")
    kust = yaml.safe_load((KDIR / "base" / "kustomization.yaml").read_text())
    (count,) = [r["count"] for r in kust["replicas"] if r["name"] == "llmload-worker"]
    assert one(base, "Deployment", "llmload-worker")["spec"]["replicas"] == count >= 1
    assert one(base, "Deployment", "llmload-master")["spec"]["replicas"] == 1  # Locust has one master
    assert one(base, "Deployment", "llmload-master")["spec"]["strategy"]["type"] == "Recreate"  # RWO volume
    soak = render("overlays/soak-job")
    assert not of_kind(soak, "Deployment"), "the soak Job replaces the base's Deployments"
    workers = one(soak, "Job", "llmload-soak-worker")["spec"]
    master = one(soak, "Job", "llmload-soak-master")["spec"]["template"]["spec"]["containers"][0]
    assert "--headless" in master["args"]
    assert arg(master, "--expect-workers") == str(workers["parallelism"]) == str(workers["completions"])


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_profile_secret_and_volume_wiring(name: str) -> None:
    """The master reads the profile from the generated ConfigMap, writes runs where the claim is mounted, and the
    API key variable of the Secret is the one the profile's target.api_key_env names."""
    objs = render(name)
    configmaps = {o["metadata"]["name"]: o for o in of_kind(objs, "ConfigMap")}
    claims = {o["metadata"]["name"] for o in of_kind(objs, "PersistentVolumeClaim")}
    for workload, _meta, spec in pod_specs(objs):
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        (c,) = spec["containers"]
        mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
        assert set(mounts) <= set(volumes), f"{name}: {workload} mounts an undeclared volume"
        for v in volumes.values():
            if "configMap" in v:
                assert v["configMap"]["name"] in configmaps, f"{name}: {workload}: no ConfigMap {v['configMap']}"
            if "persistentVolumeClaim" in v:
                assert v["persistentVolumeClaim"]["claimName"] in claims
        if role(c) != "master":
            continue
        path = Path(arg(c, "--profile") or "")
        (vol,) = [n for n, m in mounts.items() if m == str(path.parent)]
        cm = configmaps[volumes[vol]["configMap"]["name"]]
        profile_text = cm["data"][path.name]
        out_mount = [n for n, m in mounts.items() if m == arg(c, "--output-dir")]
        assert len(out_mount) == 1 and "persistentVolumeClaim" in volumes[out_mount[0]]
        assert yaml.safe_load(profile_text)["output"]["dir"] == arg(c, "--output-dir")
        key_env = yaml.safe_load(profile_text)["target"]["api_key_env"]
        for _w, _s, cc in containers(objs):
            env = {e["name"]: e for e in cc.get("env", [])}
            if role(cc) is not None:
                ref = env[key_env]["valueFrom"]["secretKeyRef"]
                assert ref["key"] == key_env and ref["name"] == "llmload-api-key"
    dash = configmaps["llmload-dashboard"]
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    original = json.loads((ROOT / "grafana/dashboards/llmload.json").read_text())
    assert json.loads(dash["data"]["llmload.json"]) == original


@pytest.mark.parametrize("name", ALL)
def test_every_namespaced_object_is_in_the_llmload_namespace(name: str) -> None:
    for o in objects(name):
        if o["kind"] != "Namespace":
            assert o["metadata"].get("namespace") == NAMESPACE, f"{name}: {o['kind']} {o['metadata']['name']}"


@pytest.mark.parametrize("copy", sorted(PROFILE_COPIES))
def test_profile_copies_are_the_originals_but_for_the_target_and_output_dir(copy: str) -> None:
    original, changed = PROFILE_COPIES[copy]
    a = yaml.safe_load((ROOT / original).read_text())
    b = yaml.safe_load((KDIR / copy).read_text())
    for section, key in changed:
        assert b[section].get(key) != a[section].get(key), f"{copy}: {section}.{key} is not set"
        if key in a[section]:
            b[section][key] = a[section][key]
        else:
            del b[section][key]
    assert a == b, f"{copy} drifted from {original}: copy it again and set {changed}"
    profile = load_profile(KDIR / copy)  # llmload accepts it
    assert profile.target.base_url is not None and profile.target.base_url.startswith("http://")


@pytest.mark.parametrize("copy", sorted(DASHBOARD_COPIES))
def test_dashboard_copies_equal_the_original(copy: str) -> None:
    assert (KDIR / copy).read_bytes() == (ROOT / DASHBOARD_COPIES[copy]).read_bytes(), (
        f"{copy} drifted: cp {DASHBOARD_COPIES[copy]} deploy/kubernetes/{copy}")


def test_dockerfile_copies_what_exists_and_runs_locust_as_non_root() -> None:
    instrs = dockerfile()
    assert instrs[0] == ("FROM", "python:3.11-slim")
    workdir = dict(instrs)["WORKDIR"]
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    included = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert ignore[0] == "*", ".dockerignore: everything excluded but what is listed"
    copied: set[str] = set()
    for instr, rest in instrs:
        if instr == "COPY":
            *sources, _dest = rest.split()
            for s in sources:
                assert (ROOT / s).exists(), f"Dockerfile: COPY {s}: no such file"
                assert s.rstrip("/") in included, f"Dockerfile: COPY {s} is excluded by .dockerignore"
                copied.add(s.rstrip("/"))
    assert copied == included
    user = dict(instrs)["USER"]
    assert user.split(":")[0].isdigit() and int(user.split(":")[0]) != 0
    assert json.loads(dict(instrs)["ENTRYPOINT"]) == ["locust"]
    run = dict(instrs)["RUN"]
    assert "pip install -e ." in run, "editable: profiles/ is found beside the package (harness.config.PROFILES_DIR)"
    env = dict(kv.split("=", 1) for kv in shlex.split(dict(instrs)["ENV"]))
    assert env["HOME"].startswith("/tmp") and env["MPLCONFIGDIR"].startswith("/tmp")
    # every path the manifests run is in the image: the locustfile under WORKDIR
    for name in KUSTOMIZATIONS:
        for _w, _s, c in containers(render(name)):
            locustfile = Path(arg(c, "-f") or "")
            assert locustfile.is_relative_to(workdir)
            assert (ROOT / locustfile.relative_to(workdir)).is_file(), f"{name}: -f {locustfile}"


def test_the_images_layout_runs_locust_and_finds_its_profiles(tmp_path: Path) -> None:
    """The image without building it: the Dockerfile's COPY sources laid out under a stand-in for its WORKDIR
    (what ``pip install -e .`` there imports: the package from that directory) run the entrypoint,
    `locust -f <workdir>/locustfiles/k26.py --help`, which lists every option the manifests pass; the package and
    ``--profile NAME``'s directory resolve inside it; and nothing is written there (the pods' root is read-only)."""
    instrs = dockerfile()
    app = tmp_path / "app"
    app.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for instr, rest in instrs:
        if instr == "COPY":
            *sources, dest = rest.split()
            for s in sources:
                target = app / dest / Path(s).name if dest.endswith("/") else app / dest
                if (ROOT / s).is_dir():
                    shutil.copytree(ROOT / s, target, ignore=ignore)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / s, target)
    before = sorted(p.relative_to(app) for p in app.rglob("*"))
    env = {**os.environ, "PYTHONPATH": str(app), "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(tmp_path),
           "MPLCONFIGDIR": str(tmp_path / "matplotlib")}
    where = subprocess.run(
        [sys.executable, "-c", "import harness, harness.config as c; print(harness.__file__); print(c.PROFILES_DIR)"],
        cwd=app, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    package, profiles = (Path(x) for x in where.stdout.split())
    assert package.is_relative_to(app) and (profiles / "k26.yaml").is_file() and profiles.is_relative_to(app)
    workdir = dict(instrs)["WORKDIR"]
    locustfile = app / Path(arg(containers(render("base"))[0][2], "-f") or "").relative_to(workdir)
    out = subprocess.run([sys.executable, "-m", "locust", "-f", str(locustfile), "--help"], cwd=app, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    flags = {a for name in KUSTOMIZATIONS for _w, _s, c in containers(render(name)) for a in c["args"]
             if a.startswith("--")}
    assert flags >= {"--master", "--worker", "--metrics-addr", "--profile"}
    for flag in sorted(flags):
        assert re.search(rf"^\s+{re.escape(flag)}\b", out.stdout, re.M), f"locust --help lacks {flag}"
    assert sorted(p.relative_to(app) for p in app.rglob("*")) == before, "written under the image's WORKDIR"
