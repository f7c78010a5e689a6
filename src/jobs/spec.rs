//! What a job is asked to do: the `POST /admin/jobs` body (the `capot align` flags under the
//! same names, an optional evaluation and an optional promotion), its validation, and the
//! `capot align` / `capot eval` command lines it becomes.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::align::{Objective, ObjectiveKind, TrainDevice};
use crate::registry::validate_name;

/// A rejected job request: the field at fault and why. Nothing was queued.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The request field, dotted for nested ones (`eval.dataset`, `promote.require.max_clean_drop`).
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Noise kinds as a comma-separated string (`"typos,reorder"`) or a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NoiseList {
    Text(String),
    List(Vec<String>),
}

impl NoiseList {
    /// The kinds joined as the CLI takes them.
    pub fn joined(&self) -> String {
        match self {
            NoiseList::Text(s) => s.clone(),
            NoiseList::List(v) => v.join(","),
        }
    }
}

/// The alignment parameters of a job: `capot align`'s flags under the same names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Name of the new encoder (bundle name and registered name).
    pub name: String,
    /// A loaded encoder (or alias) whose bundle is the base; it must carry weights.
    pub base_encoder: String,
    /// Clean training queries as the runner sees the path (TSV, queries.jsonl or dataset dir).
    pub queries: PathBuf,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<NoiseList>,
    /// One-word queries from the base tokenizer's vocabulary (needs `noise`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub word_queries: Option<usize>,
    #[serde(default = "default_objective")]
    pub objective: String,
    /// Frozen index for the ranking objective (default: the served index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epochs: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positives: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_steps: Option<usize>,
    /// `constant` or `linear` (decay to 0 at the last step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr_schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_decay: Option<f64>,
    /// `zero` or `base` (decay towards the base encoder's weights).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decay_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau_pos: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau_neg: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau_anchor: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau_rank: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_margin: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nce_temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_k: Option<usize>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub freeze_embeddings: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_every: Option<usize>,
    /// Version of the new bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Quantise the aligned encoder (`capot encoder quantize`): `int8` or `int8-7bit`. The int8
    /// bundle is what is evaluated, registered and promoted; the float32 one stays in the job's
    /// work directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantize: Option<String>,
    /// Evaluate the new encoder against the base before registering it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval: Option<EvalSpec>,
    /// Point an alias at the new encoder if the evaluation passes the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promote: Option<PromoteSpec>,
}

fn default_objective() -> String {
    "capot".into()
}

/// The evaluation of a job's encoder: `capot eval` on the served index, base against new.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalSpec {
    /// BEIR dataset directory (queries.jsonl, qrels/test.tsv) whose corpus is the served index.
    pub dataset: PathBuf,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<NoiseList>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<u64>,
    /// Query repair in front of both encoders (`capot eval --repair`), so the gate judges the
    /// new encoder as the service would run it; unset: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<crate::repair::RepairMode>,
}

/// Promotion behind an alias, when the gate passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromoteSpec {
    pub alias: String,
    #[serde(default)]
    pub require: Gate,
}

/// The quality gate, as fractions of the base encoder's nDCG@10 (relative changes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    /// Least relative gain on the noisy conditions (0.02 = +2%).
    #[serde(default)]
    pub min_noisy_gain: f64,
    /// Largest relative drop on clean queries (0.01 = −1%).
    #[serde(default = "default_max_clean_drop")]
    pub max_clean_drop: f64,
}

fn default_max_clean_drop() -> f64 {
    0.01
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            min_noisy_gain: 0.0,
            max_clean_drop: default_max_clean_drop(),
        }
    }
}

/// Checks that a path given in a request exists; `dir` says whether it must be a directory.
fn existing(field: &str, path: &Path, what: &str) -> Result<(), FieldError> {
    if path.as_os_str().is_empty() {
        return Err(FieldError::new(field, format!("{what} is required")));
    }
    if !path.is_absolute() {
        return Err(FieldError::new(
            field,
            format!(
                "{} is not an absolute path (paths are read by the job runner, not relative to anything)",
                path.display()
            ),
        ));
    }
    if !path.exists() {
        return Err(FieldError::new(
            field,
            format!("{} does not exist", path.display()),
        ));
    }
    Ok(())
}

fn positive(field: &str, v: Option<usize>) -> Result<(), FieldError> {
    match v {
        Some(0) => Err(FieldError::new(field, "must be at least 1")),
        _ => Ok(()),
    }
}

