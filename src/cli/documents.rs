//! `capot documents add|delete`: write to a running server's live corpus from JSON lines, in
//! batches, with a progress bar. Each batch is acknowledged once durable (and, by default,
//! searchable); the first refused batch stops the run with the server's reason and how many
//! documents were acknowledged before it, so a rerun can skip them (`--skip`).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

/// Largest batch the server takes (`max_write_documents`).
const MAX_BATCH: usize = 256;

#[derive(Debug, Subcommand)]
pub enum DocumentsCommand {
    /// Add or replace documents: JSON lines `{"id", "title"?, "text", "metadata"?}`.
    Add(DocumentsArgs),
    /// Delete documents: JSON lines `{"id": ...}`, or one plain id per line.
    Delete(DocumentsArgs),
}

#[derive(Debug, Args)]
pub struct DocumentsArgs {
    /// The server's admin listener, `http://HOST:PORT`.
    #[arg(long, env = "CAPOT_ADMIN_URL")]
    pub server: String,
    /// File holding the admin token (first line); else $CAPOT_ADMIN_TOKEN.
    #[arg(long, env = "CAPOT_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Input (JSON lines); default: stdin.
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Documents (or ids) per request, 1-256.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Answer each batch once durable instead of once searchable (`wait=false`).
    #[arg(long)]
    pub no_wait: bool,
    /// Skip the first N input lines (resume after a stopped run).
    #[arg(long, default_value_t = 0)]
    pub skip: usize,
}

fn token(args: &DocumentsArgs) -> anyhow::Result<String> {
    let token = match &args.token_file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string(),
        None => std::env::var("CAPOT_ADMIN_TOKEN").unwrap_or_default(),
    };
    if token.is_empty() {
        bail!("no admin token: give --token-file (e.g. <data-dir>/admin-token) or set CAPOT_ADMIN_TOKEN");
    }
    Ok(token)
}

/// One input line as the item of a request: a document, or an id to delete.
fn item(line: &str, add: bool, number: usize) -> anyhow::Result<Value> {
    let parsed: Result<Value, _> = serde_json::from_str(line);
    if add {
        let v = parsed.with_context(|| format!("line {number}: not JSON"))?;
        if !v.is_object() || !v["id"].is_string() || !v["text"].is_string() {
            bail!("line {number}: a document needs a string \"id\" and \"text\"");
        }
        Ok(v)
    } else {
        match parsed {
            Ok(Value::Object(o)) => match o.get("id") {
                Some(Value::String(id)) => Ok(json!(id)),
                _ => bail!("line {number}: {{\"id\": ...}} needs a string id"),
            },
            Ok(Value::String(id)) => Ok(json!(id)),
            _ => Ok(json!(line.trim())),
        }
    }
}

pub fn run(cmd: DocumentsCommand) -> anyhow::Result<()> {
    let (add, args) = match cmd {
        DocumentsCommand::Add(a) => (true, a),
        DocumentsCommand::Delete(a) => (false, a),
    };
    if !(1..=MAX_BATCH).contains(&args.batch) {
        bail!("--batch must be in 1..={MAX_BATCH}, got {}", args.batch);
    }
    let base = args.server.trim_end_matches('/').to_string();
    if !base.starts_with("http://") {
        bail!("--server must be an http:// URL (this build has no TLS client)");
    }
    let token = token(&args)?;
    let (reader, total): (Box<dyn Read>, Option<u64>) = match &args.input {
        Some(p) => {
            let f =
                std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            let len = f.metadata().map(|m| m.len()).ok();
            (Box::new(f), len)
        }
        None => (Box::new(std::io::stdin()), None),
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(600)))
        .http_status_as_error(false)
        .build()
        .into();
    let path = if add {
        "/admin/documents"
    } else {
        "/admin/documents/delete"
    };
    let url = format!("{base}{path}?wait={}", !args.no_wait);
    let bar = ProgressBar::new(total.unwrap_or(0)).with_style(
        ProgressStyle::with_template(if total.is_some() {
            "{prefix} [{bar:30}] {bytes}/{total_bytes} · {msg} · {elapsed}"
        } else {
            "{prefix} {spinner} {msg} · {elapsed}"
        })
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(if add { "add" } else { "delete" });
    let started = Instant::now();
    let (mut done, mut batches, mut last_op) = (0usize, 0usize, 0u64);
    let mut pending: Vec<Value> = Vec::with_capacity(args.batch);
    let mut send = |items: &mut Vec<Value>, done: &mut usize| -> anyhow::Result<()> {
        let body = if add {
            json!({ "documents": items })
        } else {
            json!({ "ids": items })
        };
        let mut resp = agent
            .post(&url)
            .header("Authorization", &format!("Bearer {token}"))
            .send_json(&body)
            .with_context(|| format!("cannot reach {base}"))?;
        let status = resp.status().as_u16();
        let answer: Value = resp.body_mut().read_json().unwrap_or(Value::Null);
        if status != 200 {
            let reason = answer["error"]["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| answer.to_string());
            bail!(
                "the server refused a batch ({status}): {reason}; {} documents were acknowledged before it (rerun with --skip {})",
                *done,
                args.skip + *done
            );
        }
        last_op = answer["result"]["operation_id"].as_u64().unwrap_or(last_op);
        *done += items.len();
        batches += 1;
        items.clear();
        Ok(())
    };
    let mut read_bytes = 0u64;
    for (n, line) in BufReader::new(reader).lines().enumerate() {
        let line = line.context("cannot read the input")?;
        read_bytes += line.len() as u64 + 1;
        if n < args.skip || line.trim().is_empty() {
            continue;
        }
        pending.push(item(&line, add, n + 1)?);
        if pending.len() == args.batch {
            send(&mut pending, &mut done)?;
            bar.set_position(read_bytes);
            bar.set_message(format!(
                "{done} acknowledged · {:.0}/s",
                done as f64 / started.elapsed().as_secs_f64().max(1e-9)
            ));
        }
    }
    if !pending.is_empty() {
        send(&mut pending, &mut done)?;
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({
            "operation": if add { "upsert" } else { "delete" },
            "documents": done,
            "batches": batches,
            "last_operation_id": last_op,
            "seconds": seconds,
            "per_second": done as f64 / seconds.max(1e-9),
        })
    );
    Ok(())
}
