//! `capot eval`: retrieval quality per encoder and per noise condition, locally (encoder bundles
//! against an index) or against a live service through its HTTP API.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use capot::dataset::{self, ReadMode};
use capot::encoder::Encoder;
use capot::eval::chart::render_svg;
use capot::eval::run::{self, EvalPlan, Progress, Ranking, Retriever};
use capot::eval::{EvalError, Metric};
use capot::index::Index;
use capot::noise;
use capot::repair::retrieved::retrieved_from;
use capot::repair::{RepairFusion, RepairMode, Repairer};

use super::{DeviceArgs, GlobalArgs, LexiconArgs};

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// BEIR dataset directory (queries.jsonl, qrels/test.tsv).
    #[arg(long, value_name = "DIR")]
    pub dataset: PathBuf,
    /// Index directory (local evaluation).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "server",
        required_unless_present = "server"
    )]
    pub index: Option<PathBuf>,
    /// Encoder bundle (local) or encoder name/alias (with --server); repeat to compare side by side.
    #[arg(long = "encoder", value_name = "BUNDLE|NAME")]
    pub encoders: Vec<String>,
    /// Base URL of a running capot service (http://host:port), evaluated through /search.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// API key for --server.
    #[arg(long, env = "CAPOT_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Noise kinds generated on the fly (see `capot noise`).
    #[arg(long, value_name = "KINDS")]
    pub noise: Option<String>,
    /// Seeds per noise kind; with more than one, a mean row is added.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub seeds: u64,
    /// Variant files (qid<TAB>text); repeat. Numbered files of one family (typo1..typo10) also get a mean row.
    #[arg(long = "variants", value_name = "FILE")]
    pub variants: Vec<PathBuf>,
    /// Use HNSW with this ef instead of exact search (local only).
    #[arg(long, value_name = "EF")]
    pub ef: Option<usize>,
    /// Directory for report.json, report.md and report.svg.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Queries per retrieval call.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Query repair modes to evaluate each encoder under, comma-separated (off, on, auto);
    /// `off,on` puts every encoder with and without repair side by side (`NAME+repair`).
    #[arg(long, value_delimiter = ',', default_value = "off")]
    pub repair: Vec<RepairMode>,
    /// What a repaired query searches with: repaired, max.
    #[arg(long, default_value_t = RepairFusion::Max)]
    pub repair_fusion: RepairFusion,
    /// Speller settings other than the defaults, as JSON (as `capot repair --params`), for local
    /// evaluation: weigh a setting by retrieval quality before serving it.
    #[arg(long, value_name = "JSON")]
    pub repair_params: Option<String>,
    /// Lists of real misspellings (`right: wrong1 wrong2 ...` lines) that `--noise misspell`
    /// draws from; repeat for several.
    #[arg(long, value_name = "FILE")]
    pub misspellings: Vec<PathBuf>,
    /// Only documents whose metadata this filter admits (Qdrant's JSON shape, as `/search`
    /// takes it; `@FILE` reads it from a file). Locally, fields without a payload index are
    /// scanned.
    #[arg(long, value_name = "JSON|@FILE")]
    pub filter: Option<String>,
    #[command(flatten)]
    pub lexicon: LexiconArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// The report name of an encoder under a repair mode: `NAME` when off, `NAME+repair` when on,
/// `NAME+repair-auto` when auto.
fn repaired_name(name: String, mode: RepairMode) -> String {
    match mode {
        RepairMode::Off => name,
        RepairMode::On => format!("{name}+repair"),
        RepairMode::Auto => format!("{name}+repair-auto"),
    }
}

/// A local encoder bundle searched against an index (exact search unless an ef is given),
/// behind query repair when it has a repairer: the same stage, and the same fusion, as the
/// service's search path.
struct LocalRetriever {
    encoder: Arc<Encoder>,
    index: Arc<Index>,
    ef: Option<usize>,
    repair: Option<(RepairMode, Arc<Repairer>, RepairFusion)>,
    /// The documents `--filter` admits.
    admitted: Option<Arc<capot::index::Admitted>>,
}

impl LocalRetriever {
    fn search(&self, v: &[f32], k: usize) -> Result<Vec<capot::index::Hit>, EvalError> {
        match (&self.admitted, self.ef) {
            (Some(admitted), ef) => self
                .index
                .search_admitted(
                    v,
                    k,
                    ef.unwrap_or(self.index.len()),
                    admitted,
                    capot::index::DEFAULT_SCAN_FACTOR,
                )
                .map(|f| f.hits),
            (None, Some(ef)) => self.index.search(v, k, ef),
            (None, None) => self.index.search_exact(v, k),
        }
        .map_err(|e| EvalError::Retrieval(e.to_string()))
    }
}

