//! Alignment objectives: parsing of the objective mix and the loss formulas (see
//! `docs/alignment.md` for the formulas and the reasons behind each choice).
//!
//! Every loss works on the pooled (and, per the bundle, normalised) vectors of one batch:
//! `clean` = f(x) of the student for the B clean queries, `noisy` = f(x⁺) for the B·K noisy
//! positives (query i owns rows i·K..(i+1)·K), `anchor` = f_a(x) of the frozen base encoder for the
//! clean queries (constant), and the negative of query i is query `negatives[i]` of the same batch.

use std::fmt;
use std::str::FromStr;

use candle_core::{DType, Tensor, D};
use serde::{Deserialize, Serialize};

use super::AlignError;
use crate::model::bert::l2_normalize;

/// One objective of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectiveKind {
    /// CAPOT: triplet on squared L2 distances + anchoring + ranking term.
    Capot,
    /// InfoNCE with all K noisy variants of a query as positives of its anchor vector.
    Multipos,
    /// KL between the anchor's and the student's softmax over the anchor's nearest documents.
    Ranking,
    /// Distillation to the anchor: `1 − cos(f(x⁺), f_a(x)) + 1 − cos(f(x), f_a(x))`.
    Distill,
    /// Clean queries only: `1 − cos(f(x), f_a(x))`, to weight the clean side of a mix separately
    /// (e.g. `distill=1,anchor=3` holds clean queries four times as hard as it pulls noisy ones).
    Anchor,
}

impl ObjectiveKind {
    /// Every objective, in a fixed order.
    pub const ALL: [ObjectiveKind; 5] = [
        ObjectiveKind::Capot,
        ObjectiveKind::Multipos,
        ObjectiveKind::Ranking,
        ObjectiveKind::Distill,
        ObjectiveKind::Anchor,
    ];

    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectiveKind::Capot => "capot",
            ObjectiveKind::Multipos => "multipos",
            ObjectiveKind::Ranking => "ranking",
            ObjectiveKind::Distill => "distill",
            ObjectiveKind::Anchor => "anchor",
        }
    }
}

impl fmt::Display for ObjectiveKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A weighted mix of objectives, e.g. `capot` or `capot=1,distill=0.5`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Objective {
    /// (objective, weight), each objective at most once, weights finite and ≥ 0, not all 0.
    pub terms: Vec<(ObjectiveKind, f64)>,
}

impl Objective {
    /// The weight of one objective (0 when absent).
    pub fn weight(&self, kind: ObjectiveKind) -> f64 {
        self.terms
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, w)| *w)
            .unwrap_or(0.0)
    }

    /// Whether any term with a non-zero weight uses the student's clean-query vectors f(x)
    /// (when none does, the clean forward pass is skipped).
    pub fn needs_clean(&self) -> bool {
        [
            ObjectiveKind::Capot,
            ObjectiveKind::Distill,
            ObjectiveKind::Anchor,
        ]
        .iter()
        .any(|&k| self.weight(k) > 0.0)
    }

    /// Whether the mix needs a document index (the ranking objective).
    pub fn needs_index(&self) -> bool {
        self.weight(ObjectiveKind::Ranking) > 0.0
    }
}

impl fmt::Display for Objective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.terms.iter().map(|(k, w)| format!("{k}={w}")).collect();
        f.write_str(&parts.join(","))
    }
}

fn valid_objectives() -> String {
    let names: Vec<&str> = ObjectiveKind::ALL.iter().map(|k| k.as_str()).collect();
    format!(
        "{} (or a weighted mix such as capot=1,distill=0.5)",
        names.join(", ")
    )
}

impl FromStr for Objective {
    type Err = AlignError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |m: String| AlignError::Input(m);
        let mut terms: Vec<(ObjectiveKind, f64)> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, weight) = match item.split_once('=') {
                Some((n, w)) => {
                    let w: f64 = w.trim().parse().map_err(|_| {
                        bad(format!("objective weight `{}` is not a number", w.trim()))
                    })?;
                    (n.trim(), w)
                }
                None => (item, 1.0),
            };
            let kind = ObjectiveKind::ALL
                .iter()
                .copied()
                .find(|k| k.as_str().eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    bad(format!(
                        "unknown objective `{name}`; valid: {}",
                        valid_objectives()
                    ))
                })?;
            if !weight.is_finite() || weight < 0.0 {
                return Err(bad(format!(
                    "objective weight {weight} of `{name}` must be finite and ≥ 0"
                )));
            }
            if terms.iter().any(|(k, _)| *k == kind) {
                return Err(bad(format!("objective `{name}` is given twice")));
            }
            terms.push((kind, weight));
        }
        if terms.is_empty() {
            return Err(bad(format!(
                "empty objective; valid: {}",
                valid_objectives()
            )));
        }
        if terms.iter().all(|(_, w)| *w == 0.0) {
            return Err(bad("every objective weight is 0: nothing to train".into()));
        }
        Ok(Objective { terms })
    }
}

