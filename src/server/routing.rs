//! Search modes beyond one named encoder: per-query routing by the query router (when the
//! request names no encoder) and reciprocal rank fusion over several encoders.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use serde_json::{json, Value};

use super::core::{self, Hit, SearchOutput, SearchParams};
use super::error::ApiError;
use super::state::AppState;

/// Reciprocal rank fusion constant: a document at rank r of a list scores 1/(RRF_K + r).
pub const RRF_K: f64 = 60.0;

/// Most encoders one fused search may name.
pub const MAX_FUSION: usize = 8;

/// Each fused list is this deep (at least `k`), so documents ranked a little lower by one
/// encoder still count.
pub const FUSION_DEPTH: usize = 50;

/// A `/search` request that needs routing or fusion.
#[derive(Debug, Clone)]
pub struct RoutedRequest {
    pub texts: Vec<String>,
    /// Whether the request used `queries` (a list) rather than `query`.
    pub batch_form: bool,
    pub k: usize,
    pub ef: Option<usize>,
    pub encoder: Option<String>,
    pub fusion: Option<Vec<String>>,
    pub repair: Option<crate::repair::RepairMode>,
    pub repair_fusion: Option<crate::repair::RepairFusion>,
}

/// Whether a `/search` request is served here rather than by the plain path.
pub fn applies(state: &AppState, encoder: Option<&str>, fusion: Option<&[String]>) -> bool {
    fusion.is_some() || (encoder.is_none() && state.router.get().is_some())
}

fn field(batch_form: bool) -> &'static str {
    if batch_form {
        "queries"
    } else {
        "query"
    }
}

fn shape(results: Vec<Vec<Hit>>, batch_form: bool) -> Result<Value, ApiError> {
    if batch_form {
        serde_json::to_value(results)
    } else {
        serde_json::to_value(results.into_iter().next().unwrap_or_default())
    }
    .map_err(|e| ApiError::internal(e.to_string()))
}

/// Serves a routed or fused `/search`.
pub async fn search(state: &Arc<AppState>, req: RoutedRequest) -> Result<Json<Value>, ApiError> {
    match req.fusion.clone() {
        Some(names) => {
            if req.encoder.is_some() {
                return Err(ApiError::invalid("give either encoder or fusion, not both"));
            }
            fused(state, req, names).await
        }
        None => routed(state, req).await,
    }
}

/// Routes each query to an alias with the query router, searches each group, and answers in
/// the request's order with `routed_to`.
async fn routed(state: &Arc<AppState>, req: RoutedRequest) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let router = state
        .router
        .get()
        .cloned()
        .ok_or_else(|| ApiError::internal("no query router is configured"))?;
    // Reject bad requests before the router counts anything.
    if req.texts.is_empty() || req.texts.len() > state.limits.max_queries_per_request {
        return core::search(state, params(&req, req.texts.clone(), None))
            .await
            .map(|_| Json(Value::Null));
    }
    let snapshot = state.registry.snapshot();
    let texts = req.texts.clone();
    let repairer = state.repairer.get().cloned().flatten();
    let aliases: Vec<String> = tokio::task::spawn_blocking(move || {
        texts
            .iter()
            .map(|t| router.choose(&snapshot, t, repairer.as_deref()))
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
    let mut results: Vec<Vec<Hit>> = vec![Vec::new(); req.texts.len()];
    let mut encoders: Vec<Value> = vec![Value::Null; req.texts.len()];
    let mut repairs = vec![None; req.texts.len()];
    let mut first: Option<SearchOutput> = None;
    for (alias, idx) in &groups {
        let texts: Vec<String> = idx.iter().map(|&i| req.texts[i].clone()).collect();
        let out = core::search(state, params(&req, texts, Some(alias.clone()))).await?;
        let enc = json!({ "name": out.encoder_name, "version": out.encoder_version });
        for ((&i, hits), repaired) in idx.iter().zip(out.results.iter()).zip(&out.repairs) {
            results[i] = hits.clone();
            encoders[i] = enc.clone();
            repairs[i] = repaired.clone();
        }
        if first.is_none() {
            first = Some(out);
        }
    }
    let first = first.ok_or_else(|| ApiError::internal("no query was routed"))?;
    let mut timings = first.timings_ms;
    timings.total = (started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
    let mut body = json!({
        "results": shape(results, req.batch_form)?,
        "timings_ms": timings,
    });
    let fusion = first.pipeline.fusion.unwrap_or_default();
    super::http::insert_repairs(&mut body, &repairs, fusion, req.batch_form);
    if let Value::Object(o) = &mut body {
        if req.batch_form {
            o.insert("routed_to".into(), json!(aliases));
            o.insert("encoders".into(), json!(encoders));
            if groups.len() == 1 {
                o.insert("encoder".into(), encoders[0].clone());
            }
        } else {
            o.insert("routed_to".into(), json!(aliases.first()));
            o.insert("encoder".into(), encoders[0].clone());
        }
    }
    Ok(Json(body))
}

fn params(req: &RoutedRequest, texts: Vec<String>, encoder: Option<String>) -> SearchParams {
    SearchParams {
        texts,
        field: field(req.batch_form),
        k: req.k,
        encoder,
        ef: req.ef,
        repair: req.repair,
        repair_fusion: req.repair_fusion,
    }
}

/// Searches with every named encoder (concurrently) and merges each query's lists by
/// reciprocal rank fusion.
async fn fused(
    state: &Arc<AppState>,
    req: RoutedRequest,
    names: Vec<String>,
) -> Result<Json<Value>, ApiError> {
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
    if req.k == 0 || req.k > state.limits.max_k {
        return Err(ApiError::invalid(format!(
            "k must be in 1..={}, got {}",
            state.limits.max_k, req.k
        )));
    }
    let depth = req.k.max(FUSION_DEPTH).min(state.limits.max_k);
    let mut tasks = tokio::task::JoinSet::new();
    for (pos, name) in names.iter().enumerate() {
        let state = state.clone();
        let mut p = params(&req, req.texts.clone(), Some(name.clone()));
        p.k = depth;
        tasks.spawn(async move { (pos, core::search(&state, p).await) });
    }
    let mut outputs: Vec<Option<SearchOutput>> = vec![None; names.len()];
    while let Some(joined) = tasks.join_next().await {
        let (pos, out) =
            joined.map_err(|e| ApiError::internal(format!("search task failed: {e}")))?;
        outputs[pos] = Some(out?);
    }
    let outputs: Vec<SearchOutput> = outputs.into_iter().flatten().collect();
    let results: Vec<Vec<Hit>> = (0..req.texts.len())
        .map(|q| {
            let lists: Vec<&[Hit]> = outputs
                .iter()
                .map(|o| o.results.get(q).map(Vec::as_slice).unwrap_or(&[]))
                .collect();
            rrf(&lists, req.k)
        })
        .collect();
    let encoders: Vec<Value> = names
        .iter()
        .zip(&outputs)
        .map(|(asked, o)| json!({ "requested": asked, "name": o.encoder_name, "version": o.encoder_version }))
        .collect();
    let mut body = json!({
        "results": shape(results, req.batch_form)?,
        "fusion": { "method": "rrf", "k": RRF_K, "depth": depth, "encoders": encoders },
        "timings_ms": { "total": (started.elapsed().as_secs_f64() * 1e6).round() / 1e3 },
    });
    if let Some(first) = outputs.first() {
        let fusion = first.pipeline.fusion.unwrap_or_default();
        super::http::insert_repairs(&mut body, &first.repairs, fusion, req.batch_form);
    }
    Ok(Json(body))
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
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str, rank: usize) -> Hit {
        Hit {
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