fn finite(field: &str, v: Option<f64>, positive: bool) -> Result<(), FieldError> {
    match v {
        Some(x) if !x.is_finite() => Err(FieldError::new(field, "must be a finite number")),
        Some(x) if positive && x <= 0.0 => Err(FieldError::new(field, "must be greater than 0")),
        Some(x) if !positive && x < 0.0 => Err(FieldError::new(field, "must not be negative")),
        _ => Ok(()),
    }
}

fn noise_kinds(field: &str, noise: &Option<NoiseList>) -> Result<bool, FieldError> {
    match noise {
        None => Ok(false),
        Some(n) => {
            let kinds = crate::noise::parse_kinds(&n.joined())
                .map_err(|e| FieldError::new(field, e.to_string()))?;
            if let Some(why) = kinds.iter().find_map(|k| k.not_for_training()) {
                return Err(FieldError::new(field, why));
            }
            Ok(!kinds.is_empty())
        }
    }
}

impl JobSpec {
    /// Checks everything that can be checked without the registry: names, paths, numbers,
    /// objective, noise kinds, device, evaluation and gate. The caller checks the base encoder
    /// and that the name is free.
    pub fn validate(&self) -> Result<(), FieldError> {
        validate_name(&self.name).map_err(|e| FieldError::new("name", e))?;
        if self.base_encoder.trim().is_empty() {
            return Err(FieldError::new("base_encoder", "is required"));
        }
        existing("queries", &self.queries, "the queries file")?;
        for (i, v) in self.variants.iter().enumerate() {
            existing(&format!("variants[{i}]"), v, "a variant file")?;
        }
        let has_noise = noise_kinds("noise", &self.noise)?;
        if self.word_queries.unwrap_or(0) > 0 && !has_noise {
            return Err(FieldError::new(
                "word_queries",
                "word queries need noise kinds (\"noise\"): they have no variant files",
            ));
        }
        if self.variants.is_empty() && !has_noise {
            return Err(FieldError::new(
                "variants",
                "no noisy positives: give variant files and/or noise kinds (\"noise\")",
            ));
        }
        self.objective
            .parse::<Objective>()
            .map_err(|e| FieldError::new("objective", e.to_string()))?;
        if let Some(index) = &self.index {
            existing("index", index, "the index directory")?;
        }
        if self.epochs.is_some() && self.steps.is_some() {
            return Err(FieldError::new(
                "steps",
                "give either steps or epochs, not both",
            ));
        }
        positive("epochs", self.epochs)?;
        positive("steps", self.steps)?;
        positive("batch_size", self.batch_size)?;
        positive("positives", self.positives)?;
        positive("rank_k", self.rank_k)?;
        positive("threads", self.threads)?;
        positive("checkpoint_every", self.checkpoint_every)?;
        if let Some(m) = self.max_length {
            if m < 3 {
                return Err(FieldError::new("max_length", "must be at least 3 tokens"));
            }
        }
        finite("lr", self.lr, true)?;
        if let Some(s) = &self.lr_schedule {
            s.parse::<crate::align::LrDecay>()
                .map_err(|e| FieldError::new("lr_schedule", e))?;
        }
        if let Some(s) = &self.decay_to {
            s.parse::<crate::align::DecayTarget>()
                .map_err(|e| FieldError::new("decay_to", e))?;
        }
        finite("weight_decay", self.weight_decay, false)?;
        finite("nce_temperature", self.nce_temperature, true)?;
        finite("rank_temperature", self.rank_temperature, true)?;
        for (field, v) in [
            ("tau_pos", self.tau_pos),
            ("tau_neg", self.tau_neg),
            ("tau_anchor", self.tau_anchor),
            ("tau_rank", self.tau_rank),
            ("margin", self.margin),
            ("rank_margin", self.rank_margin),
        ] {
            finite(field, v, false)?;
        }
        if let Some(d) = &self.device {
            d.parse::<TrainDevice>()
                .map_err(|e| FieldError::new("device", e.to_string()))?;
        }
        if let Some(v) = &self.version {
            if v.trim().is_empty() || v.len() > 64 {
                return Err(FieldError::new("version", "must be 1-64 characters"));
            }
        }
        if let Some(q) = &self.quantize {
            if !matches!(q.as_str(), "int8" | "int8-7bit") {
                return Err(FieldError::new(
                    "quantize",
                    format!("{q:?} is not a precision: expected \"int8\" or \"int8-7bit\""),
                ));
            }
        }
        if let Some(e) = &self.eval {
            existing("eval.dataset", &e.dataset, "the evaluation dataset")?;
            if !e.dataset.is_dir() {
                return Err(FieldError::new(
                    "eval.dataset",
                    format!("{} is not a dataset directory", e.dataset.display()),
                ));
            }
            for (i, v) in e.variants.iter().enumerate() {
                existing(&format!("eval.variants[{i}]"), v, "a variant file")?;
            }
            let has_noise = noise_kinds("eval.noise", &e.noise)?;
            if e.variants.is_empty() && !has_noise {
                return Err(FieldError::new(
                    "eval.variants",
                    "the evaluation needs noisy conditions: variant files and/or noise kinds",
                ));
            }
            if let Some(s) = e.seeds {
                if !(1..=100).contains(&s) {
                    return Err(FieldError::new("eval.seeds", "must be between 1 and 100"));
                }
            }
        }
        if let Some(p) = &self.promote {
            validate_name(&p.alias).map_err(|e| {
                FieldError::new("promote.alias", e.replace("encoder name", "alias name"))
            })?;
            if self.eval.is_none() {
                return Err(FieldError::new(
                    "promote",
                    "promotion is decided by the evaluation: give \"eval\" too",
                ));
            }
            let g = p.require;
            if !g.min_noisy_gain.is_finite() {
                return Err(FieldError::new(
                    "promote.require.min_noisy_gain",
                    "must be a finite number",
                ));
            }
            if !g.max_clean_drop.is_finite() || g.max_clean_drop < 0.0 {
                return Err(FieldError::new(
                    "promote.require.max_clean_drop",
                    "must be a number ≥ 0",
                ));
            }
        }
        Ok(())
    }