/// Hyper-parameters of the loss terms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossParams {
    /// CAPOT τ_pos: weight of the clean–noisy distance in the triplet.
    pub tau_pos: f64,
    /// CAPOT τ_neg: weight of the clean–negative distance in the triplet.
    pub tau_neg: f64,
    /// CAPOT τ_anchor: weight of the anchoring term ‖f(x) − f_a(x)‖².
    pub tau_anchor: f64,
    /// CAPOT τ_rank: weight of the ranking term.
    pub tau_rank: f64,
    /// Triplet margin ε.
    pub margin: f64,
    /// Margin of the CAPOT ranking term.
    pub rank_margin: f64,
    /// Softmax temperature of `multipos` (on cosine similarities).
    pub nce_temperature: f64,
    /// Softmax temperature of `ranking` (on cosine similarities).
    pub rank_temperature: f64,
    /// Documents per query in `ranking` (the anchor's nearest neighbours in the index).
    pub rank_k: usize,
}

impl Default for LossParams {
    /// The paper's τ values (τ_pos 1, τ_neg 0.1, τ_anchor 2, τ_rank 0.7); margins are not given in
    /// the paper, 0.1 on squared distances of unit vectors (which lie in [0, 4]).
    fn default() -> Self {
        LossParams {
            tau_pos: 1.0,
            tau_neg: 0.1,
            tau_anchor: 2.0,
            tau_rank: 0.7,
            margin: 0.1,
            rank_margin: 0.1,
            nce_temperature: 0.05,
            rank_temperature: 0.05,
            rank_k: 20,
        }
    }
}

impl LossParams {
    /// Rejects values that make no sense (negative weights, non-positive temperatures, ...).
    pub fn validate(&self) -> Result<(), AlignError> {
        for (name, v) in [
            ("--tau-pos", self.tau_pos),
            ("--tau-neg", self.tau_neg),
            ("--tau-anchor", self.tau_anchor),
            ("--tau-rank", self.tau_rank),
            ("--margin", self.margin),
            ("--rank-margin", self.rank_margin),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(AlignError::Input(format!(
                    "{name} must be finite and ≥ 0, got {v}"
                )));
            }
        }
        for (name, v) in [
            ("--nce-temperature", self.nce_temperature),
            ("--rank-temperature", self.rank_temperature),
        ] {
            if !v.is_finite() || v <= 0.0 {
                return Err(AlignError::Input(format!(
                    "{name} must be finite and > 0, got {v}"
                )));
            }
        }
        if self.rank_k < 2 {
            return Err(AlignError::Input(format!(
                "--rank-k must be at least 2, got {}",
                self.rank_k
            )));
        }
        Ok(())
    }
}

/// The anchor's view of the documents near one batch, for the `ranking` objective.
pub struct RankingTargets {
    /// `[B, R, H]` document vectors read from the frozen index (the anchor's R nearest).
    pub docs: Tensor,
    /// `[B, R]` the anchor's softmax over those documents (the teacher distribution).
    pub teacher: Tensor,
}

/// The vectors of one batch (see the module documentation).
pub struct BatchVectors<'a> {
    /// `[B, H]` student vectors of the clean queries; `None` when no term needs them.
    pub clean: Option<&'a Tensor>,
    /// `[B·K, H]` student vectors of the noisy positives, grouped by query.
    pub noisy: &'a Tensor,
    /// `[B, H]` frozen anchor vectors of the clean queries.
    pub anchor: &'a Tensor,
    /// `[B]` u32: the in-batch negative of each query (never the query itself).
    pub negatives: &'a Tensor,
    /// Positives per query (K).
    pub k: usize,
    /// Present when the ranking objective is on.
    pub ranking: Option<&'a RankingTargets>,
}

/// The weighted total loss and its named parts (unweighted by the objective mix, but with the
/// τ factors applied), as scalars for the training curve.
pub struct LossOutput {
    /// The scalar to back-propagate.
    pub total: Tensor,
    /// Named parts, e.g. `capot.triplet`, `distill`.
    pub parts: Vec<(String, Tensor)>,
}

fn err(e: candle_core::Error) -> AlignError {
    AlignError::Candle(e.to_string())
}

