//! Robustness report: per encoder, per query condition (clean, each noise
//! kind, each variant file, mean rows), the retrieval metrics, their
//! relative change against the encoder's own clean row, the clean/variant
//! embedding similarity and the query counts.
//!
//! The JSON form is described by [`SCHEMA_MD`] (a Markdown section meant for
//! `docs/`); [`Report::to_markdown`] renders the human tables with the
//! encoders side by side, and [`super::chart`] draws the SVG chart.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::metrics::{relative_change, CosineStats, Evaluation, Metric, MetricSet};
use super::EvalError;

/// Version of the JSON schema written by [`Report::to_json`].
pub const SCHEMA_VERSION: u32 = 1;

/// Name of the clean condition.
pub const CLEAN: &str = "clean";

/// The JSON schema of a report, as Markdown (move into `docs/`).
pub const SCHEMA_MD: &str = r#"## Evaluation report JSON (schema_version 1)

A report is one JSON object. Every key below is always present; values that do
not apply are `null` (or `[]`). Numbers are plain decimals in [0, 1] for
metrics, fractions for relative changes (−0.104 = −10.4%).

```json
{
  "schema_version": 1,
  "dataset": "dl19-sample",
  "meta": {"split": "test"},
  "encoders": [
    {
      "name": "minilm",
      "version": "1",
      "conditions": [
        {
          "condition": "clean",
          "kind": "clean",
          "members": [],
          "metrics": {"ndcg@10": 0.65, "mrr@10": 0.8, "recall@10": 0.2,
                      "recall@100": 0.5, "map": 0.4},
          "std_dev": null,
          "relative_change": null,
          "mean_cosine": null,
          "adjusted_cosine": null,
          "queries_evaluated": 43,
          "queries_excluded": 7
        },
        {
          "condition": "typo1",
          "kind": "variant_file",
          "members": [],
          "metrics": {"ndcg@10": 0.58, "...": 0},
          "std_dev": null,
          "relative_change": {"ndcg@10": -0.104, "mrr@10": -0.05,
                              "recall@10": -0.1, "recall@100": -0.08, "map": -0.12},
          "mean_cosine": 0.81,
          "adjusted_cosine": 0.62,
          "queries_evaluated": 43,
          "queries_excluded": 0
        }
      ]
    }
  ]
}
```

| key | type | meaning |
|---|---|---|
| `schema_version` | integer | 1; bumped on any incompatible change |
| `dataset` | string | dataset name or path |
| `meta` | object of strings | free-form context (split, index, date, commit) |
| `encoders[].name`, `.version` | string | query encoder evaluated |
| `conditions[].condition` | string | `clean`, a noise kind (`typo`, `cd`, ...), a variant file name (`typo1`), or a mean row label (`typo-files mean`, `typo mean over seeds`) |
| `conditions[].kind` | string | `clean`, `noise` (generated), `variant_file` (read from a file), `mean` (average of other rows) |
| `conditions[].members` | array of strings | for `mean` rows, the conditions averaged; else `[]` |
| `conditions[].metrics` | object | `ndcg@10`, `mrr@10`, `recall@10`, `recall@100`, `map`: mean over evaluated queries (for `mean` rows, the mean of the members' means) |
| `conditions[].std_dev` | object or null | `mean` rows: sample standard deviation of the members' metrics; else null |
| `conditions[].relative_change` | object or null | per metric `(value − clean) / clean` against the same encoder's `clean` row; null for the clean row, when there is no clean row; a metric is null where clean is 0 |
| `conditions[].mean_cosine` | number or null | mean cosine between each clean query vector and its variant's vector; null for clean |
| `conditions[].adjusted_cosine` | number or null | `(mean_cosine − μ) / (1 − μ)`, μ = mean cosine between different clean queries |
| `conditions[].queries_evaluated` | integer | queries with qrels scored (for `mean` rows: summed over members) |
| `conditions[].queries_excluded` | integer | queries without qrels left out (for `mean` rows: summed) |

Metric conventions (trec_eval): linear-gain nDCG with `log2(rank+1)`
discount and the ideal from all judged documents; relevance = gain ≥ 1;
score ties broken by document id descending; queries without qrels excluded;
queries whose judgements are all 0 score 0 and count.
"#;

/// What a condition row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConditionKind {
    /// The original queries.
    Clean,
    /// Queries noised by a generator (`typo`, `cd`, `reorder`, ...).
    Noise,
    /// Queries read from a variant file (`typo1`, a paraphrase file, ...).
    VariantFile,
    /// Average of other rows.
    Mean,
}