    /// Whether the objective needs the frozen index.
    pub fn needs_index(&self) -> bool {
        self.objective
            .parse::<Objective>()
            .map(|o| o.weight(ObjectiveKind::Ranking) > 0.0)
            .unwrap_or(false)
    }

    /// The `capot align` arguments (after the binary) that train into `out`, with progress as
    /// JSON lines and checkpoints in `checkpoint_dir`; `resume` continues from it.
    pub fn align_args(
        &self,
        base_bundle: &Path,
        served_index: &Path,
        out: &Path,
        checkpoint_dir: &Path,
        resume: bool,
    ) -> Vec<String> {
        let mut a: Vec<String> = vec!["align".into()];
        let mut flag = |name: &str, value: String| {
            a.push(format!("--{name}"));
            a.push(value);
        };
        flag("base", base_bundle.display().to_string());
        flag("queries", self.queries.display().to_string());
        for v in &self.variants {
            flag("variants", v.display().to_string());
        }
        if let Some(n) = &self.noise {
            flag("noise", n.joined());
        }
        flag("objective", self.objective.clone());
        match &self.index {
            Some(i) => flag("index", i.display().to_string()),
            None if self.needs_index() => flag("index", served_index.display().to_string()),
            None => {}
        }
        flag("out", out.display().to_string());
        flag("name", self.name.clone());
        flag("checkpoint-dir", checkpoint_dir.display().to_string());
        flag("progress", "json".into());
        let usizes = [
            ("epochs", self.epochs),
            ("steps", self.steps),
            ("batch-size", self.batch_size),
            ("positives", self.positives),
            ("max-length", self.max_length),
            ("warmup-steps", self.warmup_steps),
            ("word-queries", self.word_queries),
            ("rank-k", self.rank_k),
            ("threads", self.threads),
            ("checkpoint-every", self.checkpoint_every),
        ];
        for (name, v) in usizes {
            if let Some(v) = v {
                flag(name, v.to_string());
            }
        }
        let floats = [
            ("lr", self.lr),
            ("weight-decay", self.weight_decay),
            ("tau-pos", self.tau_pos),
            ("tau-neg", self.tau_neg),
            ("tau-anchor", self.tau_anchor),
            ("tau-rank", self.tau_rank),
            ("margin", self.margin),
            ("rank-margin", self.rank_margin),
            ("nce-temperature", self.nce_temperature),
            ("rank-temperature", self.rank_temperature),
        ];
        for (name, v) in floats {
            if let Some(v) = v {
                flag(name, v.to_string());
            }
        }
        if let Some(s) = self.seed {
            flag("seed", s.to_string());
        }
        if let Some(d) = &self.device {
            flag("device", d.clone());
        }
        if let Some(s) = &self.lr_schedule {
            flag("lr-schedule", s.clone());
        }
        if let Some(s) = &self.decay_to {
            flag("decay-to", s.clone());
        }
        if let Some(v) = &self.version {
            flag("encoder-version", v.clone());
        }
        if self.freeze_embeddings {
            a.push("--freeze-embeddings".into());
        }
        // A job owns its staging directory: a re-run replaces what an earlier attempt left.
        a.push("--force".into());
        if resume {
            a.push("--resume".into());
        }
        a
    }

