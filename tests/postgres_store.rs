//! The PostgreSQL + pgvector store against a real PostgreSQL 18 with pgvector 0.8 (the pinned
//! wheel, run by `common::postgres` as a non-root user on 127.0.0.1): filters translated to SQL
//! admit exactly what the embedded filter admits; searches return the exact top k, filtered or
//! not; `capot index build --store` and `capot serve --store` give the embedded index's answers;
//! writes are committed before they are answered and survive SIGKILL; a database that goes away
//! makes the service unready with 503s and it recovers by itself.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use capot::index::payload::{FieldSchema, FieldType};
use capot::query::filter::Filter;
use capot::store::postgres::{self, PgLocation, PgStore, PoolOptions, StoreRecord};
use capot::store::{DocumentStore, RecordWrite, StoreSearch};
use common::postgres::Postgres;
use serde_json::{json, Value};

/// A fixed-seed generator (xorshift), so a failure names a reproducible corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f32 {
        (self.below(2_000_001) as f32 / 1_000_000.0) - 1.0
    }
}

const SEED: u64 = 0x5eed_2026_1126;
const DIM: usize = 8;

/// Metadata of every shape the filter must handle: arrays, nulls, nested objects and arrays
/// of objects, values of another type than declared, whole floats in an integer field,
/// non-object metadata and none at all.
fn metadata(rng: &mut Rng, i: usize) -> Option<Value> {
    if i.is_multiple_of(17) {
        return None;
    }
    if i.is_multiple_of(29) {
        return Some(json!("just a string"));
    }
    let lang = ["en", "de", "fr", "es"][rng.below(4) as usize];
    let mut m = json!({
        "tenant": format!("t{}", rng.below(5)),
        "lang": if rng.below(5) == 0 { json!([lang, "en"]) } else { json!(lang) },
        "year": match rng.below(12) {
            0 => Value::Null,
            1 => json!("2020"),
            2 => json!(2020.5),
            _ => json!(2000 + rng.below(25)),
        },
        "price": (rng.below(10_000) as f64) / 100.0,
        "ok": rng.below(2) == 0,
        "at": format!("2024-{:02}-{:02}T{:02}:00:00{}", 1 + rng.below(12), 1 + rng.below(28),
                      rng.below(24), if rng.below(3) == 0 { "+02:00" } else { "Z" }),
        "tags": (0..rng.below(4)).map(|_| format!("tag{}", rng.below(6))).collect::<Vec<_>>(),
        "author": if rng.below(4) == 0 {
            json!([{"country": "nz"}, {"country": "us"}])
        } else {
            let country = ["nz", "us", "de"][rng.below(3) as usize];
            json!({"country": country})
        },
    });
    if rng.below(6) == 0 {
        m.as_object_mut().unwrap().remove("tags");
    }
    if rng.below(9) == 0 {
        m["at"] = json!("not a date");
    }
    Some(m)
}

fn fields() -> BTreeMap<String, FieldSchema> {
    [
        ("tenant", FieldType::Keyword),
        ("lang", FieldType::Keyword),
        ("year", FieldType::Integer),
        ("price", FieldType::Float),
        ("ok", FieldType::Bool),
        ("at", FieldType::Datetime),
        ("tags", FieldType::Keyword),
        ("author.country", FieldType::Keyword),
    ]
    .into_iter()
    .map(|(k, kind)| {
        (
            k.to_string(),
            FieldSchema {
                kind,
                tenant: k == "tenant",
            },
        )
    })
    .collect()
}

/// Filters of every shape the parser accepts.
fn filters() -> Vec<Value> {
    vec![
        json!({}),
        json!({"must": [{"key": "lang", "match": {"value": "de"}}]}),
        json!({"must": [{"key": "lang", "match": {"any": ["fr", "es"]}}]}),
        json!({"must": [{"key": "lang", "match": {"except": ["en"]}}]}),
        json!({"must": [{"key": "year", "match": {"value": 2020}}]}),
        json!({"must": [{"key": "year", "range": {"gte": 2010, "lt": 2015}}]}),
        json!({"must": [{"key": "year", "match": {"except": [2001, 2002]}}]}),
        json!({"must": [{"key": "price", "range": {"gt": 20.5, "lte": 60}}]}),
        json!({"must": [{"key": "ok", "match": {"value": false}}]}),
        json!({"must": [{"key": "at", "range": {"gte": "2024-06-01T00:00:00Z", "lt": "2024-09-01T00:00:00+02:00"}}]}),
        json!({"must": [{"key": "tags", "match": {"value": "tag3"}}]}),
        json!({"must": [{"is_empty": {"key": "tags"}}]}),
        json!({"must": [{"is_null": {"key": "year"}}]}),
        json!({"must_not": [{"is_empty": {"key": "year"}}]}),
        json!({"must": [{"key": "author.country", "match": {"value": "nz"}}]}),
        json!({"must": [{"has_id": ["d3", "d5", "d17", "nope"]}]}),
        json!({"should": [{"key": "tenant", "match": {"value": "t1"}}, {"key": "ok", "match": {"value": true}}]}),
        json!({"must": [{"key": "tenant", "match": {"value": "t2"}}],
               "must_not": [{"key": "lang", "match": {"value": "en"}}]}),
        json!({"min_should": {"min_count": 2, "conditions": [
            {"key": "lang", "match": {"value": "en"}}, {"key": "ok", "match": {"value": true}},
            {"key": "price", "range": {"lt": 50}}]}}),
        json!({"min_should": {"min_count": 4, "conditions": [{"key": "ok", "match": {"value": true}}]}}),
        json!({"must": [{"should": [{"key": "lang", "match": {"value": "fr"}},
                                    {"must_not": [{"key": "tenant", "match": {"any": ["t0", "t1", "t2"]}}]}]}]}),
        json!({"must": [{"key": "missing.key", "match": {"value": "x"}}]}),
        json!({"must": [{"is_empty": {"key": "missing"}}]}),
    ]
}

