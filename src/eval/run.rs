//! Running an evaluation: the conditions (clean, variant files, generated noise over seeds), the
//! systems under test ([`Retriever`]s: a local encoder + index, or a live server), the report.

use std::collections::BTreeMap;

use super::metrics::{anisotropy, evaluate, variant_cosine, DEFAULT_MAX_PAIRS};
use super::report::{files_mean_label, seeds_mean_label, ConditionKind, Report, CLEAN};
use super::EvalError;
use crate::dataset::{Qrels, Queries};
use crate::noise::{self, NoiseKind};

/// Ranked documents (id, score), best first, for one query.
pub type Ranking = Vec<(String, f32)>;

/// A system under evaluation: turns query texts into rankings and query vectors.
pub trait Retriever {
    /// Encoder name and version, as the report shows them.
    fn identity(&self) -> (String, String);
    /// Rankings of the top `k` documents and the query vectors, in input order.
    fn retrieve(
        &self,
        texts: &[String],
        k: usize,
    ) -> Result<(Vec<Ranking>, Vec<Vec<f32>>), EvalError>;
}

/// What to evaluate.
pub struct EvalPlan {
    /// Dataset label for the report.
    pub dataset: String,
    /// The clean queries (only those with qrels are evaluated).
    pub queries: Queries,
    pub qrels: Qrels,
    /// Variant files: (condition name, queries by the same ids).
    pub variant_files: Vec<(String, Queries)>,
    /// Noise generated on the fly.
    pub noise: Vec<NoiseKind>,
    /// Seeds per noise kind (0..seeds).
    pub seeds: u64,
    /// Depth of each ranking (≥ 100 for Recall@100).
    pub depth: usize,
    /// Texts per retrieval call.
    pub batch_size: usize,
}

/// Progress reporting, so the CLI can draw a bar without this module knowing how.
pub trait Progress {
    fn start(&self, encoder: &str, conditions: usize);
    fn condition_done(&self, condition: &str);
}

/// No progress output.
pub struct Quiet;
impl Progress for Quiet {
    fn start(&self, _: &str, _: usize) {}
    fn condition_done(&self, _: &str) {}
}

/// The family of a variant file name: `queries.typo3` → `typo`.
pub fn family_of(name: &str) -> String {
    let stem = name.strip_prefix("queries.").unwrap_or(name);
    stem.trim_end_matches(|c: char| c.is_ascii_digit())
        .trim_end_matches(['-', '_', '.'])
        .to_string()
}

impl EvalPlan {
    /// The evaluated queries: those with at least one judgement, in file order.
    fn judged(&self) -> Vec<(String, String)> {
        self.queries
            .queries()
            .iter()
            .filter(|q| self.qrels.get(&q.id).is_some_and(|j| !j.is_empty()))
            .map(|q| (q.id.clone(), q.text.clone()))
            .collect()
    }

    fn conditions(&self) -> usize {
        1 + self.variant_files.len() + self.noise.len() * self.seeds as usize
    }
}

fn retrieve_all(
    r: &dyn Retriever,
    texts: &[String],
    depth: usize,
    batch: usize,
) -> Result<(Vec<Ranking>, Vec<Vec<f32>>), EvalError> {
    let mut rankings = Vec::with_capacity(texts.len());
    let mut vectors = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(batch.max(1)) {
        let (r, v) = r.retrieve(chunk, depth)?;
        if r.len() != chunk.len() || v.len() != chunk.len() {
            return Err(EvalError::Retrieval(format!(
                "asked for {} queries, got {} rankings and {} vectors",
                chunk.len(),
                r.len(),
                v.len()
            )));
        }
        rankings.extend(r);
        vectors.extend(v);
    }
    Ok((rankings, vectors))
}