/// `--filter`'s JSON, from the argument or (`@FILE`) a file.
fn filter_arg(arg: &str) -> anyhow::Result<serde_json::Value> {
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the filter file {path}"))?,
        None => arg.to_string(),
    };
    serde_json::from_str(&text).context("--filter is not valid JSON")
}

impl Retriever for LocalRetriever {
    fn identity(&self) -> (String, String) {
        let m = self.encoder.manifest();
        let mode = self.repair.as_ref().map_or(RepairMode::Off, |r| r.0);
        (repaired_name(m.name.clone(), mode), m.version.clone())
    }

    fn retrieve(
        &self,
        texts: &[String],
        k: usize,
    ) -> Result<(Vec<Ranking>, Vec<Vec<f32>>), EvalError> {
        let encode = |t: &[String]| {
            self.encoder
                .encode(t)
                .map_err(|e| EvalError::Retrieval(e.to_string()))
        };
        let (vectors, raw_vectors) = match &self.repair {
            None => (encode(texts)?, None),
            Some((_, repairer, fusion)) => {
                // The index's vote: the raw texts are encoded and searched first, and the words
                // of what they retrieve go to the speller (the raw vectors serve fusion too).
                let voters = repairer.params().vote_documents;
                let raw = (*fusion == RepairFusion::Max || voters > 0)
                    .then(|| encode(texts))
                    .transpose()?;
                let mut fixed = Vec::with_capacity(texts.len());
                for (i, t) in texts.iter().enumerate() {
                    let retrieved = match &raw {
                        Some(raw) if voters > 0 => Some(
                            retrieved_from(
                                &self.index,
                                &raw[i],
                                voters,
                                self.ef.unwrap_or(self.index.default_ef()).max(voters),
                            )
                            .map_err(|e| EvalError::Retrieval(e.to_string()))?,
                        ),
                        _ => None,
                    };
                    fixed.push(repairer.repair_with(t, &|_| false, retrieved.as_ref()).text);
                }
                let raw = raw.filter(|_| *fusion == RepairFusion::Max);
                (encode(&fixed)?, raw)
            }
        };
        let mut rankings = Vec::with_capacity(vectors.len());
        for (i, v) in vectors.iter().enumerate() {
            let mut lists = vec![self.search(v, k)?];
            if let Some(raw) = &raw_vectors {
                lists.push(self.search(&raw[i], k)?);
            }
            let hits = capot::index::merge_best(lists, k);
            let mut ranking = Vec::with_capacity(hits.len());
            for h in &hits {
                let doc = self
                    .index
                    .document(h.index)
                    .map_err(|e| EvalError::Retrieval(e.to_string()))?;
                if let Some(d) = doc {
                    ranking.push((d.id, h.score));
                }
            }
            rankings.push(ranking);
        }
        Ok((rankings, vectors))
    }
}

/// A running capot service: rankings from POST /search, vectors from POST /v1/embeddings (of
/// the raw text: the embeddings endpoint does not repair).
struct ServerRetriever {
    agent: ureq::Agent,
    base: String,
    encoder: String,
    api_key: Option<String>,
    version: String,
    repair: RepairMode,
    repair_fusion: RepairFusion,
    filter: Option<serde_json::Value>,
}

impl ServerRetriever {
    fn post(&self, path: &str, body: serde_json::Value) -> Result<serde_json::Value, EvalError> {
        let url = format!("{}{path}", self.base);
        let mut req = self.agent.post(&url);
        if let Some(k) = &self.api_key {
            req = req.header("Authorization", &format!("Bearer {k}"));
        }
        let mut resp = req
            .send_json(&body)
            .map_err(|e| EvalError::Retrieval(format!("{url}: {e}")))?;
        let status = resp.status();
        let value: serde_json::Value = resp
            .body_mut()
            .read_json()
            .map_err(|e| EvalError::Retrieval(format!("{url}: {e}")))?;
        if !status.is_success() {
            return Err(EvalError::Retrieval(format!(
                "{url}: HTTP {status}: {}",
                value["error"]["message"]
            )));
        }
        Ok(value)
    }
}

impl Retriever for ServerRetriever {
    fn identity(&self) -> (String, String) {
        (
            repaired_name(self.encoder.clone(), self.repair),
            self.version.clone(),
        )
    }