fn bound(v: &Value) -> Filter {
    let mut f = Filter::parse(v, "filter").unwrap_or_else(|e| panic!("{v}: {e}"));
    f.bind(&fields(), true, "filter")
        .unwrap_or_else(|e| panic!("{v}: {e}"));
    f
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let n = dot(&v, &v).sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// A store over `n` random documents with [`metadata`], with its HNSW index.
async fn random_store(pg: &Postgres, table: &str, n: usize) -> (PgStore, Vec<RecordWrite>) {
    let location = PgLocation::parse(&pg.url(table), None).expect("location");
    let pool = location.pool(PoolOptions::default()).expect("pool");
    let record = StoreRecord {
        encoder_fingerprint: "test-fingerprint".into(),
        encoder_name: "random".into(),
        dimension: DIM,
        ef_search: 64,
        payload_fields: fields(),
    };
    postgres::create(&pool, &location, &record)
        .await
        .expect("create");
    let mut rng = Rng(SEED);
    let docs: Vec<RecordWrite> = (0..n)
        .map(|i| RecordWrite {
            id: format!("d{i}"),
            title: String::new(),
            text: format!("document {i}"),
            metadata: metadata(&mut rng, i),
            vector: unit((0..DIM).map(|_| rng.unit()).collect()),
        })
        .collect();
    for chunk in docs.chunks(128) {
        postgres::copy_in(&pool, &location, chunk)
            .await
            .expect("copy");
    }
    postgres::create_hnsw(&pool, &location, 16, 64)
        .await
        .expect("hnsw");
    let store = PgStore::open(location, PoolOptions::default())
        .await
        .expect("open");
    (store, docs)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn filters_in_sql_admit_exactly_what_the_embedded_filter_admits() {
    let pg = Postgres::start();
    let rt = runtime();
    rt.block_on(async {
        let (store, docs) = random_store(&pg, "docs", 600).await;
        assert_eq!(store.count().await.unwrap(), 600);
        let mut nonempty = 0;
        for v in filters() {
            let f = bound(&v);
            let want: BTreeSet<String> = docs
                .iter()
                .filter(|d| f.admits(&d.id, d.metadata.as_ref()))
                .map(|d| d.id.clone())
                .collect();
            // k = every document: the search returns exactly the admitted set.
            let got = store
                .search(
                    vec![vec![docs[0].vector.clone()]],
                    StoreSearch {
                        k: docs.len(),
                        ef: 1000,
                        filter: Some(Arc::new(f)),
                        with_metadata: false,
                    },
                )
                .await
                .unwrap_or_else(|e| panic!("{v}: {e}"));
            let got: BTreeSet<String> = got[0].hits.iter().map(|h| h.id.clone()).collect();
            assert_eq!(
                got,
                want,
                "seed {SEED:#x}, filter {v}: only in SQL {:?}, only in capot {:?}",
                got.difference(&want).collect::<Vec<_>>(),
                want.difference(&got).collect::<Vec<_>>()
            );
            if !want.is_empty() && want.len() < docs.len() {
                nonempty += 1;
            }
        }
        // The filters really select (not all empty, not all everything).
        assert!(nonempty >= 15, "{nonempty}");
    });
}

#[test]
fn searches_return_the_exact_top_k_filtered_or_not_with_metadata() {
    let pg = Postgres::start();
    let rt = runtime();
    rt.block_on(async {
        let (store, docs) = random_store(&pg, "public.top", 1500).await;
        let mut rng = Rng(SEED ^ 7);
        for (qi, v) in filters().iter().enumerate() {
            let f = bound(v);
            let q = unit((0..DIM).map(|_| rng.unit()).collect());
            let mut want: Vec<(f32, &RecordWrite)> = docs
                .iter()
                .filter(|d| f.admits(&d.id, d.metadata.as_ref()))
                .map(|d| (dot(&q, &d.vector), d))
                .collect();
            want.sort_by(|a, b| b.0.total_cmp(&a.0));
            want.truncate(10);
            let got = store
                .search(
                    vec![vec![q.clone()]],
                    StoreSearch {
                        k: 10,
                        ef: 400,
                        filter: (qi > 0).then(|| Arc::new(f)),
                        with_metadata: true,
                    },
                )
                .await
                .expect("search");
            let hits = &got[0].hits;
            let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
            let want_ids: Vec<&str> = want.iter().map(|(_, d)| d.id.as_str()).collect();
            assert_eq!(ids, want_ids, "seed {SEED:#x}, filter {v}");
            for (h, (score, d)) in hits.iter().zip(&want) {
                assert!((h.score - score).abs() < 1e-5, "{} {score}", h.score);
                let m = d.metadata.clone().filter(|m| m != &json!({}));
                assert_eq!(h.metadata, m, "{}", d.id);
            }
            assert_eq!(
                hits.iter().map(|h| h.rank).collect::<Vec<_>>(),
                (1..=hits.len()).collect::<Vec<_>>()
            );
            assert_eq!(got[0].filter.is_some(), qi > 0);
        }
    });
}