/// Evaluates every retriever under every condition of `plan`, side by side in one report.
pub fn run(
    plan: &EvalPlan,
    retrievers: &[&dyn Retriever],
    progress: &dyn Progress,
) -> Result<Report, EvalError> {
    let mut report = Report::new(plan.dataset.clone());
    let judged = plan.judged();
    if judged.is_empty() {
        return Err(EvalError::Retrieval(
            "no query has relevance judgements".into(),
        ));
    }
    let position: BTreeMap<&str, usize> = judged
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (id.as_str(), i))
        .collect();
    for r in retrievers {
        let (name, version) = r.identity();
        progress.start(&name, plan.conditions());
        let texts: Vec<String> = judged.iter().map(|(_, t)| t.clone()).collect();
        let (rankings, clean_vectors) = retrieve_all(*r, &texts, plan.depth, plan.batch_size)?;
        let runs: Vec<(&str, &Ranking)> = judged
            .iter()
            .map(|(id, _)| id.as_str())
            .zip(rankings.iter())
            .collect();
        let clean_eval = evaluate(runs, &plan.qrels);
        let mu = if clean_vectors.len() >= 2 {
            anisotropy(&clean_vectors, DEFAULT_MAX_PAIRS)?
        } else {
            0.0
        };
        let enc = report.encoder_mut(&name, &version);
        enc.add(CLEAN, ConditionKind::Clean, &clean_eval, None);
        progress.condition_done(CLEAN);

        // Variant files, then a mean per family of two or more files.
        let mut families: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (cond, variants) in &plan.variant_files {
            let pairs: Vec<(usize, String, String)> = variants
                .queries()
                .iter()
                .filter_map(|q| {
                    position
                        .get(q.id.as_str())
                        .map(|&i| (i, q.id.clone(), q.text.clone()))
                })
                .collect();
            if pairs.is_empty() {
                return Err(EvalError::Retrieval(format!(
                    "variant file {cond} has no query with relevance judgements"
                )));
            }
            let row = evaluate_variants(*r, plan, &pairs, &clean_vectors, mu)?;
            let enc = report.encoder_mut(&name, &version);
            enc.add(
                cond.clone(),
                ConditionKind::VariantFile,
                &row.0,
                Some(&row.1),
            );
            families
                .entry(family_of(cond))
                .or_default()
                .push(cond.clone());
            progress.condition_done(cond);
        }
        for (family, members) in &families {
            if members.len() >= 2 {
                let refs: Vec<&str> = members.iter().map(String::as_str).collect();
                report
                    .encoder_mut(&name, &version)
                    .add_mean(files_mean_label(family), &refs)?;
            }
        }

        // Generated noise: one condition per (kind, seed), and their mean when seeds > 1.
        for kind in &plan.noise {
            let mut members = Vec::new();
            for seed in 0..plan.seeds {
                let mut pairs = Vec::with_capacity(judged.len());
                for (i, (id, text)) in judged.iter().enumerate() {
                    let outcome = noise::apply(*kind, seed, id, 0, text)?;
                    pairs.push((i, id.clone(), outcome.text));
                }
                let cond = if plan.seeds == 1 {
                    kind.to_string()
                } else {
                    format!("{kind} seed {seed}")
                };
                let row = evaluate_variants(*r, plan, &pairs, &clean_vectors, mu)?;
                report.encoder_mut(&name, &version).add(
                    cond.clone(),
                    ConditionKind::Noise,
                    &row.0,
                    Some(&row.1),
                );
                progress.condition_done(&cond);
                members.push(cond);
            }
            if members.len() >= 2 {
                let refs: Vec<&str> = members.iter().map(String::as_str).collect();
                report
                    .encoder_mut(&name, &version)
                    .add_mean(seeds_mean_label(kind.as_str()), &refs)?;
            }
        }
    }
    Ok(report)
}

