"""Offline checks of the files in deploy/ that a schema cannot make.

Run by scripts/test-deploy.sh from the repository root, in the venv it
installs kubernetes-validate (with its schemas: no network) and PyYAML into:

    target/venv/bin/python deploy/tests/check.py

Each check prints `ok - NAME` or `FAIL - NAME` with the reasons; the last
line is `deploy: N passed, M failed`, and the exit status is 1 when any
failed.
"""

import json
import re
import sys
import tomllib
from pathlib import Path

import yaml
from kubernetes_validate import utils as kv

K8S = Path("deploy/k8s")
COMPOSE = Path("deploy/compose/compose.yaml")
DASHBOARD = Path("deploy/grafana/lockd.json")
METRICS = Path("deploy/grafana/metrics.txt")
UNIT = Path("deploy/systemd/lockd.service")
UNIT_CONFIG = Path("deploy/systemd/lockd.toml")
CONFIG_RS = Path("host/src/config/settings.rs")
# The oldest Kubernetes the StatefulSet works on (the pod-index label and
# start ordinals are on by default from 1.28), and the newest with schemas.
K8S_VERSIONS = ("1.28.0", kv.latest_version())

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def flag(args, name):
    """The value after `name` in an argument list, or None."""
    for i, a in enumerate(args):
        if a == name:
            return args[i + 1] if i + 1 < len(args) else None
    return None


def members(spec):
    """`1=a:7400,2=b:7400` as {1: "a:7400", 2: "b:7400"}."""
    out = {}
    for part in spec.split(","):
        ident, _, addr = part.partition("=")
        out[int(ident)] = addr
    return out


# --- Kubernetes -----------------------------------------------------------

def k8s_docs():
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path, doc))
    return docs


@check
def k8s_schemas():
    errs = []
    docs = k8s_docs()
    if not docs:
        return [f"no manifests in {K8S}"]
    for path, doc in docs:
        for version in K8S_VERSIONS:
            try:
                kv.validate(doc, version, strict=True)
            except (kv.ValidationError, kv.SchemaNotFoundError) as e:
                where = "/".join(str(p) for p in getattr(e, "path", []))
                errs.append(f"{path} {doc.get('kind')}/{doc.get('metadata', {}).get('name')} "
                            f"against {version}: {getattr(e, 'message', e)}" + (f" (at {where})" if where else ""))
    return errs


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@check
def k8s_statefulset():
    errs = []
    docs = k8s_docs()
    sets = [d for _, d in docs if d["kind"] == "StatefulSet"]
    if len(sets) != 1:
        return [f"expected one StatefulSet in {K8S}, found {len(sets)}"]
    ss = sets[0]
    spec = ss["spec"]
    pod = spec["template"]
    labels = pod["metadata"]["labels"]
    replicas = spec.get("replicas")
    if replicas != 3:
        errs.append(f"replicas is {replicas}, expected 3")
    if not selects(spec["selector"]["matchLabels"], labels):
        errs.append("the selector does not match the pod template's labels")
    if spec.get("podManagementPolicy") != "Parallel":
        errs.append("podManagementPolicy must be Parallel: a node is ready only once a leader exists")
    start = spec.get("ordinals", {}).get("start", 0)
    if start != 1:
        errs.append(f"ordinals.start is {start}: the node id is the ordinal, and ids start at 1")
    c = pod["spec"]["containers"][0]
    args = c["args"]
    env = {e["name"]: e for e in c.get("env", [])}
    if flag(args, "--id") != "$(POD_INDEX)":
        errs.append(f"--id is {flag(args, '--id')!r}, expected $(POD_INDEX)")
    index_ref = env.get("POD_INDEX", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    if index_ref != "metadata.labels['apps.kubernetes.io/pod-index']":
        errs.append(f"POD_INDEX comes from {index_ref!r}, not the pod-index label")
    # $(VAR) in args must name a variable of the container.
    for a in args:
        for var in re.findall(r"\$\((\w+)\)", a):
            if var not in env:
                errs.append(f"argument {a!r} uses $({var}), which the container's env does not define")
    if flag(args, "--listen") != "0.0.0.0:7400":
        errs.append("--listen must be 0.0.0.0:7400")
    service = spec["serviceName"]
    adv = flag(args, "--advertise-addr")
    if adv != f"$(POD_NAME).{service}.$(NAMESPACE).svc:7400":
        errs.append(f"--advertise-addr {adv!r} is not the pod's name under {service}")
    cluster = members(flag(args, "--initial-cluster") or "")
    expected = {i: f"{ss['metadata']['name']}-{i}.{service}.$(NAMESPACE).svc:7400"
                for i in range(start, start + (replicas or 0))}
    if cluster != expected:
        errs.append(f"--initial-cluster {cluster} is not the pods {expected}")
    for f in ("--tls-cert", "--tls-key", "--tls-ca", "--auth-file"):
        if not flag(args, f):
            errs.append(f"{f} missing: a node on a pod address needs TLS and an auth file")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = c.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("scheme") != "HTTPS" or get.get("port") not in ports:
            errs.append(f"{probe} must GET {path} over HTTPS on a named container port, is {get}")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    claims = [t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])]
    if mounts.get("data") != "/data" or "data" not in claims or flag(args, "--data-dir") != "/data":
        errs.append("the data volume claim must be mounted at /data, the --data-dir")
    volumes = {v["name"] for v in pod["spec"].get("volumes", [])} | set(claims)
    for m in mounts:
        if m not in volumes:
            errs.append(f"volumeMount {m} names no volume")
    for f in ("--tls-cert", "--tls-key", "--tls-ca", "--auth-file"):
        path = flag(args, f) or ""
        if not any(path.startswith(p.rstrip("/") + "/") for p in mounts.values()):
            errs.append(f"{f} {path} is under no mounted volume")
    sc = {**pod["spec"].get("securityContext", {}), **c.get("securityContext", {})}
    if sc.get("runAsUser") != 10001 or not sc.get("runAsNonRoot") or not sc.get("readOnlyRootFilesystem"):
        errs.append("the container must run as uid 10001, non-root, on a read-only root file system")
    return errs