/// Squared L2 distance per row: `[N, H]`, `[N, H]` → `[N]`.
fn sq_dist(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    (a - b)?.sqr()?.sum(D::Minus1)
}

/// Cosine similarity per row.
fn cosine(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    (l2_normalize(a)? * l2_normalize(b)?)?.sum(D::Minus1)
}

/// Log-softmax over the last dimension with a detached row maximum (differentiable ops only).
fn log_softmax(x: &Tensor) -> candle_core::Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?.detach();
    let shifted = x.broadcast_sub(&max)?;
    let lse = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
    shifted.broadcast_sub(&lse)
}

/// Computes the loss mix on one batch.
pub fn compute(
    objective: &Objective,
    params: &LossParams,
    v: &BatchVectors<'_>,
) -> Result<LossOutput, AlignError> {
    if objective.needs_clean() && v.clean.is_none() {
        return Err(AlignError::Input(
            "capot, distill and anchor need the clean-query vectors".into(),
        ));
    }
    if objective.needs_index() && v.ranking.is_none() {
        return Err(AlignError::Input(
            "the ranking objective needs --index".into(),
        ));
    }
    compute_inner(objective, params, v).map_err(err)
}

fn compute_inner(
    objective: &Objective,
    params: &LossParams,
    v: &BatchVectors<'_>,
) -> candle_core::Result<LossOutput> {
    let device = v.noisy.device();
    let (b, _h) = v.anchor.dims2()?;
    let k = v.k;
    // owner[j] = query of noisy row j.
    let owner: Vec<u32> = (0..b * k).map(|j| (j / k) as u32).collect();
    let owner = Tensor::from_vec(owner, b * k, device)?;
    let anchor_e = v.anchor.index_select(&owner, 0)?;
    let mut parts: Vec<(String, Tensor)> = Vec::new();
    let mut total: Option<Tensor> = None;
    let mut add = |t: Tensor, w: f64| -> candle_core::Result<()> {
        let t = (t * w)?;
        total = Some(match total.take() {
            Some(acc) => (acc + t)?,
            None => t,
        });
        Ok(())
    };
    for &(kind, weight) in &objective.terms {
        if weight == 0.0 {
            continue;
        }
        match kind {
            ObjectiveKind::Capot => {
                let Some(clean) = v.clean else {
                    candle_core::bail!("capot needs the clean-query vectors");
                };
                let neg_owner = v.negatives.index_select(&owner, 0)?;
                let clean_e = clean.index_select(&owner, 0)?;
                let negative_e = clean.index_select(&neg_owner, 0)?;
                let anchor_neg_e = v.anchor.index_select(&neg_owner, 0)?;
                // max(0, τ_pos‖f(x)−f(x⁺)‖² − τ_neg‖f(x)−f(x⁻)‖² + ε)
                let triplet = ((sq_dist(&clean_e, v.noisy)? * params.tau_pos)?
                    - (sq_dist(&clean_e, &negative_e)? * params.tau_neg)?)?
                    .affine(1.0, params.margin)?
                    .relu()?
                    .mean_all()?;
                // τ_anchor‖f(x)−f_a(x)‖²
                let anchoring = (sq_dist(clean, v.anchor)?.mean_all()? * params.tau_anchor)?;
                // τ_rank·max(0, ‖f(x⁺)−f_a(x)‖² − ‖f(x⁺)−f_a(x⁻)‖² + ε_rank)
                let ranking = ((sq_dist(v.noisy, &anchor_e)? - sq_dist(v.noisy, &anchor_neg_e)?)?
                    .affine(1.0, params.rank_margin)?
                    .relu()?
                    .mean_all()?
                    * params.tau_rank)?;
                let sum = ((&triplet + &anchoring)? + &ranking)?;
                add(sum.clone(), weight)?;
                parts.push(("capot".into(), sum));
                parts.push(("capot.triplet".into(), triplet));
                parts.push(("capot.anchor".into(), anchoring));
                parts.push(("capot.rank".into(), ranking));
            }
            ObjectiveKind::Distill => {
                let Some(clean) = v.clean else {
                    candle_core::bail!("distill needs the clean-query vectors");
                };
                let noisy_term = cosine(v.noisy, &anchor_e)?.affine(-1.0, 1.0)?.mean_all()?;
                let clean_term = cosine(clean, v.anchor)?.affine(-1.0, 1.0)?.mean_all()?;
                let sum = (noisy_term + clean_term)?;
                add(sum.clone(), weight)?;
                parts.push(("distill".into(), sum));
            }
            ObjectiveKind::Anchor => {
                let Some(clean) = v.clean else {
                    candle_core::bail!("anchor needs the clean-query vectors");
                };
                let term = cosine(clean, v.anchor)?.affine(-1.0, 1.0)?.mean_all()?;
                add(term.clone(), weight)?;
                parts.push(("anchor".into(), term));
            }
            ObjectiveKind::Multipos => {
                // Rows: anchors; columns: every noisy vector of the batch; positives: own rows.
                let a = l2_normalize(v.anchor)?;
                let p = l2_normalize(v.noisy)?;
                let logits = (a.matmul(&p.t()?)? / params.nce_temperature)?;
                let logp = log_softmax(&logits)?;
                let mut mask = vec![0f32; b * b * k];
                for i in 0..b {
                    for j in i * k..(i + 1) * k {
                        mask[i * b * k + j] = 1.0 / k as f32;
                    }
                }
                let mask = Tensor::from_vec(mask, (b, b * k), device)?;
                let loss = (logp * mask)?.sum_all()?.affine(-1.0 / b as f64, 0.0)?;
                add(loss.clone(), weight)?;
                parts.push(("multipos".into(), loss));
            }
            ObjectiveKind::Ranking => {
                let Some(r) = v.ranking else {
                    candle_core::bail!("the ranking objective needs --index");
                };
                let docs_e = r.docs.index_select(&owner, 0)?; // [BK, R, H]
                let teacher_e = r.teacher.index_select(&owner, 0)?; // [BK, R]
                let p = l2_normalize(v.noisy)?.unsqueeze(1)?; // [BK, 1, H]
                let scores = docs_e.broadcast_mul(&p)?.sum(D::Minus1)?; // [BK, R]
                let log_q = log_softmax(&(scores / params.rank_temperature)?)?;
                let log_t = teacher_e.maximum(1e-30)?.log()?;
                let kl = (teacher_e * (log_t - log_q)?)?.sum(D::Minus1)?.mean_all()?;
                add(kl.clone(), weight)?;
                parts.push(("ranking".into(), kl));
            }
        }
    }
    let total = match total {
        Some(t) => t,
        None => Tensor::zeros((), DType::F32, device)?,
    };
    Ok(LossOutput { total, parts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn parses_single_and_weighted_mixes() {
        let o: Objective = "capot".parse().unwrap();
        assert_eq!(o.terms, vec![(ObjectiveKind::Capot, 1.0)]);
        let o: Objective = "capot=1, distill=0.5".parse().unwrap();
        assert_eq!(o.weight(ObjectiveKind::Distill), 0.5);
        assert_eq!(o.to_string(), "capot=1,distill=0.5");
        assert!(o.needs_clean() && !o.needs_index());
        let o: Objective = "ranking".parse().unwrap();
        assert!(o.needs_index() && !o.needs_clean());
        for bad in [
            "",
            "triplet",
            "capot=x",
            "capot=-1",
            "capot,capot",
            "distill=0",
        ] {
            let e = bad.parse::<Objective>().unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
        }
        let e = "triplet".parse::<Objective>().unwrap_err().to_string();
        assert!(
            e.contains("unknown objective `triplet`") && e.contains("multipos"),
            "{e}"
        );
    }

    fn t(rows: &[[f32; 2]]) -> Tensor {
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        Tensor::from_vec(flat, (rows.len(), 2), &Device::Cpu).unwrap()
    }

    fn part(out: &LossOutput, name: &str) -> f32 {
        out.parts
            .iter()
            .find(|(n, _)| n == name)
            .unwrap()
            .1
            .to_scalar::<f32>()
            .unwrap()
    }

    /// Two queries, one positive each, the other query as negative, no ranking targets.
    fn two_queries<'a>(
        clean: &'a Tensor,
        noisy: &'a Tensor,
        anchor: &'a Tensor,
        negatives: &'a Tensor,
    ) -> BatchVectors<'a> {
        BatchVectors {
            clean: Some(clean),
            noisy,
            anchor,
            negatives,
            k: 1,
            ranking: None,
        }
    }

    #[test]
    fn formulas_on_hand_computed_vectors() {
        // Two queries on the unit circle; K = 1.
        let clean = t(&[[1.0, 0.0], [0.0, 1.0]]);
        let noisy = t(&[[0.6, 0.8], [0.0, 1.0]]);
        let anchor = t(&[[1.0, 0.0], [0.0, 1.0]]);
        let negatives = Tensor::from_vec(vec![1u32, 0], 2, &Device::Cpu).unwrap();
        let v = two_queries(&clean, &noisy, &anchor, &negatives);
        let params = LossParams {
            tau_pos: 1.0,
            tau_neg: 0.5,
            tau_anchor: 2.0,
            tau_rank: 1.0,
            margin: 0.1,
            rank_margin: 0.1,
            ..LossParams::default()
        };
        let obj: Objective = "capot=1,distill=1,multipos=1".parse().unwrap();
        let out = compute(&obj, &params, &v).unwrap();
        // Query 0: ‖c−p‖² = 0.16+0.64 = 0.8, ‖c−n‖² = 2 → 0.8 − 1 + 0.1 < 0 → 0.
        // Query 1: 0 − 1 + 0.1 < 0 → 0.
        assert!(part(&out, "capot.triplet").abs() < 1e-6);
        assert!(part(&out, "capot.anchor").abs() < 1e-6);
        // Rank: q0: ‖p−a0‖² = 0.8, ‖p−a1‖² = 0.36+0.04 = 0.4 → 0.8−0.4+0.1 = 0.5; q1: 0−2+0.1 → 0.
        assert!((part(&out, "capot.rank") - 0.25).abs() < 1e-6);
        // Distill: noisy 1−0.6 = 0.4 and 0 → mean 0.2; clean 0.
        assert!((part(&out, "distill") - 0.2).abs() < 1e-6);
        let m = part(&out, "multipos");
        // Row 0 logits (0.6, 0)/0.05 = (12, 0); row 1 (0.8, 1)/0.05 = (16, 20).
        let l0 = -(12f64 - (12f64.exp() + 1.0).ln());
        let l1 = -(20f64 - (16f64.exp() + 20f64.exp()).ln());
        assert!((f64::from(m) - (l0 + l1) / 2.0).abs() < 1e-4, "{m}");
        let total = out.total.to_scalar::<f32>().unwrap();
        assert!((f64::from(total) - (0.25 + 0.2 + (l0 + l1) / 2.0)).abs() < 1e-4);
    }

    #[test]
    fn the_anchor_term_sees_only_clean_queries() {
        let clean = t(&[[0.6, 0.8], [0.0, 1.0]]);
        let noisy = t(&[[-1.0, 0.0], [1.0, 0.0]]);
        let anchor = t(&[[1.0, 0.0], [0.0, 1.0]]);
        let negatives = Tensor::from_vec(vec![1u32, 0], 2, &Device::Cpu).unwrap();
        let v = two_queries(&clean, &noisy, &anchor, &negatives);
        let obj: Objective = "anchor=3".parse().unwrap();
        assert!(obj.needs_clean());
        let out = compute(&obj, &LossParams::default(), &v).unwrap();
        // (1 − 0.6 + 1 − 1) / 2 = 0.2, weighted 3; the noisy vectors play no part.
        assert!((part(&out, "anchor") - 0.2).abs() < 1e-6);
        assert!((out.total.to_scalar::<f32>().unwrap() - 0.6).abs() < 1e-6);
        let no_clean = BatchVectors { clean: None, ..v };
        assert!(compute(&obj, &LossParams::default(), &no_clean).is_err());
    }

    #[test]
    fn ranking_kl_is_zero_when_student_equals_teacher() {
        let anchor = t(&[[1.0, 0.0]]);
        let docs =
            Tensor::from_vec(vec![1f32, 0.0, 0.0, 1.0, 0.6, 0.8], (1, 3, 2), &Device::Cpu).unwrap();
        let scores = Tensor::from_vec(vec![1f32, 0.0, 0.6], (1, 3), &Device::Cpu).unwrap();
        let teacher = (log_softmax(&(scores / 0.05).unwrap()).unwrap())
            .exp()
            .unwrap();
        let targets = RankingTargets { docs, teacher };
        let negatives = Tensor::from_vec(vec![0u32], 1, &Device::Cpu).unwrap();
        let obj: Objective = "ranking".parse().unwrap();
        let same = BatchVectors {
            clean: None,
            noisy: &anchor,
            anchor: &anchor,
            negatives: &negatives,
            k: 1,
            ranking: Some(&targets),
        };
        let kl = compute(&obj, &LossParams::default(), &same).unwrap();
        assert!(kl.total.to_scalar::<f32>().unwrap().abs() < 1e-5);
        let other = t(&[[0.0, 1.0]]);
        let moved = BatchVectors {
            noisy: &other,
            ..same
        };
        let kl = compute(&obj, &LossParams::default(), &moved).unwrap();
        assert!(kl.total.to_scalar::<f32>().unwrap() > 1.0);
    }
}