/// Retrieves variant queries and scores them; `pairs` are (clean position, id, variant text).
fn evaluate_variants(
    r: &dyn Retriever,
    plan: &EvalPlan,
    pairs: &[(usize, String, String)],
    clean_vectors: &[Vec<f32>],
    mu: f64,
) -> Result<(super::Evaluation, super::metrics::CosineStats), EvalError> {
    let texts: Vec<String> = pairs.iter().map(|(_, _, t)| t.clone()).collect();
    let (rankings, vectors) = retrieve_all(r, &texts, plan.depth, plan.batch_size)?;
    let runs: Vec<(&str, &Ranking)> = pairs
        .iter()
        .map(|(_, id, _)| id.as_str())
        .zip(rankings.iter())
        .collect();
    let evaluation = evaluate(runs, &plan.qrels);
    let indexed: Vec<(usize, &Vec<f32>)> = pairs
        .iter()
        .map(|(i, _, _)| *i)
        .zip(vectors.iter())
        .collect();
    let cos = variant_cosine(clean_vectors, &indexed, mu)?;
    Ok((evaluation, cos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Query;

    /// A retriever over a toy "corpus" where a query retrieves the documents sharing its first
    /// letter, and its vector is a one-hot of that letter: enough to check the bookkeeping.
    struct FirstLetter;
    impl Retriever for FirstLetter {
        fn identity(&self) -> (String, String) {
            ("first-letter".into(), "1".into())
        }
        fn retrieve(
            &self,
            texts: &[String],
            _k: usize,
        ) -> Result<(Vec<Ranking>, Vec<Vec<f32>>), EvalError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let c = t.chars().next().unwrap_or(' ');
                    let ranking = vec![(format!("doc-{c}"), 1.0)];
                    let mut v = vec![0f32; 27];
                    v[(c as usize).wrapping_sub('a' as usize).min(26)] = 1.0;
                    (ranking, v)
                })
                .unzip())
        }
    }

    fn plan() -> EvalPlan {
        let queries = Queries::from_queries(vec![
            Query {
                id: "1".into(),
                text: "apple pie".into(),
            },
            Query {
                id: "2".into(),
                text: "banana bread".into(),
            },
            Query {
                id: "3".into(),
                text: "cherry tart".into(),
            },
        ])
        .unwrap();
        let mut qrels = Qrels::new();
        qrels.insert("1".into(), [("doc-a".to_string(), 1)].into());
        qrels.insert("2".into(), [("doc-b".to_string(), 1)].into());
        // "3" has no qrels: not evaluated.
        let v1 = Queries::from_queries(vec![
            Query {
                id: "1".into(),
                text: "xapple pie".into(),
            },
            Query {
                id: "2".into(),
                text: "banana bread".into(),
            },
        ])
        .unwrap();
        let v2 = Queries::from_queries(vec![Query {
            id: "1".into(),
            text: "apple".into(),
        }])
        .unwrap();
        EvalPlan {
            dataset: "toy".into(),
            queries,
            qrels,
            variant_files: vec![("queries.typo1".into(), v1), ("queries.typo2".into(), v2)],
            noise: vec![NoiseKind::Reorder],
            seeds: 2,
            depth: 100,
            batch_size: 1,
        }
    }

    #[test]
    fn conditions_metrics_and_means_are_bookkept() {
        let report = run(&plan(), &[&FirstLetter], &Quiet).unwrap();
        let enc = &report.encoders[0];
        let clean = enc.get(CLEAN).unwrap();
        assert_eq!(clean.queries_evaluated, 2);
        assert_eq!(clean.metrics.mrr_at_10, 1.0);
        // typo1: query 1 now starts with x → misses; query 2 unchanged → hits.
        let t1 = enc.get("queries.typo1").unwrap();
        assert_eq!(t1.metrics.mrr_at_10, 0.5);
        assert_eq!(t1.mean_cosine, Some(0.5));
        let t2 = enc.get("queries.typo2").unwrap();
        assert_eq!(t2.metrics.mrr_at_10, 1.0);
        let mean = enc.get(&files_mean_label("typo")).unwrap();
        assert_eq!(mean.metrics.mrr_at_10, 0.75);
        assert!(enc.get("reorder seed 0").is_some() && enc.get("reorder seed 1").is_some());
        assert!(enc.get(&seeds_mean_label("reorder")).is_some());
    }

    #[test]
    fn families_group_numbered_files() {
        assert_eq!(family_of("queries.typo10"), "typo");
        assert_eq!(family_of("typo-3"), "typo");
        assert_eq!(family_of("paraphrase"), "paraphrase");
    }

    #[test]
    fn a_variant_file_without_judged_queries_is_an_error() {
        let mut p = plan();
        p.variant_files = vec![(
            "stray".into(),
            Queries::from_queries(vec![Query {
                id: "3".into(),
                text: "cherry".into(),
            }])
            .unwrap(),
        )];
        assert!(run(&p, &[&FirstLetter], &Quiet).is_err());
    }
}