/// Relative change per metric; `None` where undefined (clean value 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RelativeChange {
    /// nDCG@10.
    #[serde(rename = "ndcg@10")]
    pub ndcg_at_10: Option<f64>,
    /// MRR@10.
    #[serde(rename = "mrr@10")]
    pub mrr_at_10: Option<f64>,
    /// Recall@10.
    #[serde(rename = "recall@10")]
    pub recall_at_10: Option<f64>,
    /// Recall@100.
    #[serde(rename = "recall@100")]
    pub recall_at_100: Option<f64>,
    /// MAP.
    #[serde(rename = "map")]
    pub map: Option<f64>,
}

impl RelativeChange {
    /// Relative change of `noisy` against `clean`, metric by metric.
    pub fn between(clean: &MetricSet, noisy: &MetricSet) -> Self {
        let f = |m: Metric| {
            let v = relative_change(clean.get(m), noisy.get(m));
            v.is_finite().then_some(v)
        };
        RelativeChange {
            ndcg_at_10: f(Metric::NdcgAt10),
            mrr_at_10: f(Metric::MrrAt10),
            recall_at_10: f(Metric::RecallAt10),
            recall_at_100: f(Metric::RecallAt100),
            map: f(Metric::Map),
        }
    }

    /// Value for one metric.
    pub fn get(&self, metric: Metric) -> Option<f64> {
        match metric {
            Metric::NdcgAt10 => self.ndcg_at_10,
            Metric::MrrAt10 => self.mrr_at_10,
            Metric::RecallAt10 => self.recall_at_10,
            Metric::RecallAt100 => self.recall_at_100,
            Metric::Map => self.map,
        }
    }
}

/// One row: an encoder under one query condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionReport {
    /// Condition name (`clean`, `typo`, `typo1`, `typo-files mean`, ...).
    pub condition: String,
    /// Row kind.
    pub kind: ConditionKind,
    /// Conditions averaged (mean rows only).
    pub members: Vec<String>,
    /// Mean metrics.
    pub metrics: MetricSet,
    /// Spread across members (mean rows only).
    pub std_dev: Option<MetricSet>,
    /// Change against the encoder's clean row.
    pub relative_change: Option<RelativeChange>,
    /// Mean clean/variant cosine.
    pub mean_cosine: Option<f64>,
    /// Anisotropy-adjusted cosine.
    pub adjusted_cosine: Option<f64>,
    /// Queries scored.
    pub queries_evaluated: usize,
    /// Queries without qrels left out.
    pub queries_excluded: usize,
}

impl ConditionReport {
    /// A row from an evaluation and, for noisy conditions, the embedding
    /// similarity to the clean queries.
    pub fn new(
        condition: impl Into<String>,
        kind: ConditionKind,
        evaluation: &Evaluation,
        cosine: Option<&CosineStats>,
    ) -> Self {
        ConditionReport {
            condition: condition.into(),
            kind,
            members: Vec::new(),
            metrics: evaluation.mean,
            std_dev: None,
            relative_change: None,
            mean_cosine: cosine.map(|c| c.mean_cosine).filter(|v| v.is_finite()),
            adjusted_cosine: cosine.and_then(|c| c.adjusted_cosine),
            queries_evaluated: evaluation.num_evaluated(),
            queries_excluded: evaluation.num_excluded(),
        }
    }
}

/// All rows of one query encoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncoderReport {
    /// Encoder name.
    pub name: String,
    /// Encoder version.
    pub version: String,
    /// Rows in insertion order.
    pub conditions: Vec<ConditionReport>,
}

/// Label of the mean over the variant files of one family:
/// `files_mean_label("typo")` = `"typo-files mean"`.
pub fn files_mean_label(family: &str) -> String {
    format!("{family}-files mean")
}

