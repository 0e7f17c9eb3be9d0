"""End to end, no cluster: the soak Job's own commands (rendered from deploy/kubernetes/overlays/soak-job) run a
distributed sweep on loopback.

The master's and the workers' container arguments are taken from `kubectl kustomize`'s output and changed only
where a pod differs from this machine: paths inside the image (the locustfile, the ConfigMap's mount, the volume)
become this checkout's and a temporary directory, the master Service's name becomes 127.0.0.1, and the ports are
free ones (``--master-bind-host 127.0.0.1`` and the exporter on 127.0.0.1: tests use loopback only). The profile is
the ConfigMap's, pointed at a simulator and shortened. Asserted: the master exits 0 with its report, each worker
exits 0 on the master's quit (what completes the worker Job), records equal the server's completions, the run
saw both workers, and nothing is written to the working directory (the pods' root filesystem is read-only; HOME
and MPLCONFIGDIR are a temporary directory, as the image's /tmp). Bounded: 8 s steps, every wait has a timeout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from harness.sim import launch
from tests.deploy.test_kubernetes import KDIR, ROOT, arg, one, render, role
from tests.integration.test_prometheus import server_completions
from tests.procs import free_port, process_groups, records

pytestmark = pytest.mark.slow

#: The base's profile (its target is a placeholder: nothing is sent in the web-UI test, no run is started).
KDIR_PROFILE = KDIR / "base" / "profile.yaml"


def _replace(args: list[str], flag: str, value: str) -> list[str]:
    out = list(args)
    out[out.index(flag) + 1] = value
    return out


def test_the_soak_jobs_commands_run_a_distributed_sweep(tmp_path: Path) -> None:
    objs = render("overlays/soak-job")
    master_job = one(objs, "Job", "llmload-soak-master")["spec"]
    worker_job = one(objs, "Job", "llmload-soak-worker")["spec"]
    (mc,) = master_job["template"]["spec"]["containers"]
    (wc,) = worker_job["template"]["spec"]["containers"]
    assert role(mc) == "master" and role(wc) == "worker"
    n_workers = int(arg(mc, "--expect-workers") or 0)
    assert n_workers == worker_job["parallelism"] >= 2

    cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("llmload-profile"))
    profile = yaml.safe_load(cm["data"]["profile.yaml"])
    out, home, cwd = tmp_path / "runs", tmp_path / "home", tmp_path / "cwd"
    for d in (out, home, cwd):
        d.mkdir()
    rpc, metrics = str(free_port()), str(free_port())

    def local(args: list[str]) -> list[str]:
        args = _replace(args, "-f", str(ROOT / "locustfiles" / Path(arg(mc, "-f") or "").name))
        if "--worker" in args:
            return _replace(_replace(args, "--master-host", "127.0.0.1"), "--master-port", rpc)
        args = _replace(args, "--profile", str(tmp_path / "profile.yaml"))
        args = _replace(args, "--output-dir", str(out))
        args = _replace(_replace(args, "--metrics-port", metrics), "--metrics-addr", "127.0.0.1")
        return [*args, "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc]

    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HOME": str(home), "MPLCONFIGDIR": str(home / "matplotlib"),
           "OPENAI_API_KEY": "sk-from-the-secret"}
    cmd = [sys.executable, "-m", "locust"]
    with launch(preset="demo", time_scale=1.0, seed=11) as sim:
        profile["target"]["base_url"] = sim.url
        profile["prompts"] = [{**p, "max_tokens": 200} for p in profile["prompts"]]
        profile["steps"] = {"concurrency": [4], "duration": 8, "drain_timeout": 30}
        profile["output"]["dir"] = str(out)
        (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
        logs = [tmp_path / f"proc{i}.log" for i in range(1 + n_workers)]
        argv = [local(mc["args"])] + [local(wc["args"])] * n_workers
        with process_groups([[*cmd, *a] for a in argv], logs, cwd, env, stdout_to_log=True) as procs:
            deadline = time.monotonic() + 240
            codes = [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in procs]
        served = server_completions(sim)
    log_text = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)
    assert codes == [0] * (1 + n_workers), f"exit codes {codes}\n{log_text}"
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    assert len(meta["workers"]) == n_workers, meta.get("workers")
    recs = records(run)
    print(f"{len(recs)} records, server finished {served}, workers {meta['workers']}")
    assert len(recs) == served > 0, log_text
    assert all(r["ok"] for r in recs), [r for r in recs if not r["ok"]][:3]
    rep = json.loads((run / "report.json").read_text())
    assert [r["label"] for r in rep["steps"] if r["label"].startswith("C=")] == ["C=4"]
    assert (run / "report.md").is_file() and (run / "report.html").is_file()
    assert list(cwd.iterdir()) == [], "written outside the volume and HOME: a read-only root would refuse it"


def _probe_url(c: dict[str, object], kind: str, ports: dict[str, str]) -> str:
    get = c[kind]["httpGet"]  # type: ignore[index]
    return f"http://127.0.0.1:{ports[get['port']]}{get['path']}"


def test_the_base_masters_probes_answer_and_its_workers_join(tmp_path: Path) -> None:
    """The base's web-UI master and workers, their rendered commands on loopback: the master's readiness and
    liveness probe URLs answer 200 before any run (the exporter serves from the start), both workers join it, and
    SIGTERM (a pod's deletion) ends the master with exit 0, its workers with it."""
    objs = render("base")
    master = one(objs, "Deployment", "llmload-master")["spec"]["template"]["spec"]["containers"][0]
    worker_d = one(objs, "Deployment", "llmload-worker")["spec"]
    (wc,) = worker_d["template"]["spec"]["containers"]
    n_workers = worker_d["replicas"]
    rpc, metrics, web = str(free_port()), str(free_port()), str(free_port())
    local_ports = {"master": rpc, "metrics": metrics, "web": web}
    home, cwd, out = tmp_path / "home", tmp_path / "cwd", tmp_path / "runs"
    for d in (home, cwd, out):
        d.mkdir()
    m_args = _replace(master["args"], "-f", str(ROOT / "locustfiles" / "k26.py"))
    profile = yaml.safe_load(KDIR_PROFILE.read_text())
    m_args = _replace(m_args, "--profile", str(tmp_path / "profile.yaml"))
    m_args = _replace(_replace(m_args, "--output-dir", str(out)), "--metrics-port", metrics)
    m_args = [*_replace(m_args, "--metrics-addr", "127.0.0.1"), "--web-host", "127.0.0.1", "--web-port", web,
              "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc]
    w_args = _replace(_replace(wc["args"], "-f", str(ROOT / "locustfiles" / "k26.py")), "--master-host", "127.0.0.1")
    w_args = _replace(w_args, "--master-port", rpc)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HOME": str(home), "MPLCONFIGDIR": str(home / "matplotlib")}
    logs = [tmp_path / f"proc{i}.log" for i in range(1 + n_workers)]
    with launch(preset="demo", time_scale=1.0, seed=5) as sim:  # the master checks the target at launch
        profile["target"]["base_url"] = sim.url
        (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
        codes, answers, joined = _start_web_master(m_args, w_args, n_workers, master, local_ports, cwd, env, logs)
    log_text = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)
    print(f"probes {answers}, {joined} workers joined, exit codes {codes}")
    assert answers == {"readinessProbe": 200, "livenessProbe": 200}, log_text
    assert joined == n_workers, log_text
    assert codes[0] == 0, log_text
    assert all(c == 0 for c in codes[1:]), log_text
    assert list(cwd.iterdir()) == []


def _start_web_master(m_args: list[str], w_args: list[str], n_workers: int, master: dict[str, object],
                      local_ports: dict[str, str], cwd: Path, env: dict[str, str],
                      logs: list[Path]) -> tuple[list[int], dict[str, int], int]:
    """Start the master and the workers; poll the probe URLs and the worker count (90 s at most); SIGTERM the
    master; return every exit code, the probes' HTTP statuses and the number of workers that joined."""
    web = local_ports["web"]
    with process_groups([[sys.executable, "-m", "locust", *a] for a in [m_args] + [w_args] * n_workers], logs, cwd,
                        env, stdout_to_log=True) as procs:
        deadline = time.monotonic() + 90
        answers: dict[str, int] = {}
        joined = 0
        while time.monotonic() < deadline and (len(answers) < 2 or joined < n_workers):
            assert procs[0].poll() is None, logs[0].read_text()[-3000:]
            time.sleep(0.5)
            for kind in ("readinessProbe", "livenessProbe"):
                try:
                    with urllib.request.urlopen(_probe_url(master, kind, local_ports), timeout=5) as r:
                        answers[kind] = r.status
                except OSError:
                    pass
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{web}/worker-count", timeout=5) as r:
                    joined = int(json.loads(r.read()).get("worker_count", 0))
            except OSError:
                pass
        procs[0].send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=60) for p in procs]
    return codes, answers, joined
