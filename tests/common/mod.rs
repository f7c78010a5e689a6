//! Shared helpers for the end-to-end tests: where the assets and shared data live, and a
//! MiniLM bundle imported once per test binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `assets/` (or `$CAPOT_ASSETS`), populated by `scripts/setup --assets-only`.
pub fn assets() -> PathBuf {
    std::env::var_os("CAPOT_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("assets"))
}

/// The all-MiniLM-L6-v2 Hugging Face directory; panics with the fix if it is missing.
pub fn minilm_hf_dir() -> PathBuf {
    let dir = assets().join("models/all-MiniLM-L6-v2");
    assert!(
        dir.join("model.safetensors").is_file(),
        "{} is missing: run `scripts/setup --assets-only` first",
        dir.display()
    );
    dir
}

/// `../shared` beside the project.
pub fn shared() -> PathBuf {
    root().join("../shared")
}

/// The golden reference file of all-MiniLM-L6-v2 embeddings.
pub fn golden() -> serde_json::Value {
    let path = shared().join("golden/minilm-l6-v2.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (../shared must sit beside the project)",
            path.display()
        )
    });
    serde_json::from_str(&text).expect("golden file is JSON")
}

/// The capot binary under test.
pub fn capot() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_capot"));
    c.env(
        "ORT_DYLIB_PATH",
        assets().join("onnxruntime/lib/libonnxruntime.so"),
    );
    c.env_remove("CAPOT_LOG");
    // The lexicon and other default assets: the test's assets, whatever the working directory.
    c.env("CAPOT_ASSETS", assets());
    c
}

/// Runs capot with `args`, feeding `stdin`, and returns its output.
pub fn run_capot(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = capot()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn capot");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for capot");
    let _ = writer.join();
    out
}

/// Runs capot with `args` as on a disk that fills up after `max_kib` KiB per file: under
/// `ulimit -f` (RLIMIT_FSIZE) with SIGXFSZ ignored, so a write past the limit fails with EFBIG
/// ("File too large") through the same error paths a full disk (ENOSPC) takes.
pub fn run_capot_with_file_limit(args: &[&str], max_kib: u64) -> Output {
    let bin = env!("CARGO_BIN_EXE_capot");
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f {max_kib}; exec \"$0\" \"$@\""
        ))
        .arg(bin)
        .args(args);
    let c = capot();
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.stdin(Stdio::null())
        .output()
        .expect("run capot under ulimit")
}

/// An empty directory for a fixture made once per test binary and held by a `static`:
/// `CARGO_TARGET_TMPDIR/test-fixtures/<pid>-<name>`. A `static` is never dropped, so a `TempDir`
/// held by one would outlive the process (a MiniLM bundle is 174 MB, per binary and run); these
/// directories are removed instead by a later test binary once their process has exited.
pub fn fixture_dir(name: &str) -> PathBuf {
    let parent = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("test-fixtures");
    remove_fixtures_of_exited_processes(&parent);
    let dir = parent.join(format!("{}-{name}", std::process::id()));
    // Left by an earlier process with the same id.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("fixture directory");
    dir
}