/// Label of the mean of one noise kind over seeds:
/// `seeds_mean_label("cd")` = `"cd mean over seeds"`.
pub fn seeds_mean_label(kind: &str) -> String {
    format!("{kind} mean over seeds")
}

impl EncoderReport {
    /// An encoder with no rows yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        EncoderReport {
            name: name.into(),
            version: version.into(),
            conditions: Vec::new(),
        }
    }

    /// Display name: `name@version` (or `name` when the version is empty).
    pub fn display_name(&self) -> String {
        if self.version.is_empty() {
            self.name.clone()
        } else {
            format!("{}@{}", self.name, self.version)
        }
    }

    /// Row by condition name.
    pub fn get(&self, condition: &str) -> Option<&ConditionReport> {
        self.conditions.iter().find(|c| c.condition == condition)
    }

    /// The clean row, if any.
    pub fn clean(&self) -> Option<&ConditionReport> {
        self.conditions
            .iter()
            .find(|c| c.kind == ConditionKind::Clean)
    }

    /// Adds (or replaces, by name) a row, then refreshes relative changes.
    pub fn push(&mut self, row: ConditionReport) -> &ConditionReport {
        let idx = match self
            .conditions
            .iter()
            .position(|c| c.condition == row.condition)
        {
            Some(i) => {
                self.conditions[i] = row;
                i
            }
            None => {
                self.conditions.push(row);
                self.conditions.len() - 1
            }
        };
        self.update_relative_changes();
        &self.conditions[idx]
    }

    /// Adds a row from an evaluation (see [`ConditionReport::new`]).
    pub fn add(
        &mut self,
        condition: impl Into<String>,
        kind: ConditionKind,
        evaluation: &Evaluation,
        cosine: Option<&CosineStats>,
    ) -> &ConditionReport {
        self.push(ConditionReport::new(condition, kind, evaluation, cosine))
    }

    /// Adds a mean row over existing rows: metrics and cosines are averaged
    /// (cosines over the members that have one), `std_dev` is their sample
    /// standard deviation, query counts are summed.
    pub fn add_mean(
        &mut self,
        label: impl Into<String>,
        members: &[&str],
    ) -> Result<&ConditionReport, EvalError> {
        let label = label.into();
        if members.is_empty() {
            return Err(EvalError::EmptyMean { label });
        }
        let mut rows = Vec::with_capacity(members.len());
        for m in members {
            let row = self.get(m).ok_or_else(|| EvalError::UnknownCondition {
                encoder: self.name.clone(),
                condition: m.to_string(),
            })?;
            rows.push(row);
        }
        let metrics: Vec<MetricSet> = rows.iter().map(|r| r.metrics).collect();
        let mean_of = |vals: Vec<f64>| {
            (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
        };
        let row = ConditionReport {
            condition: label,
            kind: ConditionKind::Mean,
            members: members.iter().map(|m| m.to_string()).collect(),
            metrics: MetricSet::mean(&metrics),
            std_dev: Some(MetricSet::std_dev(&metrics)),
            relative_change: None,
            mean_cosine: mean_of(rows.iter().filter_map(|r| r.mean_cosine).collect()),
            adjusted_cosine: mean_of(rows.iter().filter_map(|r| r.adjusted_cosine).collect()),
            queries_evaluated: rows.iter().map(|r| r.queries_evaluated).sum(),
            queries_excluded: rows.iter().map(|r| r.queries_excluded).sum(),
        };
        Ok(self.push(row))
    }

    /// Recomputes every row's change against the clean row (none without
    /// a clean row).
    pub fn update_relative_changes(&mut self) {
        let clean = self.clean().map(|c| c.metrics);
        for row in &mut self.conditions {
            row.relative_change = match (&clean, row.kind) {
                (_, ConditionKind::Clean) | (None, _) => None,
                (Some(c), _) => Some(RelativeChange::between(c, &row.metrics)),
            };
        }
    }
}

/// A robustness report over several encoders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Dataset name or path.
    pub dataset: String,
    /// Free-form context.
    pub meta: std::collections::BTreeMap<String, String>,
    /// Encoders in display order.
    pub encoders: Vec<EncoderReport>,
}