    /// The `capot encoder quantize` arguments turning the aligned bundle at `aligned` into the
    /// job's int8 bundle at `out` (same name); `None` without `quantize`.
    pub fn quantize_args(&self, aligned: &Path, out: &Path) -> Option<Vec<String>> {
        let precision = self.quantize.as_deref()?;
        let mut a: Vec<String> = [
            "encoder",
            "quantize",
            &aligned.display().to_string(),
            "--out",
            &out.display().to_string(),
            "--name",
            &self.name,
            "--force",
        ]
        .map(String::from)
        .to_vec();
        if precision == "int8-7bit" {
            a.push("--reduce-range".into());
        }
        if let Some(t) = self.threads {
            a.extend(["--threads".into(), t.to_string()]);
        }
        Some(a)
    }

    /// The `capot eval` arguments comparing `base_bundle` with `candidate` on the served index;
    /// the report goes to `out` (report.json, report.md, report.svg).
    pub fn eval_args(
        &self,
        base_bundle: &Path,
        candidate: &Path,
        served_index: &Path,
        out: &Path,
    ) -> Option<Vec<String>> {
        let e = self.eval.as_ref()?;
        let mut a: Vec<String> = vec!["eval".into()];
        let mut flag = |name: &str, value: String| {
            a.push(format!("--{name}"));
            a.push(value);
        };
        flag("dataset", e.dataset.display().to_string());
        flag("index", served_index.display().to_string());
        flag("encoder", base_bundle.display().to_string());
        flag("encoder", candidate.display().to_string());
        for v in &e.variants {
            flag("variants", v.display().to_string());
        }
        if let Some(n) = &e.noise {
            flag("noise", n.joined());
        }
        if let Some(s) = e.seeds {
            flag("seeds", s.to_string());
        }
        if let Some(m) = e.repair {
            flag("repair", m.to_string());
        }
        if let Some(t) = self.threads {
            flag("threads", t.to_string());
        }
        flag("out", out.display().to_string());
        Some(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_is_validated_and_becomes_a_quantize_command() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spec(dir.path());
        assert_eq!(s.quantize_args(Path::new("a"), Path::new("b")), None);
        s.quantize = Some("int8-7bit".into());
        s.threads = Some(2);
        s.validate().unwrap();
        let args = s.quantize_args(Path::new("a"), Path::new("b")).unwrap();
        assert_eq!(
            args,
            [
                "encoder",
                "quantize",
                "a",
                "--out",
                "b",
                "--name",
                "minilm-typo",
                "--force",
                "--reduce-range",
                "--threads",
                "2"
            ]
        );
        s.quantize = Some("fp16".into());
        let e = s.validate().unwrap_err();
        assert_eq!(e.field, "quantize");
    }

    fn spec(dir: &Path) -> JobSpec {
        let q = dir.join("q.tsv");
        let v = dir.join("v.tsv");
        std::fs::write(&q, "q1\thello world\n").unwrap();
        std::fs::write(&v, "q1\thelo world\n").unwrap();
        serde_json::from_value(serde_json::json!({
            "name": "minilm-typo", "base_encoder": "minilm", "queries": q, "variants": [v],
            "steps": 10, "batch_size": 4,
        }))
        .unwrap()
    }

    fn field_of(s: &JobSpec) -> String {
        s.validate().unwrap_err().field
    }

    #[test]
    fn a_valid_spec_passes_and_bad_fields_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let ok = spec(dir.path());
        ok.validate().unwrap();

        let mut s = ok.clone();
        s.name = "bad name!".into();
        assert_eq!(field_of(&s), "name");
        let mut s = ok.clone();
        s.queries = dir.path().join("missing.tsv");
        assert_eq!(field_of(&s), "queries");
        let mut s = ok.clone();
        s.queries = PathBuf::from("relative.tsv");
        assert_eq!(field_of(&s), "queries");
        let mut s = ok.clone();
        s.variants.push(dir.path().join("nope.tsv"));
        assert_eq!(field_of(&s), "variants[1]");
        let mut s = ok.clone();
        s.variants.clear();
        assert_eq!(field_of(&s), "variants");
        s.noise = Some(NoiseList::Text("typos".into()));
        s.validate().unwrap();
        s.noise = Some(NoiseList::List(vec!["cd".into(), "nonsense".into()]));
        assert_eq!(field_of(&s), "noise");
        // What repair is judged on is not for training.
        s.noise = Some(NoiseList::Text("typo,misspell".into()));
        assert_eq!(field_of(&s), "noise");
        let mut s = ok.clone();
        s.objective = "magic".into();
        assert_eq!(field_of(&s), "objective");
        let mut s = ok.clone();
        s.epochs = Some(1);
        assert_eq!(field_of(&s), "steps");
        let mut s = ok.clone();
        s.batch_size = Some(0);
        assert_eq!(field_of(&s), "batch_size");
        let mut s = ok.clone();
        s.lr = Some(-1.0);
        assert_eq!(field_of(&s), "lr");
        let mut s = ok.clone();
        s.lr_schedule = Some("cosine".into());
        assert_eq!(field_of(&s), "lr_schedule");
        let mut s = ok.clone();
        s.word_queries = Some(100);
        assert_eq!(field_of(&s), "word_queries");
        let mut s = ok.clone();
        s.decay_to = Some("one".into());
        assert_eq!(field_of(&s), "decay_to");
        let mut s = ok.clone();
        s.device = Some("tpu".into());
        assert_eq!(field_of(&s), "device");
        let mut s = ok.clone();
        s.promote = Some(PromoteSpec {
            alias: "typo".into(),
            require: Gate::default(),
        });
        assert_eq!(field_of(&s), "promote");
        s.eval = Some(EvalSpec {
            dataset: dir.path().to_path_buf(),
            variants: vec![],
            noise: Some(NoiseList::Text("typo".into())),
            seeds: None,
            repair: None,
        });
        s.validate().unwrap();
        s.promote.as_mut().unwrap().require.max_clean_drop = -0.5;
        assert_eq!(field_of(&s), "promote.require.max_clean_drop");
        s.promote.as_mut().unwrap().require.max_clean_drop = 0.01;
        s.promote.as_mut().unwrap().alias = "".into();
        assert_eq!(field_of(&s), "promote.alias");
        s.promote = None;
        s.eval.as_mut().unwrap().noise = None;
        assert_eq!(field_of(&s), "eval.variants");
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let err = serde_json::from_value::<JobSpec>(serde_json::json!({
            "name": "x", "base_encoder": "b", "queries": "/q", "stepz": 3,
        }))
        .unwrap_err();
        assert!(err.to_string().contains("stepz"), "{err}");
    }