    fn retrieve(
        &self,
        texts: &[String],
        k: usize,
    ) -> Result<(Vec<Ranking>, Vec<Vec<f32>>), EvalError> {
        let bad = |what: &str| {
            EvalError::Retrieval(format!("unexpected response from the server: {what}"))
        };
        let search = self.post(
            "/search",
            serde_json::json!({
                "queries": texts, "k": k, "encoder": self.encoder,
                "repair": self.repair, "repair_fusion": self.repair_fusion,
                "filter": self.filter,
            }),
        )?;
        let lists = search["results"]
            .as_array()
            .ok_or_else(|| bad("no results"))?;
        let rankings = lists
            .iter()
            .map(|list| {
                list.as_array()
                    .ok_or_else(|| bad("results is not a list of lists"))?
                    .iter()
                    .map(|h| {
                        Ok((
                            h["id"]
                                .as_str()
                                .ok_or_else(|| bad("hit without id"))?
                                .to_string(),
                            h["score"]
                                .as_f64()
                                .ok_or_else(|| bad("hit without score"))?
                                as f32,
                        ))
                    })
                    .collect::<Result<Ranking, EvalError>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let emb = self.post(
            "/v1/embeddings",
            serde_json::json!({ "input": texts, "model": self.encoder }),
        )?;
        let data = emb["data"].as_array().ok_or_else(|| bad("no data"))?;
        let vectors = data
            .iter()
            .map(|d| {
                d["embedding"]
                    .as_array()
                    .ok_or_else(|| bad("embedding is not a list"))?
                    .iter()
                    .map(|x| {
                        x.as_f64()
                            .map(|v| v as f32)
                            .ok_or_else(|| bad("embedding value"))
                    })
                    .collect::<Result<Vec<f32>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((rankings, vectors))
    }
}

struct Bar(ProgressBar);

impl Progress for Bar {
    fn start(&self, encoder: &str, conditions: usize) {
        self.0.reset();
        self.0.set_length(conditions as u64);
        self.0.set_message(encoder.to_string());
    }
    fn condition_done(&self, condition: &str) {
        self.0.inc(1);
        self.0.set_message(condition.to_string());
    }
}

fn condition_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

pub fn run(args: EvalArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    if args.encoders.is_empty() {
        bail!("at least one --encoder is required");
    }
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    if args.repair.is_empty() {
        bail!("--repair needs at least one of off, on, auto");
    }
    let repair_params =
        super::repair::parse_params(args.repair_params.as_deref(), "--repair-params")?;
    for (i, m) in args.repair.iter().enumerate() {
        if args.repair[..i].contains(m) {
            bail!("--repair names {m} twice");
        }
    }
    let (queries, _) = dataset::read_queries(&args.dataset, ReadMode::Strict)?;
    let (qrels, _) = dataset::read_qrels(&args.dataset, ReadMode::Strict)?;
    let mut variant_files = Vec::new();
    for path in &args.variants {
        let (v, _) = dataset::read_variants(path, ReadMode::Strict)?;
        let unknown = v.unknown_ids(&queries);
        if !unknown.is_empty() {
            bail!(
                "{}: {} variant(s) for query ids not in the dataset (first: {})",
                path.display(),
                unknown.len(),
                unknown[0]
            );
        }
        variant_files.push((condition_name(path), v));
    }
    let kinds = match &args.noise {
        Some(k) => noise::parse_kinds(k)?,
        None => vec![],
    };
    if kinds.iter().any(|k| k.needs_wordnet()) {
        noise::check_wordnet()?;
    }
    super::install_human_noise(&kinds, &args.misspellings, &args.lexicon)?;
    let plan = EvalPlan {
        dataset: args
            .dataset
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        queries,
        qrels,
        variant_files,
        noise: kinds,
        seeds: args.seeds,
        depth: 100,
        batch_size: args.batch_size,
    };

    let retrievers: Vec<Box<dyn Retriever>> = match (&args.index, &args.server) {
        (Some(index_dir), None) => {
            let index = Arc::new(
                Index::load(index_dir)
                    .with_context(|| format!("cannot load index {}", index_dir.display()))?,
            );
            let runtime = args.device.runtime(global)?;
            let repairer = if args.repair.iter().any(|m| *m != RepairMode::Off) {
                let vocab = index.vocab().cloned().with_context(|| {
                    format!(
                        "--repair: index {} has no vocabulary; add one with `capot index vocab {0}`",
                        index_dir.display()
                    )
                })?;
                let lexicon = args.lexicon.load()?.map(Arc::new);
                Some(Arc::new(Repairer::with_params(
                    vocab,
                    lexicon,
                    repair_params.clone(),
                )))
            } else {
                None
            };
            let admitted = match &args.filter {
                Some(arg) => {
                    let mut filter = capot::query::Filter::parse(&filter_arg(arg)?, "--filter")?;
                    filter.bind(&index.payload_fields(), true, "--filter")?;
                    let admitted = filter.admitted_in(&index)?;
                    if admitted.is_empty() {
                        anyhow::bail!(
                            "--filter admits none of the index's {} documents, so every score would be 0{}",
                            index.len(),
                            if index.has_metadata() {
                                " (are its keys and values spelt as in the metadata?)"
                            } else {
                                ": the index holds no metadata"
                            }
                        );
                    }
                    eprintln!(
                        "--filter admits {} of {} documents",
                        admitted.len(),
                        index.len()
                    );
                    Some(Arc::new(admitted.into()))
                }
                None => None,
            };
            let mut out: Vec<Box<dyn Retriever>> = Vec::new();
            for e in &args.encoders {
                let encoder = Encoder::load(Path::new(e), &runtime)
                    .with_context(|| format!("cannot load encoder {e}"))?;
                capot::server::check_compatible(
                    encoder.manifest(),
                    &index.manifest().encoder_fingerprint,
                    index.manifest().dimension,
                )
                .map_err(|r| anyhow::anyhow!("{e}: {r}"))?;
                let encoder = Arc::new(encoder);
                for &mode in &args.repair {
                    let repair = mode
                        .repairer(repairer.as_ref())?
                        .map(|r| (mode, r, args.repair_fusion));
                    out.push(Box::new(LocalRetriever {
                        encoder: encoder.clone(),
                        index: index.clone(),
                        ef: args.ef,
                        repair,
                        admitted: admitted.clone(),
                    }));
                }
            }
            out
        }
        (None, Some(url)) => {
            if args.ef.is_some() {
                bail!("--ef applies to local evaluation; the server uses its own ef");
            }
            if args.repair_params.is_some() {
                bail!("--repair-params applies to local evaluation; the server repairs with its own settings");
            }
            let base = url.trim_end_matches('/').to_string();
            if !base.starts_with("http://") {
                bail!("--server must be an http:// URL (this build has no TLS client)");
            }
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(120)))
                .http_status_as_error(false)
                .build()
                .into();
            let mut req = agent.get(&format!("{base}/info"));
            if let Some(k) = &args.api_key {
                req = req.header("Authorization", &format!("Bearer {k}"));
            }
            let info: serde_json::Value = req
                .call()
                .with_context(|| format!("cannot reach {base}"))?
                .body_mut()
                .read_json()
                .with_context(|| format!("{base}/info did not answer JSON"))?;
            let mut out: Vec<Box<dyn Retriever>> = Vec::new();
            for name in &args.encoders {
                let target = info["aliases"][name.as_str()].as_str().unwrap_or(name);
                let version = info["encoders"]
                    .as_array()
                    .and_then(|list| list.iter().find(|e| e["name"] == target))
                    .and_then(|e| e["version"].as_str())
                    .unwrap_or("?")
                    .to_string();
                for &mode in &args.repair {
                    out.push(Box::new(ServerRetriever {
                        agent: agent.clone(),
                        base: base.clone(),
                        encoder: name.clone(),
                        api_key: args.api_key.clone(),
                        version: version.clone(),
                        repair: mode,
                        repair_fusion: args.repair_fusion,
                        filter: args.filter.as_deref().map(filter_arg).transpose()?,
                    }));
                }
            }
            out
        }
        _ => bail!("give either --index (local) or --server"),
    };

    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} conditions · {msg} · {elapsed}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let refs: Vec<&dyn Retriever> = retrievers.iter().map(|b| b.as_ref()).collect();
    let report = run::run(&plan, &refs, &Bar(bar.clone()))?;
    bar.finish_and_clear();
    let markdown = report.to_markdown();
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        report.write_json(&dir.join("report.json"))?;
        std::fs::write(dir.join("report.md"), &markdown)?;
        std::fs::write(
            dir.join("report.svg"),
            render_svg(&report, &[Metric::NdcgAt10, Metric::MrrAt10]),
        )?;
        eprintln!("report written to {}", dir.display());
    }
    println!("{markdown}");
    Ok(())
}
