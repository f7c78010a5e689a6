"""Validates the custom resources in rendered manifests that kubernetes-validate has no schema
for (it knows only the core Kubernetes API). Run by tests/deploy_manifests.rs with the test
virtualenv's Python:

    python check_crds.py rendered.yaml [more.yaml ...]

- ServiceMonitor, PrometheusRule (monitoring.coreos.com/v1): parsed with the models generated
  from the Prometheus Operator CRDs (PyPI cloudcoil-models-prometheus-operator): types and
  required fields; a field the models do not know (a misspelt key, which the models would drop
  silently) is reported too.
- RayCluster (ray.io/v1): no installable schema, so checked structurally here: the known
  top-level fields of the KubeRay v1 CRD, string-valued rayStartParams, replica bounds, and
  every pod template validated against the core PodTemplateSpec schema by kubernetes-validate.
Any other kind without a core schema fails: add a check for it here.

Prints one line per resource and exits 1 on the first problem set.
"""

import sys

import kubernetes_validate
import yaml

K8S_VERSION = "1.37.0"
CORE_GROUPS = {"v1", "apps/v1", "policy/v1", "autoscaling/v2", "networking.k8s.io/v1"}


def unknown_keys(given, dumped, path=""):
    """Keys present in `given` but absent from the model's dump of it."""
    out = []
    if isinstance(given, dict) and isinstance(dumped, dict):
        for k, v in given.items():
            if k not in dumped:
                out.append(f"{path}.{k}" if path else k)
            else:
                out.extend(unknown_keys(v, dumped[k], f"{path}.{k}" if path else k))
    elif isinstance(given, list) and isinstance(dumped, list):
        for i, (a, b) in enumerate(zip(given, dumped)):
            out.extend(unknown_keys(a, b, f"{path}[{i}]"))
    return out


def check_prometheus_operator(doc):
    from cloudcoil.models.prometheus_operator import v1

    model = {"ServiceMonitor": v1.ServiceMonitor, "PrometheusRule": v1.PrometheusRule}[doc["kind"]]
    parsed = model.model_validate(doc)
    dumped = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
    extra = unknown_keys(doc, dumped)
    if extra:
        raise ValueError(f"fields unknown to the {doc['kind']} CRD: {', '.join(extra)}")
    return "Prometheus Operator CRD models (cloudcoil-models-prometheus-operator)"


RAY_SPEC = {
    "rayVersion", "enableInTreeAutoscaling", "autoscalerOptions", "headGroupSpec",
    "workerGroupSpecs", "headServiceAnnotations", "suspend", "managedBy", "gcsFaultToleranceOptions",
}
RAY_HEAD = {"rayStartParams", "template", "serviceType", "headService", "enableIngress"}
RAY_WORKER = {
    "groupName", "replicas", "minReplicas", "maxReplicas", "rayStartParams", "template",
    "scaleStrategy", "suspend", "idleTimeoutSeconds", "numOfHosts",
}


def check_pod_template(template, where):
    if not template.get("spec", {}).get("containers"):
        raise ValueError(f"{where}: template.spec.containers is empty")
    pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": template}
    try:
        kubernetes_validate.validate(pod_template, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        raise ValueError(f"{where}: {'.'.join(map(str, e.path))}: {e.message}") from None


def check_ray_params(params, where):
    bad = {k: v for k, v in (params or {}).items() if not isinstance(v, str)}
    if bad:
        raise ValueError(f"{where}.rayStartParams values must be strings: {bad}")


def check_raycluster(doc):
    if doc["apiVersion"] != "ray.io/v1":
        raise ValueError(f"apiVersion {doc['apiVersion']}: use ray.io/v1")
    spec = doc.get("spec") or {}
    if set(spec) - RAY_SPEC:
        raise ValueError(f"unknown spec fields: {sorted(set(spec) - RAY_SPEC)}")
    head = spec.get("headGroupSpec")
    if not head:
        raise ValueError("spec.headGroupSpec is required")
    if set(head) - RAY_HEAD:
        raise ValueError(f"unknown headGroupSpec fields: {sorted(set(head) - RAY_HEAD)}")
    check_ray_params(head.get("rayStartParams"), "headGroupSpec")
    check_pod_template(head.get("template", {}), "headGroupSpec.template")
    names = set()
    for i, group in enumerate(spec.get("workerGroupSpecs") or []):
        where = f"workerGroupSpecs[{i}]"
        if set(group) - RAY_WORKER:
            raise ValueError(f"unknown {where} fields: {sorted(set(group) - RAY_WORKER)}")
        name = group.get("groupName")
        if not name or name in names:
            raise ValueError(f"{where}.groupName missing or repeated")
        names.add(name)
        lo, n, hi = group.get("minReplicas", 0), group.get("replicas", 0), group.get("maxReplicas", 2**31 - 1)
        if not all(isinstance(x, int) for x in (lo, n, hi)) or not lo <= n <= hi:
            raise ValueError(f"{where}: need minReplicas <= replicas <= maxReplicas, got {lo}, {n}, {hi}")
        check_ray_params(group.get("rayStartParams"), where)
        check_pod_template(group.get("template", {}), f"{where}.template")
    return "structural KubeRay v1 check + core PodTemplateSpec schema (no installable RayCluster schema)"


CHECKS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): check_prometheus_operator,
    ("monitoring.coreos.com/v1", "PrometheusRule"): check_prometheus_operator,
    ("ray.io/v1", "RayCluster"): check_raycluster,
}


def main(paths):
    failed = False
    for path in paths:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            key = (doc.get("apiVersion"), doc.get("kind"))
            name = f"{path}: {key[1]}/{doc.get('metadata', {}).get('name')}"
            if key[0] in CORE_GROUPS:
                continue
            check = CHECKS.get(key)
            if check is None:
                print(f"FAIL {name}: no check for {key[0]} {key[1]} (add one to {__file__})")
                failed = True
                continue
            try:
                how = check(doc)
                print(f"OK   {name}: {how}")
            except Exception as e:  # noqa: BLE001 - every failure is reported the same way
                print(f"FAIL {name}: {e}")
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
