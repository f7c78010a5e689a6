//! The search pipeline both transports serve: a request in, a [`SearchOutcome`] out, nothing of
//! HTTP or gRPC in between. It picks how the request is served — one encoder (named, or the
//! `default` alias), each query routed by the query router (no encoder named and a router
//! configured), or several encoders fused by reciprocal rank fusion (`fusion`) — and runs each
//! search through [`stages::search`] (validate, admit, repair, encode, search). The transports in
//! `server/` only translate requests in and outcomes out, so the same request gets the same
//! answer on either.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

pub mod compaction;
pub mod documents;
pub mod error;
pub mod filter;
pub mod metrics;
pub mod stages;
pub mod state;

use crate::repair::{RepairFusion, Repaired};
pub use error::ApiError;
pub use filter::Filter;
pub use stages::{EmbedOutput, FilterReport, Hit, SearchOutput, SearchParams, TimingsMs, MAX_EF};
pub use state::{AppState, Limits, RepairDefaults};

/// Reciprocal rank fusion constant: a document at rank r of a list scores 1/(RRF_K + r).
pub const RRF_K: f64 = 60.0;

/// Most encoders one fused search may name.
pub const MAX_FUSION: usize = 8;

/// Each fused list is this deep (at least `k`), so documents ranked a little lower by one
/// encoder still count.
pub const FUSION_DEPTH: usize = 50;

/// A search, as either transport receives it: one search's parameters (an `encoder` of `None`
/// means the router's choice when one is configured, else `default`), and the encoders or
/// aliases to fuse, if any.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub params: SearchParams,
    /// Encoders or aliases whose results are merged by reciprocal rank fusion.
    pub fusion: Option<Vec<String>>,
}

/// An encoder that served a search.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct EncoderRef {
    pub name: String,
    pub version: String,
}

/// One encoder of a fused search: the name asked for and what it resolved to.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FusedEncoder {
    pub requested: String,
    pub name: String,
    pub version: String,
}

/// How a fused search merged its lists.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FusionInfo {
    /// Always `rrf`.
    pub method: &'static str,
    /// The RRF constant.
    pub k: f64,
    /// How deep each encoder's list was.
    pub depth: usize,
    pub encoders: Vec<FusedEncoder>,
}

/// Which encoders served a search.
#[derive(Debug, Clone, PartialEq)]
pub enum Served {
    /// One encoder for every query.
    One(EncoderRef),
    /// Each query by the alias the query router chose for it (`routed_to`, in query order).
    Routed {
        routed_to: Vec<String>,
        encoders: Vec<EncoderRef>,
    },
    /// Every query by several encoders, fused.
    Fused(FusionInfo),
}

impl Served {
    /// The encoder that served every query, when one did: always for [`Served::One`]; for a
    /// routed search when the router chose one alias for all its queries; never when fused.
    pub fn encoder(&self) -> Option<&EncoderRef> {
        match self {
            Served::One(e) => Some(e),
            Served::Routed {
                routed_to,
                encoders,
            } => routed_to
                .iter()
                .all(|a| *a == routed_to[0])
                .then(|| encoders.first())
                .flatten(),
            Served::Fused(_) => None,
        }
    }
}

/// What a search found, and how.
#[derive(Debug, Clone)]
pub struct SearchOutcome {
    /// One hit list per query, in request order.
    pub results: Vec<Vec<Hit>>,
    pub served: Served,
    /// Per query: what repair changed (`None` when nothing).
    pub repairs: Vec<Option<Repaired>>,
    /// What a repaired query searched with.
    pub repair_fusion: RepairFusion,
    /// Where the time went; a fused search reports its total only.
    pub timings: TimingsMs,
    /// With a filter: what it admitted and how the index was searched (the first search's).
    pub filter: Option<FilterReport>,
}

/// Serves a search: fused when the request names `fusion`, routed when it names no encoder and
/// a router is configured, else by the one encoder named (or `default`).
pub async fn search(
    state: &Arc<AppState>,
    mut req: SearchRequest,
) -> Result<SearchOutcome, ApiError> {
    // One deadline for the whole request, however many searches it takes.
    req.params
        .deadline
        .get_or_insert_with(|| Instant::now() + state.request_timeout());
    if let Some(names) = req.fusion.clone() {
        if req.params.encoder.is_some() {
            return Err(ApiError::invalid("give either encoder or fusion, not both"));
        }
        return fused(state, req, names).await;
    }
    if req.params.encoder.is_none() && state.router.get().is_some() {
        return routed(state, req).await;
    }
    let out = stages::search(state, req.params).await?;
    Ok(SearchOutcome {
        served: Served::One(encoder_ref(&out)),
        repair_fusion: out.pipeline.fusion.unwrap_or_default(),
        results: out.results,
        repairs: out.repairs,
        timings: out.timings_ms,
        filter: out.filter,
    })
}