@check
def k8s_services_and_budget():
    errs = []
    docs = [d for _, d in k8s_docs()]
    ss = next(d for d in docs if d["kind"] == "StatefulSet")
    labels = ss["spec"]["template"]["metadata"]["labels"]
    port_names = {p["name"] for p in ss["spec"]["template"]["spec"]["containers"][0]["ports"]}
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    peers = services.get(ss["spec"]["serviceName"])
    if peers is None:
        errs.append(f"no Service {ss['spec']['serviceName']} (the StatefulSet's serviceName)")
    else:
        if peers["spec"].get("clusterIP") != "None":
            errs.append("the StatefulSet's Service must be headless (clusterIP: None)")
        if not peers["spec"].get("publishNotReadyAddresses"):
            errs.append("the headless Service must publish not-ready pods: peers must find each other before a leader exists")
    clients = [s for n, s in services.items() if s["spec"].get("clusterIP") != "None"]
    if len(clients) != 1:
        errs.append(f"expected one client Service, found {len(clients)}")
    for name, s in services.items():
        if not selects(s["spec"].get("selector"), labels):
            errs.append(f"Service {name} does not select the lockd pods")
        for p in s["spec"]["ports"]:
            if p.get("targetPort") not in port_names | {7400}:
                errs.append(f"Service {name} targets port {p.get('targetPort')}, not a container port")
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    if len(pdbs) != 1:
        errs.append(f"expected one PodDisruptionBudget, found {len(pdbs)}")
    else:
        pdb = pdbs[0]["spec"]
        if pdb.get("minAvailable") != 2:
            errs.append(f"PodDisruptionBudget minAvailable is {pdb.get('minAvailable')}, expected 2")
        if not selects(pdb["selector"]["matchLabels"], labels):
            errs.append("the PodDisruptionBudget does not select the lockd pods")
    return errs


# --- Compose --------------------------------------------------------------

@check
def compose_cluster():
    errs = []
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    nodes = {n: s for n, s in services.items() if s.get("command", [None])[0] == "serve"}
    if sorted(nodes) != ["node1", "node2", "node3"]:
        return [f"expected services node1..node3 running `lockd serve`, found {sorted(nodes)}"]
    clusters = set()
    ids = set()
    for name, s in nodes.items():
        cmd = s["command"]
        ident = flag(cmd, "--id")
        ids.add(ident)
        if name != f"node{ident}":
            errs.append(f"{name} has --id {ident}")
        if flag(cmd, "--listen") != "0.0.0.0:7400":
            errs.append(f"{name}: --listen must be 0.0.0.0:7400")
        if flag(cmd, "--advertise-addr") != f"{name}:7400":
            errs.append(f"{name}: --advertise-addr must be {name}:7400")
        clusters.add(flag(cmd, "--initial-cluster"))
        mounts = {}
        for v in s.get("volumes", []):
            # SOURCE:TARGET[:ro]; SOURCE may hold ${VAR:-default}.
            source, _, target = v.removesuffix(":ro").rpartition(":")
            mounts[target] = source
        if mounts.get(flag(cmd, "--data-dir")) not in doc.get("volumes", {}):
            errs.append(f"{name}: --data-dir is not a named volume")
        for f in ("--tls-cert", "--tls-key", "--tls-ca", "--auth-file"):
            path = flag(cmd, f)
            if path is None:
                errs.append(f"{name}: {f} missing")
            elif path not in mounts:
                errs.append(f"{name}: {f} {path} is not mounted")
        key = mounts.get(flag(cmd, "--tls-key"), "")
        if not key.endswith(f"/node-{ident}.key"):
            errs.append(f"{name}: its key is {key}, not node-{ident}.key")
        if not s.get("read_only") or "ALL" not in s.get("cap_drop", []):
            errs.append(f"{name}: read_only and cap_drop ALL expected")
    if len(ids) != 3:
        errs.append(f"node ids are not distinct: {sorted(ids)}")
    if len(clusters) != 1:
        errs.append(f"the nodes disagree on --initial-cluster: {clusters}")
    else:
        listed = members(clusters.pop())
        if listed != {int(flag(s['command'], '--id')): f"{n}:7400" for n, s in nodes.items()}:
            errs.append(f"--initial-cluster {listed} does not list the three nodes")
    return errs