impl Report {
    /// An empty report for a dataset.
    pub fn new(dataset: impl Into<String>) -> Self {
        Report {
            schema_version: SCHEMA_VERSION,
            dataset: dataset.into(),
            meta: Default::default(),
            encoders: Vec::new(),
        }
    }

    /// The encoder with this name and version, added when absent.
    pub fn encoder_mut(&mut self, name: &str, version: &str) -> &mut EncoderReport {
        let idx = match self
            .encoders
            .iter()
            .position(|e| e.name == name && e.version == version)
        {
            Some(i) => i,
            None => {
                self.encoders.push(EncoderReport::new(name, version));
                self.encoders.len() - 1
            }
        };
        &mut self.encoders[idx]
    }

    /// Condition names across encoders, in first-seen order (clean first).
    pub fn condition_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for e in &self.encoders {
            for c in &e.conditions {
                if !names.contains(&c.condition) {
                    names.push(c.condition.clone());
                }
            }
        }
        let is_clean = |n: &String| {
            self.encoders
                .iter()
                .any(|e| e.get(n).is_some_and(|c| c.kind == ConditionKind::Clean))
        };
        let (mut clean, rest): (Vec<String>, Vec<String>) = names.into_iter().partition(is_clean);
        clean.extend(rest);
        clean
    }

    /// Pretty JSON (see [`SCHEMA_MD`]).
    pub fn to_json(&self) -> Result<String, EvalError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Parses a report written by [`Report::to_json`].
    pub fn from_json(s: &str) -> Result<Self, EvalError> {
        Ok(serde_json::from_str(s)?)
    }

    /// Writes the JSON to a file.
    pub fn write_json(&self, path: &Path) -> Result<(), EvalError> {
        std::fs::write(path, self.to_json()? + "\n").map_err(|source| EvalError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Markdown: one table per metric with the encoders side by side (cell:
    /// value, `±sd` for mean rows, relative change vs clean), then the
    /// embedding similarity and the query counts.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# Retrieval robustness: {}\n",
            md_escape(&self.dataset)
        );
        if !self.meta.is_empty() {
            for (k, v) in &self.meta {
                let _ = writeln!(out, "- {}: {}", md_escape(k), md_escape(v));
            }
            out.push('\n');
        }
        if self.encoders.is_empty() {
            out.push_str("No encoders evaluated.\n");
            return out;
        }
        out.push_str(
            "Means over the queries evaluated. In brackets: relative change against the \
             same encoder's clean queries. `±` is the standard deviation across the rows a \
             mean row averages.\n",
        );
        let conditions = self.condition_names();
        let header = |out: &mut String, first: &str| {
            let _ = write!(out, "| {first} |");
            for e in &self.encoders {
                let _ = write!(out, " {} |", md_escape(&e.display_name()));
            }
            out.push_str("\n|---|");
            for _ in &self.encoders {
                out.push_str("---:|");
            }
            out.push('\n');
        };
        for metric in Metric::ALL {
            let _ = writeln!(out, "\n## {}\n", metric.label());
            header(&mut out, "condition");
            for cond in &conditions {
                let _ = write!(out, "| {} |", md_escape(cond));
                for e in &self.encoders {
                    let cell = match e.get(cond) {
                        None => "–".to_string(),
                        Some(row) => metric_cell(row, metric),
                    };
                    let _ = write!(out, " {cell} |");
                }
                out.push('\n');
            }
        }
        self.write_against_first(&mut out, &conditions);
        let has_cos = self
            .encoders
            .iter()
            .flat_map(|e| &e.conditions)
            .any(|c| c.mean_cosine.is_some());
        if has_cos {
            out.push_str(
                "\n## Query embedding similarity\n\nMean cosine between each clean query and \
                 its variant; `adj` = (cos − μ)/(1 − μ), μ the mean cosine between different \
                 clean queries.\n\n",
            );
            header(&mut out, "condition");
            for cond in conditions.iter() {
                let rows: Vec<Option<&ConditionReport>> =
                    self.encoders.iter().map(|e| e.get(cond)).collect();
                if rows.iter().flatten().all(|r| r.mean_cosine.is_none()) {
                    continue;
                }
                let _ = write!(out, "| {} |", md_escape(cond));
                for row in rows {
                    let cell = match row.and_then(|r| r.mean_cosine.map(|c| (c, r.adjusted_cosine)))
                    {
                        None => "–".to_string(),
                        Some((c, Some(a))) => format!("{c:.3} (adj {a:.3})"),
                        Some((c, None)) => format!("{c:.3}"),
                    };
                    let _ = write!(out, " {cell} |");
                }
                out.push('\n');
            }
        }
        out.push_str("\n## Queries evaluated\n\nEvaluated (excluded for lack of qrels); mean rows sum over their members.\n\n");
        header(&mut out, "condition");
        for cond in &conditions {
            let _ = write!(out, "| {} |", md_escape(cond));
            for e in &self.encoders {
                let cell = match e.get(cond) {
                    None => "–".to_string(),
                    Some(r) if r.queries_excluded > 0 => {
                        format!("{} ({} excl.)", r.queries_evaluated, r.queries_excluded)
                    }
                    Some(r) => r.queries_evaluated.to_string(),
                };
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
        out
    }
}

impl Report {
    /// The alignment view of a comparison: each later encoder against the first (the base) on
    /// nDCG@10 — clean as a relative change, noisy conditions as the share of the first
    /// encoder's clean→noisy loss won back (the number an alignment is judged by).
    fn write_against_first(&self, out: &mut String, conditions: &[String]) {
        let [first, rest @ ..] = self.encoders.as_slice() else {
            return;
        };
        if rest.is_empty() {
            return;
        }
        let Some(first_clean) = first.clean().map(|r| r.metrics.ndcg_at_10) else {
            return;
        };
        let _ = writeln!(
            out,
            "\n## Against {} (nDCG@10)\n\nClean: relative change against its clean nDCG@10. \
             Other rows: the share of its clean→noisy loss won back, (nDCG@10 − its) / (its \
             clean − its); `–` where it lost nothing.\n",
            md_escape(&first.display_name())
        );
        let _ = write!(out, "| condition |");
        for e in rest {
            let _ = write!(out, " {} |", md_escape(&e.display_name()));
        }
        out.push_str("\n|---|");
        for _ in rest {
            out.push_str("---:|");
        }
        out.push('\n');
        for cond in conditions {
            let _ = write!(out, "| {} |", md_escape(cond));
            for e in rest {
                let cell = match (first.get(cond), e.get(cond)) {
                    (Some(_), Some(r)) if r.kind == ConditionKind::Clean && first_clean > 0.0 => {
                        format_percent(r.metrics.ndcg_at_10 / first_clean - 1.0)
                    }
                    (Some(f), Some(r)) if r.kind != ConditionKind::Clean => {
                        let lost = first_clean - f.metrics.ndcg_at_10;
                        if lost > 0.0 {
                            format!(
                                "{:+.0}%",
                                100.0 * (r.metrics.ndcg_at_10 - f.metrics.ndcg_at_10) / lost
                            )
                        } else {
                            "–".to_string()
                        }
                    }
                    _ => "–".to_string(),
                };
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
    }
}

fn metric_cell(row: &ConditionReport, metric: Metric) -> String {
    let v = row.metrics.get(metric);
    let mut cell = if v.is_finite() {
        format!("{v:.4}")
    } else {
        "n/a".to_string()
    };
    if let Some(sd) = row.std_dev {
        let s = sd.get(metric);
        if s.is_finite() {
            let _ = write!(cell, " ±{s:.4}");
        }
    }
    if let Some(rc) = row.relative_change.and_then(|rc| rc.get(metric)) {
        let _ = write!(cell, " ({})", format_percent(rc));
    }
    cell
}

/// Formats a fraction as a signed percentage: `-0.104` → `-10.4%`.
pub fn format_percent(fraction: f64) -> String {
    if !fraction.is_finite() {
        return "n/a".to_string();
    }
    let p = fraction * 100.0;
    // Avoid "-0.0%".
    let p = if p.abs() < 0.05 { 0.0 } else { p };
    format!("{p:+.1}%")
}

/// Escapes text for a Markdown table cell.
fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '|' => out.push_str("\\|"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::eval::metrics::{CosineStats, Evaluation};

    fn eval_with(ndcg: f64, mrr: f64, n: usize, excluded: usize) -> Evaluation {
        let mut e = Evaluation::default();
        for i in 0..n {
            e.per_query.insert(format!("q{i}"), MetricSet::default());
        }
        e.excluded_no_qrels = (0..excluded).map(|i| format!("x{i}")).collect();
        e.mean = MetricSet {
            ndcg_at_10: ndcg,
            mrr_at_10: mrr,
            recall_at_10: 0.2,
            recall_at_100: 0.5,
            map: 0.4,
        };
        e
    }

    fn cos(c: f64, mu: f64) -> CosineStats {
        CosineStats {
            mean_cosine: c,
            adjusted_cosine: crate::eval::metrics::adjusted_cosine(c, mu),
            anisotropy: mu,
            pairs: 43,
        }
    }

    /// Two encoders, clean + two typo files + mean + a noise kind.
    pub(crate) fn sample_report() -> Report {
        let mut r = Report::new("dl19-sample");
        r.meta.insert("split".into(), "test".into());
        let base = r.encoder_mut("minilm", "1");
        base.add(
            CLEAN,
            ConditionKind::Clean,
            &eval_with(0.5, 0.8, 43, 7),
            None,
        );
        base.add(
            "typo1",
            ConditionKind::VariantFile,
            &eval_with(0.448, 0.6, 43, 0),
            Some(&cos(0.8, 0.2)),
        );
        base.add(
            "typo2",
            ConditionKind::VariantFile,
            &eval_with(0.40, 0.7, 43, 0),
            Some(&cos(0.7, 0.2)),
        );
        base.add_mean(files_mean_label("typo"), &["typo1", "typo2"])
            .unwrap();
        let capot = r.encoder_mut("minilm-capot", "2");
        capot.add(
            CLEAN,
            ConditionKind::Clean,
            &eval_with(0.49, 0.79, 43, 7),
            None,
        );
        capot.add(
            "typo1",
            ConditionKind::VariantFile,
            &eval_with(0.47, 0.7, 43, 0),
            Some(&cos(0.9, 0.2)),
        );
        capot.add(
            "cd | <&>",
            ConditionKind::Noise,
            &eval_with(0.45, 0.7, 43, 0),
            None,
        );
        r
    }

    #[test]
    fn relative_changes_and_means() {
        let r = sample_report();
        let base = &r.encoders[0];
        let t1 = base.get("typo1").unwrap();
        let rc = t1.relative_change.unwrap();
        assert!((rc.ndcg_at_10.unwrap() - -0.104).abs() < 1e-12);
        assert_eq!(format_percent(rc.ndcg_at_10.unwrap()), "-10.4%");
        assert!(base.clean().unwrap().relative_change.is_none());
        let m = base.get("typo-files mean").unwrap();
        assert_eq!(m.kind, ConditionKind::Mean);
        assert_eq!(m.members, ["typo1", "typo2"]);
        assert!((m.metrics.ndcg_at_10 - 0.424).abs() < 1e-12);
        assert!((m.mean_cosine.unwrap() - 0.75).abs() < 1e-12);
        // adj(0.8)=0.75, adj(0.7)=0.625 → mean 0.6875 = adj(0.75).
        assert!((m.adjusted_cosine.unwrap() - 0.6875).abs() < 1e-12);
        assert_eq!(m.queries_evaluated, 86);
        let sd = m.std_dev.unwrap();
        // Sample sd of 0.448 and 0.400: |diff|/√2 = 0.048/√2.
        assert!((sd.ndcg_at_10 - 0.048 / 2f64.sqrt()).abs() < 1e-12);
        assert!((m.relative_change.unwrap().ndcg_at_10.unwrap() - -0.152).abs() < 1e-12);
        // Unknown member and empty mean are errors.
        let mut e = base.clone();
        assert!(matches!(
            e.add_mean("x", &["nope"]),
            Err(EvalError::UnknownCondition { .. })
        ));
        assert!(matches!(
            e.add_mean("x", &[]),
            Err(EvalError::EmptyMean { .. })
        ));
        // Replacing clean refreshes every change.
        e.add(
            CLEAN,
            ConditionKind::Clean,
            &eval_with(0.448, 0.6, 43, 7),
            None,
        );
        assert_eq!(
            e.get("typo1").unwrap().relative_change.unwrap().ndcg_at_10,
            Some(0.0)
        );
    }

    #[test]
    fn zero_clean_gives_null_change() {
        let mut e = EncoderReport::new("z", "");
        e.add(
            CLEAN,
            ConditionKind::Clean,
            &eval_with(0.0, 0.0, 1, 0),
            None,
        );
        e.add("n", ConditionKind::Noise, &eval_with(0.1, 0.0, 1, 0), None);
        let rc = e.get("n").unwrap().relative_change.unwrap();
        assert_eq!(rc.ndcg_at_10, None);
        let json = serde_json::to_value(rc).unwrap();
        assert!(json["ndcg@10"].is_null());
        assert_eq!(e.display_name(), "z");
    }

    fn approx_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value::*;
        match (a, b) {
            (Number(x), Number(y)) => {
                let (x, y) = (
                    x.as_f64().unwrap_or(f64::NAN),
                    y.as_f64().unwrap_or(f64::NAN),
                );
                (x - y).abs() <= 1e-12 * x.abs().max(1.0)
            }
            (Array(x), Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| approx_eq(a, b))
            }
            (Object(x), Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .all(|(k, v)| y.get(k).is_some_and(|w| approx_eq(v, w)))
            }
            _ => a == b,
        }
    }

    #[test]
    fn json_schema_is_stable_and_round_trips() {
        let r = sample_report();
        let json = r.to_json().unwrap();
        let back = Report::from_json(&json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        // serde_json parses floats to within 1 ulp unless its
        // `float_roundtrip` feature is on: compare numbers approximately.
        assert!(approx_eq(&serde_json::to_value(&back).unwrap(), &v));
        assert_eq!(back.encoders[0].conditions[3].members, ["typo1", "typo2"]);
        assert_eq!(v["schema_version"], 1);
        let row = &v["encoders"][0]["conditions"][1];
        let mut keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "adjusted_cosine",
                "condition",
                "kind",
                "mean_cosine",
                "members",
                "metrics",
                "queries_evaluated",
                "queries_excluded",
                "relative_change",
                "std_dev",
            ]
        );
        assert_eq!(row["kind"], "variant_file");
        assert_eq!(row["metrics"]["ndcg@10"], 0.448);
        assert!(row["relative_change"]["recall@100"].is_number());
        // Every key the schema table documents appears in SCHEMA_MD.
        for k in keys {
            assert!(SCHEMA_MD.contains(&format!("`conditions[].{k}`")), "{k}");
        }
        assert!(Report::from_json("{").is_err());
    }

    #[test]
    fn markdown_puts_encoders_side_by_side() {
        let md = sample_report().to_markdown();
        assert!(
            md.contains("| condition | minilm@1 | minilm-capot@2 |"),
            "{md}"
        );
        assert!(md.contains("## nDCG@10"));
        assert!(md.contains("## MAP"));
        assert!(
            md.contains("| typo1 | 0.4480 (-10.4%) | 0.4700 (-4.1%) |"),
            "{md}"
        );
        assert!(
            md.contains("| typo-files mean | 0.4240 ±0.0339 (-15.2%) | – |"),
            "{md}"
        );
        assert!(md.contains("cd \\| <&>"), "{md}");
        // Against the first encoder: clean −2.0%; typo1 won back (0.47−0.448)/(0.5−0.448) = 42%.
        let against = md.split("## Against minilm@1 (nDCG@10)").nth(1).unwrap();
        assert!(against.contains("| condition | minilm-capot@2 |"), "{md}");
        assert!(against.contains("| clean | -2.0% |"), "{md}");
        assert!(against.contains("| typo1 | +42% |"), "{md}");
        assert!(against.contains("| typo2 | – |"), "{md}");
        assert!(md.contains("0.800 (adj 0.750)"));
        assert!(md.contains("| clean | 43 (7 excl.) | 43 (7 excl.) |"));
        // Clean row first in every table.
        let t = md.split("## nDCG@10").nth(1).unwrap();
        assert!(t.find("| clean |").unwrap() < t.find("| typo1 |").unwrap());
        assert!(Report::new("empty").to_markdown().contains("No encoders"));
    }
}
