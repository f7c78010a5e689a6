//! Helpers of the registry tests: the admin listener's address and token, a second MiniLM
//! bundle, curl for admin calls and a keep-alive HTTP/1.1 client for load generation.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::{self, Server};

/// MiniLM imported a second time, under the name `minilm-b`, once per test binary.
pub fn second_bundle() -> &'static Path {
    static BUNDLE: OnceLock<PathBuf> = OnceLock::new();
    BUNDLE.get_or_init(|| common::import_minilm_as("minilm-b"))
}

/// The directory holding [`second_bundle`]: servers that load it through the admin API name it
/// with `--models-dir`.
pub fn second_bundle_dir() -> String {
    second_bundle()
        .parent()
        .expect("bundle parent")
        .to_str()
        .expect("UTF-8 path")
        .to_string()
}

/// The admin address the server printed (`capot: admin listening on http://ADDR`).
pub fn admin_addr(server: &Server) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let log = server.stderr.lock().unwrap().clone();
        if let Some(line) = log
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("capot: admin listening on http://"))
        {
            return line.trim().parse().expect("admin address");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "no admin address printed: {}",
        server.stderr.lock().unwrap()
    );
}

/// An admin API client that calls curl.
#[derive(Clone)]
pub struct Admin {
    pub base: String,
    pub token: String,
}

impl Admin {
    /// The admin API of `server`, with the token generated into `data_dir`.
    pub fn of(server: &Server, data_dir: &Path) -> Admin {
        let token =
            std::fs::read_to_string(data_dir.join("admin-token")).expect("admin-token file");
        Admin {
            base: format!("http://{}", admin_addr(server)),
            token: token.trim().to_string(),
        }
    }

    /// `curl -X METHOD` with the token (or `token` instead): (status, JSON body).
    pub fn call_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let mut cmd = Command::new("curl");
        cmd.args([
            "-sS",
            "--max-time",
            "120",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "-X",
            method,
        ]);
        if let Some(t) = token {
            cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        if let Some(b) = body {
            cmd.args(["-H", "Content-Type: application/json", "--data-binary", b]);
        }
        cmd.arg(format!("{}{path}", self.base));
        let out = cmd.output().expect("run curl");
        assert!(
            out.status.success(),
            "curl failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').expect("status line");
        let value = if body.trim().is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(body)
                .unwrap_or_else(|e| panic!("{method} {path}: body is not JSON ({e}): {body}"))
        };
        (code.trim().parse().expect("status code"), value)
    }

    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, serde_json::Value) {
        self.call_as(Some(&self.token), method, path, body)
    }

    pub fn get(&self, path: &str) -> serde_json::Value {
        let (code, v) = self.call("GET", path, None);
        assert_eq!(code, 200, "GET {path}: {v}");
        v
    }
}

/// A keep-alive HTTP/1.1 connection over a std `TcpStream`.
pub struct Conn {
    addr: SocketAddr,
    stream: Option<BufReader<TcpStream>>,
}

impl Conn {
    pub fn new(addr: SocketAddr) -> Conn {
        Conn { addr, stream: None }
    }

    fn stream(&mut self) -> std::io::Result<&mut BufReader<TcpStream>> {
        if self.stream.is_none() {
            let s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            s.set_nodelay(true)?;
            self.stream = Some(BufReader::new(s));
        }
        Ok(self.stream.as_mut().expect("connected"))
    }

    /// Sends one request and reads the response: (status, body). On an error the connection is
    /// dropped (the next request opens a new one).
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> std::io::Result<(u16, String)> {
        let r = self.request_inner(method, path, headers, body);
        if r.is_err() {
            self.stream = None;
        }
        r
    }

    fn request_inner(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> std::io::Result<(u16, String)> {
        let addr = self.addr;
        let s = self.stream()?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let w = s.get_mut();
        w.write_all(head.as_bytes())?;
        w.write_all(body.as_bytes())?;
        let mut status_line = String::new();
        s.read_line(&mut status_line)?;
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {status_line:?}")))?;
        let mut length = None;
        let mut close = false;
        loop {
            let mut line = String::new();
            if s.read_line(&mut line)? == 0 {
                return Err(std::io::Error::other("connection closed in headers"));
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                if k == "content-length" {
                    length = v.trim().parse::<usize>().ok();
                } else if k == "connection" && v.trim().eq_ignore_ascii_case("close") {
                    close = true;
                } else if k == "transfer-encoding" {
                    return Err(std::io::Error::other("chunked responses are not expected"));
                }
            }
        }
        let length = length.ok_or_else(|| std::io::Error::other("no content-length"))?;
        let mut buf = vec![0u8; length];
        s.read_exact(&mut buf)?;
        if close {
            self.stream = None;
        }
        Ok((status, String::from_utf8_lossy(&buf).into_owned()))
    }
}

/// Percentile (0..=100) of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The value of one Prometheus series in `/metrics` text (exact name with labels).
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .and_then(|v| v.trim().parse().ok())
}

/// The default corpus's query texts.
pub fn queries() -> Vec<String> {
    let text = std::fs::read_to_string(common::root().join("data/default-corpus/queries.jsonl"))
        .expect("queries");
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .collect()
}