fn encoder_ref(out: &SearchOutput) -> EncoderRef {
    EncoderRef {
        name: out.encoder_name.clone(),
        version: out.encoder_version.clone(),
    }
}

/// Routes each query to an alias with the query router, searches each group, and answers in
/// the request's order.
async fn routed(state: &Arc<AppState>, req: SearchRequest) -> Result<SearchOutcome, ApiError> {
    let started = Instant::now();
    let router = state
        .router
        .get()
        .cloned()
        .ok_or_else(|| ApiError::internal("no query router is configured"))?;
    // Refuse what the searches would refuse before the router counts anything.
    let p = &req.params;
    stages::precheck(state, &p.texts, p.field)?;
    let snapshot = state.registry.snapshot();
    let texts = p.texts.clone();
    let corpus = state.corpus();
    let repairer = corpus
        .as_ref()
        .and_then(|c| c.repairer.clone())
        .or_else(|| state.store_speller.get().and_then(|s| s.repairer()));
    let live = corpus.map(|c| c.live.clone());
    let aliases: Vec<String> = tokio::task::spawn_blocking(move || {
        let segment = live.as_ref().map(|l| l.read());
        let known = |w: &str| segment.as_ref().is_some_and(|s| s.has_word(w));
        texts
            .iter()
            .map(|t| router.choose(&snapshot, t, repairer.as_deref(), &known))
            .collect()
    })
    .await
    .map_err(|e| ApiError::internal(format!("router task failed: {e}")))?;
    // Group query positions by alias, keeping the order of first appearance.
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, a) in aliases.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| g == a) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((a.clone(), vec![i])),
        }
    }
    let n = p.texts.len();
    let mut results: Vec<Vec<Hit>> = vec![Vec::new(); n];
    let mut encoders: Vec<Option<EncoderRef>> = vec![None; n];
    let mut repairs = vec![None; n];
    let mut first: Option<SearchOutput> = None;
    for (alias, idx) in &groups {
        let texts: Vec<String> = idx.iter().map(|&i| p.texts[i].clone()).collect();
        let out = stages::search(state, with(p, texts, alias.clone())).await?;
        let enc = encoder_ref(&out);
        for ((&i, hits), repaired) in idx.iter().zip(out.results.iter()).zip(&out.repairs) {
            results[i] = hits.clone();
            encoders[i] = Some(enc.clone());
            repairs[i] = repaired.clone();
        }
        if first.is_none() {
            first = Some(out);
        }
    }
    let first = first.ok_or_else(|| ApiError::internal("no query was routed"))?;
    let mut timings = first.timings_ms;
    timings.total = ms(started);
    Ok(SearchOutcome {
        results,
        served: Served::Routed {
            routed_to: aliases,
            encoders: encoders.into_iter().flatten().collect(),
        },
        repairs,
        repair_fusion: first.pipeline.fusion.unwrap_or_default(),
        filter: first.filter,
        timings,
    })
}

/// `p` for other texts, by the encoder or alias `encoder`.
fn with(p: &SearchParams, texts: Vec<String>, encoder: String) -> SearchParams {
    SearchParams {
        texts,
        encoder: Some(encoder),
        ..p.clone()
    }
}