# --- Grafana --------------------------------------------------------------

def metric_list():
    names = {}
    for i, line in enumerate(METRICS.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or parts[1] not in ("counter", "gauge", "histogram"):
            raise ValueError(f"{METRICS}:{i}: expected NAME counter|gauge|histogram, got {line!r}")
        name, kind = parts
        if not re.fullmatch(r"lockd_[a-z0-9_]+", name):
            raise ValueError(f"{METRICS}:{i}: {name!r} is not a lockd_ metric name")
        if name in names:
            raise ValueError(f"{METRICS}:{i}: {name} listed twice")
        if kind == "counter" and not name.endswith("_total"):
            raise ValueError(f"{METRICS}:{i}: counter {name} must be named with its _total")
        names[name] = kind
    return names


def allowed(name, names):
    if name in names:
        return names[name] != "histogram"
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        if base != name and names.get(base) == "histogram":
            return True
    return False


@check
def grafana_dashboard():
    errs = []
    try:
        names = metric_list()
    except ValueError as e:
        return [str(e)]
    text = DASHBOARD.read_text()
    dash = json.loads(text)
    used = set(re.findall(r"\blockd_[a-z0-9_]+", text))
    for name in sorted(used):
        if names.get(name) == "histogram":
            errs.append(f"the dashboard uses histogram {name} bare: query {name}_bucket, _sum or _count")
        elif not allowed(name, names):
            errs.append(f"the dashboard uses {name}, which {METRICS} does not list"
                        + (" as a histogram" if name.endswith(("_bucket", "_sum", "_count")) else ""))
    if not used:
        errs.append("the dashboard uses no lockd metric")
    variables = {v["name"] for v in dash.get("templating", {}).get("list", [])}
    for v in ("datasource", "node"):
        if v not in variables:
            errs.append(f"the dashboard has no ${v} variable")
    ids = set()
    for p in dash["panels"]:
        if p["id"] in ids:
            errs.append(f"panel id {p['id']} is used twice")
        ids.add(p["id"])
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            errs.append(f"panel {p['title']!r} is wider than the grid")
        if p["type"] == "row":
            continue
        if not p.get("targets"):
            errs.append(f"panel {p['title']!r} has no query")
        for t in p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                errs.append(f"panel {p['title']!r}: a query not on the $datasource variable")
            expr = t.get("expr", "")
            if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
                errs.append(f"panel {p['title']!r}: unbalanced brackets in {expr!r}")
            if "lockd_" in expr and 'node=~"$node"' not in expr:
                errs.append(f"panel {p['title']!r}: {expr!r} ignores the $node variable")
    return errs


# --- systemd --------------------------------------------------------------

@check
def systemd_config():
    errs = []
    src = CONFIG_RS.read_text()
    # A setting is a field with a LOCKD_ variable; its TOML key is its name
    # (`config` itself is no key of the file).
    keys = set(re.findall(r'env = "LOCKD_\w+"[^]]*\]\s*pub (\w+):', src)) - {"config"}
    if not keys:
        return [f"no settings found in {CONFIG_RS}"]
    conf = tomllib.loads(UNIT_CONFIG.read_text())
    for k in sorted(set(conf) - keys):
        errs.append(f"{UNIT_CONFIG}: {k} is not a setting of the config file ({CONFIG_RS})")
    for k in ("id", "data_dir", "initial_cluster", "tls_cert", "tls_key", "tls_ca", "auth_file"):
        if k not in conf:
            errs.append(f"{UNIT_CONFIG}: {k} missing")
    unit = UNIT.read_text()
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M)
    if not exec_start or f"--config /etc/lockd/{UNIT_CONFIG.name}" not in exec_start.group(1):
        errs.append(f"{UNIT}: ExecStart does not read /etc/lockd/{UNIT_CONFIG.name}")
    state = re.search(r"^StateDirectory=(\S+)$", unit, re.M)
    if not state or conf.get("data_dir") != f"/var/lib/{state.group(1)}":
        errs.append(f"{UNIT_CONFIG}: data_dir is not the unit's StateDirectory")
    if re.search(r"^MemoryDenyWriteExecute=(yes|true|1)", unit, re.M):
        errs.append(f"{UNIT}: MemoryDenyWriteExecute breaks wasmtime's compiled code")
    return errs


def main():
    failed = 0
    for fn in CHECKS:
        try:
            errs = fn()
        except Exception as e:  # a file that does not have the expected shape
            errs = [f"{type(e).__name__}: {e}"]
        if errs:
            failed += 1
            print(f"FAIL - {fn.__name__}")
            for e in errs:
                print(f"    {e}")
        else:
            print(f"ok - {fn.__name__}")
    print(f"deploy: {len(CHECKS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