/// Removes the `<pid>-<name>` directories under `parent` whose process is gone (Linux: only
/// where `/proc` says which processes live).
fn remove_fixtures_of_exited_processes(parent: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Imports MiniLM under `name` into a [`fixture_dir`] of its own (so that it is outside the model
/// directories of a server that does not name it); returns the bundle directory.
pub fn import_minilm_as(name: &str) -> PathBuf {
    let out = fixture_dir(name).join(name);
    let hf = minilm_hf_dir();
    let o = run_capot(
        &[
            "encoder",
            "import",
            hf.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--name",
            name,
        ],
        b"",
    );
    assert!(
        o.status.success(),
        "import failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// A MiniLM bundle named `minilm`, imported once per test binary.
pub fn minilm_bundle() -> &'static Path {
    static BUNDLE: OnceLock<PathBuf> = OnceLock::new();
    BUNDLE.get_or_init(|| import_minilm_as("minilm"))
}

/// Imports a tiny randomly initialised BERT (MiniLM's tokenizer, weights from `seed`) as the
/// bundle `dir/<name>` with weights, so it can be aligned; returns the bundle directory.
pub fn import_tiny(dir: &Path, name: &str, seed: u64) -> PathBuf {
    use capot::model::{BertConfig, BertWeights};
    let hf = dir.join(format!("{name}-hf"));
    std::fs::create_dir_all(&hf).expect("hf dir");
    let config = BertConfig {
        vocab_size: 30522,
        ..BertConfig::tiny()
    };
    std::fs::write(
        hf.join("config.json"),
        serde_json::to_string(&config).expect("config JSON"),
    )
    .expect("write config");
    BertWeights::random(&config, seed)
        .save_safetensors(&hf.join("model.safetensors"))
        .expect("write weights");
    std::fs::copy(
        minilm_hf_dir().join("tokenizer.json"),
        hf.join("tokenizer.json"),
    )
    .expect("copy tokenizer");
    let out = dir.join(name);
    let o = run_capot(
        &[
            "encoder",
            "import",
            hf.to_str().expect("utf-8 path"),
            "--out",
            out.to_str().expect("utf-8 path"),
            "--name",
            name,
            "--max-length",
            "64",
        ],
        b"",
    );
    assert!(
        o.status.success(),
        "import failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Parses `{"embedding": [...]}` lines.
pub fn parse_embeddings(stdout: &[u8]) -> Vec<Vec<f32>> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("output line is JSON");
            v["embedding"]
                .as_array()
                .expect("embedding array")
                .iter()
                .map(|x| x.as_f64().expect("number") as f32)
                .collect()
        })
        .collect()
}

/// A `capot serve` child process on 127.0.0.1, stopped (SIGTERM, then kill) when dropped.
pub struct Server {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub addr: std::net::SocketAddr,
    /// gRPC address (`capot: grpc listening on ADDR`), unless gRPC is off.
    pub grpc_addr: Option<std::net::SocketAddr>,
    /// Everything the server wrote on stderr, collected by a thread.
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// The data directory the fixture made, removed with the server.
    pub data_dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts `capot serve <args>` on port 0 for HTTP, gRPC and admin, with a data directory of
    /// its own unless the test gives one, and waits (bounded) until it is ready.
    pub fn start(args: &[&str]) -> Server {
        Self::start_with(args, &[], true)
    }

    /// Like [`Server::start`], with extra environment variables; `wait_ready` false returns as
    /// soon as the port is known.
    pub fn start_with(args: &[&str], env: &[(&str, &str)], wait_ready: bool) -> Server {
        use std::io::BufRead;
        let mut cmd = capot();
        cmd.arg("serve").args(args);
        if !args.contains(&"--addr") {
            cmd.args(["--addr", "127.0.0.1:0"]);
        }
        // Never the fixed default gRPC port: tests run in parallel.
        let grpc_given = args.iter().position(|a| *a == "--grpc-addr");
        let grpc_env = env
            .iter()
            .find(|(k, _)| *k == "CAPOT_GRPC_ADDR")
            .map(|(_, v)| *v);
        if grpc_given.is_none() && grpc_env.is_none() {
            cmd.args(["--grpc-addr", "127.0.0.1:0"]);
        }
        // Nor the fixed admin port; and a data directory (admin token, state file) of its own,
        // so parallel servers never restore each other's state.
        let given =
            |flag: &str, var: &str| args.contains(&flag) || env.iter().any(|(k, _)| *k == var);
        if !given("--admin-addr", "CAPOT_ADMIN_ADDR") {
            cmd.args(["--admin-addr", "127.0.0.1:0"]);
        }
        let data_dir = if given("--data-dir", "CAPOT_DATA_DIR") || args.contains(&"--config") {
            None
        } else {
            let d = tempfile::tempdir().expect("data dir");
            cmd.arg("--data-dir").arg(d.path());
            Some(d)
        };
        let grpc_off = grpc_given
            .and_then(|i| args.get(i + 1).copied())
            .or(grpc_env)
            .is_some_and(|v| v.eq_ignore_ascii_case("off"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn capot serve");
        let stderr = child.stderr.take().expect("stderr");
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(Result::ok)
                {
                    if let Some(addr) = line.strip_prefix("capot: listening on http://") {
                        let _ = tx.send((false, addr.trim().to_string()));
                    }
                    if let Some(addr) = line.strip_prefix("capot: grpc listening on ") {
                        let _ = tx.send((true, addr.trim().to_string()));
                    }
                    let mut l = log.lock().unwrap();
                    l.push_str(&line);
                    l.push('\n');
                }
            });
        }
        // The HTTP line, then (unless gRPC is off) the gRPC line.
        let (mut addr, mut grpc_addr): (Option<std::net::SocketAddr>, _) = (None, None);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while addr.is_none() || (grpc_addr.is_none() && !grpc_off) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok((false, a)) => addr = Some(a.parse().expect("listening address")),
                Ok((true, a)) => grpc_addr = Some(a.parse().expect("grpc address")),
                Err(_) => {
                    let _ = child.kill();
                    panic!("server did not start listening: {}", log.lock().unwrap());
                }
            }
        }
        let addr = addr.expect("listening address");
        let server = Server {
            child,
            base: format!("http://{addr}"),
            addr,
            grpc_addr,
            stderr: log,
            data_dir,
        };
        if wait_ready {
            server.wait_ready(std::time::Duration::from_secs(120));
        }
        server
    }

    /// Polls `/ready` until 200; panics with the server's log after `limit`.
    pub fn wait_ready(&self, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok((200, _)) = http_get(self.addr, "/ready") {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("server not ready: {}", self.stderr.lock().unwrap());
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("server did not stop on SIGTERM");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A minimal HTTP/1.1 GET over a plain socket: (status, body). For polling only; tests of the
/// API itself use curl or real client libraries.
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = String::new();
    s.read_to_string(&mut buf)?;
    let status = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// The document ids of a single-query `/search` response, in rank order.
pub fn hit_ids(response: &serde_json::Value) -> Vec<String> {
    response["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|h| h["id"].as_str().expect("hit id").to_string())
        .collect()
}

/// The built-in corpus indexed with the MiniLM bundle (see [`cached_index`]).
pub fn default_index() -> &'static Path {
    static INDEX: OnceLock<PathBuf> = OnceLock::new();
    INDEX.get_or_init(|| cached_index(&root().join("data/default-corpus")))
}

/// The Python interpreter of the test virtualenv (`scripts/test` creates it with
/// tests/requirements.txt): real clients such as openai and grpcio.
pub fn python() -> PathBuf {
    let p = std::env::var_os("CAPOT_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"));
    assert!(
        p.is_file(),
        "{} is missing: run `scripts/test` (it creates .venv from tests/requirements.txt)",
        p.display()
    );
    p
}

/// An index of `corpus` (a BEIR directory) built with the MiniLM bundle, cached across test
/// binaries under cargo's test temp dir, keyed by the bundle's fingerprint and the corpus path.
/// Builds are atomic (temp dir + rename), so an interrupted build never leaves a cached index.
pub fn cached_index(corpus: &Path) -> PathBuf {
    let bundle = minilm_bundle();
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(bundle.join("encoder.json")).expect("manifest"),
    )
    .expect("manifest JSON");
    let fingerprint = manifest["fingerprint"].as_str().expect("fingerprint");
    let corpus = corpus.canonicalize().expect("corpus path");
    let mut key = std::collections::hash_map::DefaultHasher::new();
    // The index layout tag changes whenever what `index build` writes changes (vocab: query
    // repair's vocabulary; format 2: capot's graph), so a cached index from an older build is
    // never reused.
    let layout = "format-2";
    std::hash::Hash::hash(
        &(fingerprint, &corpus, env!("CARGO_PKG_VERSION"), layout),
        &mut key,
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("index-{:016x}", std::hash::Hasher::finish(&key)));
    if !dir.join("index.json").is_file() {
        let o = run_capot(
            &[
                "index",
                "build",
                "--doc-encoder",
                bundle.to_str().unwrap(),
                "--corpus",
                corpus.to_str().unwrap(),
                "--out",
                dir.to_str().unwrap(),
                "--force",
            ],
            b"",
        );
        assert!(
            o.status.success(),
            "index build failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    dir
}

/// The metadata the filter tests give document `i` of the built-in corpus (`None` for every
/// eleventh): a tenant, a language (a top-level field on odd documents, to check that those
/// are metadata too), a year (`null` on every thirteenth), a datetime, tags and a nested country.
pub fn test_metadata(i: usize) -> Option<serde_json::Value> {
    (!i.is_multiple_of(11)).then(|| {
        serde_json::json!({
            "tenant": format!("t{}", i % 4),
            "year": if i.is_multiple_of(13) { serde_json::Value::Null } else { (2000 + i % 10).into() },
            "published": format!("2024-01-{:02}T12:00:00Z", 1 + i % 28),
            "tags": [format!("tag{}", i % 3), format!("tag{}", i % 5)],
            "author": {"country": if i.is_multiple_of(5) { "nz" } else { "us" }},
            "lang": (["en", "de", "fr"][i % 3]),
        })
    })
}

/// The built-in corpus with [`test_metadata`], written as a BEIR corpus in `dir`; returns the
/// corpus file.
pub fn metadata_corpus(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(root().join("data/default-corpus/corpus.jsonl"))
        .expect("default corpus");
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut doc: serde_json::Value = serde_json::from_str(line).expect("corpus line");
        if let Some(mut m) = test_metadata(i) {
            if i % 2 == 1 {
                // `lang` as a top-level field: the build stores it as metadata too.
                doc["lang"] = m["lang"].take();
                m.as_object_mut().expect("object").remove("lang");
            }
            doc["metadata"] = m;
        }
        out.push_str(&doc.to_string());
        out.push('\n');
    }
    let path = dir.join("corpus.jsonl");
    std::fs::write(&path, out).expect("write corpus");
    path
}

/// An index of [`metadata_corpus`] with payload indexes on tenant (the tenant key), lang,
/// year, published and tags (not `author.country`), built once per test binary.
pub fn filtered_index() -> &'static Path {
    static INDEX: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &INDEX
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let corpus = metadata_corpus(dir.path());
            let out = dir.path().join("index");
            let o = run_capot(
                &[
                    "index",
                    "build",
                    "--doc-encoder",
                    minilm_bundle().to_str().unwrap(),
                    "--corpus",
                    corpus.to_str().unwrap(),
                    "--out",
                    out.to_str().unwrap(),
                    "--payload-index",
                    "tenant:keyword:tenant",
                    "--payload-index",
                    "lang:keyword",
                    "--payload-index",
                    "year:integer",
                    "--payload-index",
                    "published:datetime",
                    "--payload-index",
                    "tags:keyword",
                ],
                b"",
            );
            assert!(
                o.status.success(),
                "index build failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let said = String::from_utf8_lossy(&o.stderr);
            assert!(said.contains("181 with metadata"), "{said}");
            (dir, out)
        })
        .1
}
pub mod postgres;