fn ms(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

/// Searches with every named encoder (concurrently) and merges each query's lists by
/// reciprocal rank fusion.
async fn fused(
    state: &Arc<AppState>,
    req: SearchRequest,
    names: Vec<String>,
) -> Result<SearchOutcome, ApiError> {
    let started = Instant::now();
    if names.len() < 2 || names.len() > MAX_FUSION {
        return Err(ApiError::invalid(format!(
            "fusion: name 2 to {MAX_FUSION} encoders or aliases, got {}",
            names.len()
        )));
    }
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(ApiError::invalid(format!("fusion: {n:?} is named twice")));
        }
    }
    let p = &req.params;
    if p.k == 0 || p.k > state.limits.max_k {
        return Err(ApiError::invalid(format!(
            "k must be in 1..={}, got {}",
            state.limits.max_k, p.k
        )));
    }
    let depth = p.k.max(FUSION_DEPTH).min(state.limits.max_k);
    let mut tasks = tokio::task::JoinSet::new();
    for (pos, name) in names.iter().enumerate() {
        let state = state.clone();
        let mut one = with(p, p.texts.clone(), name.clone());
        one.k = depth;
        tasks.spawn(async move { (pos, stages::search(&state, one).await) });
    }
    let mut outputs: Vec<Option<SearchOutput>> = vec![None; names.len()];
    while let Some(joined) = tasks.join_next().await {
        let (pos, out) =
            joined.map_err(|e| ApiError::internal(format!("search task failed: {e}")))?;
        outputs[pos] = Some(out?);
    }
    let outputs: Vec<SearchOutput> = outputs.into_iter().flatten().collect();
    let results: Vec<Vec<Hit>> = (0..p.texts.len())
        .map(|q| {
            let lists: Vec<&[Hit]> = outputs
                .iter()
                .map(|o| o.results.get(q).map(Vec::as_slice).unwrap_or(&[]))
                .collect();
            rrf(&lists, p.k)
        })
        .collect();
    let encoders = names
        .iter()
        .zip(&outputs)
        .map(|(asked, o)| FusedEncoder {
            requested: asked.clone(),
            name: o.encoder_name.clone(),
            version: o.encoder_version.clone(),
        })
        .collect();
    let first = outputs.first();
    Ok(SearchOutcome {
        results,
        served: Served::Fused(FusionInfo {
            method: "rrf",
            k: RRF_K,
            depth,
            encoders,
        }),
        repairs: first.map(|o| o.repairs.clone()).unwrap_or_default(),
        repair_fusion: first.and_then(|o| o.pipeline.fusion).unwrap_or_default(),
        timings: TimingsMs {
            total: ms(started),
            ..TimingsMs::default()
        },
        filter: first.and_then(|o| o.filter),
    })
}

/// Reciprocal rank fusion of ranked lists: score(d) = Σ 1/(RRF_K + rank); ties by id. The
/// returned hits carry the fused score and their new rank.
pub fn rrf(lists: &[&[Hit]], k: usize) -> Vec<Hit> {
    let mut fused: HashMap<&str, (f64, &Hit)> = HashMap::new();
    for list in lists {
        for h in list.iter() {
            let add = 1.0 / (RRF_K + h.rank as f64);
            fused
                .entry(h.id.as_str())
                .and_modify(|(s, _)| *s += add)
                .or_insert((add, h));
        }
    }
    let mut all: Vec<(f64, &Hit)> = fused.into_values().collect();
    all.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    all.into_iter()
        .take(k)
        .enumerate()
        .map(|(i, (score, h))| Hit {
            id: h.id.clone(),
            score: score as f32,
            rank: i + 1,
            title: h.title.clone(),
            text: h.text.clone(),
            metadata: h.metadata.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str, rank: usize) -> Hit {
        Hit {
            metadata: None,
            id: id.into(),
            score: 0.0,
            rank,
            title: String::new(),
            text: String::new(),
        }
    }

    #[test]
    fn rrf_adds_reciprocal_ranks_and_breaks_ties_by_id() {
        let a = vec![hit("x", 1), hit("y", 2), hit("z", 3)];
        let b = vec![hit("y", 1), hit("w", 2), hit("x", 3)];
        let out = rrf(&[&a, &b], 10);
        let ids: Vec<&str> = out.iter().map(|h| h.id.as_str()).collect();
        // y: 1/62 + 1/61 > x: 1/61 + 1/63 > w: 1/62 > z: 1/63
        assert_eq!(ids, ["y", "x", "w", "z"]);
        assert!((f64::from(out[0].score) - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
        assert_eq!(out.iter().map(|h| h.rank).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(rrf(&[&a, &b], 2).len(), 2);
        // Equal scores: ordered by id.
        let c = vec![hit("q", 1)];
        let d = vec![hit("p", 1)];
        let ids: Vec<String> = rrf(&[&c, &d], 5).into_iter().map(|h| h.id).collect();
        assert_eq!(ids, ["p", "q"]);
    }
}