    #[test]
    fn command_lines_carry_every_given_flag() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spec(dir.path());
        s.lr = Some(1e-4);
        s.warmup_steps = Some(5);
        s.lr_schedule = Some("linear".into());
        s.decay_to = Some("base".into());
        s.word_queries = Some(500);
        s.freeze_embeddings = true;
        s.objective = "capot=1,ranking=0.5".into();
        let a = s.align_args(
            Path::new("/b"),
            Path::new("/idx"),
            Path::new("/out"),
            Path::new("/ck"),
            true,
        );
        let joined = a.join(" ");
        for part in [
            "align --base /b",
            "--steps 10",
            "--batch-size 4",
            "--lr 0.0001",
            "--warmup-steps 5",
            "--lr-schedule linear",
            "--decay-to base",
            "--word-queries 500",
            "--index /idx",
            "--out /out --name minilm-typo --checkpoint-dir /ck --progress json",
            "--freeze-embeddings",
            "--force --resume",
        ] {
            assert!(joined.contains(part), "{part:?} not in {joined}");
        }
        assert!(s
            .eval_args(
                Path::new("/b"),
                Path::new("/c"),
                Path::new("/i"),
                Path::new("/o")
            )
            .is_none());
        s.eval = Some(EvalSpec {
            dataset: PathBuf::from("/d"),
            variants: vec![PathBuf::from("/v1")],
            noise: None,
            seeds: Some(2),
            repair: Some(crate::repair::RepairMode::On),
        });
        let e = s
            .eval_args(
                Path::new("/b"),
                Path::new("/c"),
                Path::new("/i"),
                Path::new("/o"),
            )
            .unwrap()
            .join(" ");
        assert_eq!(
            e,
            "eval --dataset /d --index /i --encoder /b --encoder /c --variants /v1 --seeds 2 --repair on --out /o"
        );
    }
}
