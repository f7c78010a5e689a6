//! `capot encode`: JSON lines in, embeddings out, in order.

use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use serde::Deserialize;

use capot::encoder::Encoder;

use super::{DeviceArgs, GlobalArgs};

#[derive(Debug, Args)]
pub struct EncodeArgs {
    /// Encoder bundle directory.
    #[arg(long, value_name = "DIR")]
    pub encoder: PathBuf,
    /// Texts per inference call.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub batch_size: u64,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    text: String,
}

pub fn run(args: EncodeArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    let runtime = args.device.runtime(global)?;
    let encoder = Encoder::load(&args.encoder, &runtime)
        .with_context(|| format!("cannot load encoder {}", args.encoder.display()))?;
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    encode_stream(&encoder, stdin, stdout, args.batch_size as usize)
}

/// Encodes every line of `input`; on a bad line, the good lines before it are written first,
/// then the error names the line.
pub fn encode_stream<R: BufRead, W: Write>(
    encoder: &Encoder,
    mut input: R,
    output: W,
    batch_size: usize,
) -> anyhow::Result<()> {
    let mut out = BufWriter::new(output);
    let mut pending: Vec<String> = Vec::with_capacity(batch_size);
    let mut line_no = 0usize;
    let mut buf = Vec::new();
    let mut failure: Option<anyhow::Error> = None;
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .context("cannot read stdin")?;
        if n == 0 {
            break;
        }
        line_no += 1;
        match parse_line(&buf) {
            Ok(Some(text)) => pending.push(text),
            Ok(None) => continue, // blank line
            Err(e) => {
                failure = Some(e.context(format!("line {line_no}")));
                break;
            }
        }
        if pending.len() == batch_size {
            flush(encoder, &mut pending, &mut out, line_no)?;
        }
    }
    flush(encoder, &mut pending, &mut out, line_no)?;
    out.flush().context("cannot write stdout")?;
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn parse_line(raw: &[u8]) -> anyhow::Result<Option<String>> {
    let text = std::str::from_utf8(raw).map_err(|e| anyhow::anyhow!("not valid UTF-8 ({e})"))?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    let line: Line = serde_json::from_str(trimmed)
        .map_err(|e| anyhow::anyhow!("expected a JSON object {{\"text\": \"...\"}}: {e}"))?;
    if line.text.trim().is_empty() {
        bail!("empty text");
    }
    Ok(Some(line.text))
}

fn flush<W: Write>(
    encoder: &Encoder,
    pending: &mut Vec<String>,
    out: &mut W,
    line_no: usize,
) -> anyhow::Result<()> {
    if pending.is_empty() {
        return Ok(());
    }
    let vectors = encoder
        .encode(pending)
        .with_context(|| format!("encoding the batch ending at line {line_no}"))?;
    for v in vectors {
        serde_json::to_writer(&mut *out, &serde_json::json!({ "embedding": v }))?;
        out.write_all(b"\n").context("cannot write stdout")?;
    }
    pending.clear();
    Ok(())
}
