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
use capot::index::Strategy;
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
        // Five tenants, and one that holds a fiftieth of the documents.
        "tenant": if rng.below(50) == 0 { "t9".to_string() } else { format!("t{}", rng.below(5)) },
        "lang": if rng.below(5) == 0 { json!([lang, "en"]) } else { json!(lang) },
        "year": match rng.below(12) {
            0 => Value::Null,
            1 => json!("2020"),
            2 => json!(2020.5),
            3 => json!([2000 + rng.below(25), 2020.5, "2011"]),
            _ => json!(2000 + rng.below(25)),
        },
        "price": (rng.below(10_000) as f64) / 100.0,
        "ok": rng.below(2) == 0,
        "at": format!("2024-{:02}-{:02}T{:02}:00:00{}", 1 + rng.below(12), 1 + rng.below(28),
                      rng.below(24), if rng.below(3) == 0 { "+02:00" } else { "Z" }),
        "tags": (0..rng.below(4)).map(|_| format!("tag{}", rng.below(6))).collect::<Vec<_>>(),
        "author": match rng.below(8) {
            0 | 1 => json!([{"country": "nz", "born": 1950}, {"country": "us", "born": 1990 + rng.below(10)}]),
            2 => json!({"country": "de", "born": [1940 + rng.below(60), 1999]}),
            3 => json!({"country": "us", "born": "1970"}),
            _ => {
                let country = ["nz", "us", "de"][rng.below(3) as usize];
                json!({"country": country, "born": 1940 + rng.below(60)})
            }
        },
    });
    if rng.below(6) == 0 {
        m.as_object_mut().unwrap().remove("tags");
    }
    if rng.below(9) == 0 {
        m["at"] = json!("not a date");
    }
    // RFC 3339 as other writers write it (fractions, lower case, a space; several in an array),
    // and strings that only look like it: no calendar's day, no offset, a date alone.
    if rng.below(7) == 0 {
        m["at"] = json!(["2024-03-01 00:00:00.5z", "2024-07-15T08:30:00-05:00"]);
    } else if rng.below(7) == 0 {
        let odd = [
            "2024-07-15t13:30:00+00:00",
            "2024-02-30T00:00:00Z",
            "2024-08-01T00:00:00",
            "2024-08-01",
        ];
        m["at"] = json!(odd[rng.below(4) as usize]);
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
        ("author.born", FieldType::Integer),
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
        json!({"must_not": [{"key": "year", "range": {"gte": 2010}}]}),
        json!({"should": [{"key": "year", "range": {"lt": 2003}}, {"key": "price", "range": {"gte": 99}}]}),
        json!({"must": [{"key": "ok", "match": {"value": false}}]}),
        json!({"must": [{"key": "at", "range": {"gte": "2024-06-01T00:00:00Z", "lt": "2024-09-01T00:00:00+02:00"}}]}),
        json!({"must": [{"key": "at", "range": {"lt": "2024-03-01T00:00:00.6Z"}}]}),
        json!({"must_not": [{"key": "at", "range": {"gte": "2024-07-15T13:30:00Z"}}]}),
        json!({"must": [{"key": "tags", "match": {"value": "tag3"}}]}),
        json!({"must": [{"is_empty": {"key": "tags"}}]}),
        json!({"must": [{"is_null": {"key": "year"}}]}),
        json!({"must_not": [{"is_empty": {"key": "year"}}]}),
        json!({"must": [{"key": "author.country", "match": {"value": "nz"}}]}),
        json!({"must": [{"key": "author.born", "range": {"gte": 1945, "lt": 1995}}]}),
        json!({"must_not": [{"key": "author.born", "range": {"gte": 1990}}]}),
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
    (store_with(pg, table, &docs, fields()).await, docs)
}

/// A store over `docs` with `fields` declared, loaded as `capot index build --store` loads
/// (binary COPY in chunks), with its HNSW index.
async fn store_with(
    pg: &Postgres,
    table: &str,
    docs: &[RecordWrite],
    fields: BTreeMap<String, FieldSchema>,
) -> PgStore {
    let location = PgLocation::parse(&pg.url(table), None).expect("location");
    let pool = location.pool(PoolOptions::default()).expect("pool");
    let record = StoreRecord {
        encoder_fingerprint: "test-fingerprint".into(),
        encoder_name: "random".into(),
        dimension: DIM,
        ef_search: 64,
        payload_fields: fields,
    };
    postgres::create(&pool, &location, &record)
        .await
        .expect("create");
    for chunk in docs.chunks(128) {
        postgres::copy_in(&pool, &location, chunk)
            .await
            .expect("copy");
    }
    postgres::create_hnsw(&pool, &location, 16, 64)
        .await
        .expect("hnsw");
    PgStore::open(location, PoolOptions::default(), &[])
        .await
        .expect("open")
}

/// Asserts that `f` searched on `store` with k = every document returns exactly the documents
/// the embedded filter admits; whether it admits some and not all.
async fn admits_as_embedded(
    store: &PgStore,
    docs: &[RecordWrite],
    f: Filter,
    context: &str,
) -> bool {
    let want: BTreeSet<String> = docs
        .iter()
        .filter(|d| f.admits(&d.id, d.metadata.as_ref()))
        .map(|d| d.id.clone())
        .collect();
    let got = search_one(store, &docs[0].vector, docs.len(), 1000, Some(f), false)
        .await
        .unwrap_or_else(|e| panic!("seed {SEED:#x}, {context}: {e}"));
    let got: BTreeSet<String> = got[0].hits.iter().map(|h| h.id.clone()).collect();
    assert_eq!(
        got,
        want,
        "seed {SEED:#x}, {context}: only in SQL {:?}, only in capot {:?}",
        got.difference(&want).collect::<Vec<_>>(),
        want.difference(&got).collect::<Vec<_>>()
    );
    !want.is_empty() && want.len() < docs.len()
}

/// The location of `table` and a connection to its database.
async fn connect(pg: &Postgres, table: &str) -> (PgLocation, deadpool_postgres::Object) {
    let location = PgLocation::parse(&pg.url(table), None).expect("location");
    let client = location
        .pool(PoolOptions::default())
        .expect("pool")
        .get()
        .await
        .expect("connection");
    (location, client)
}

/// One query vector searched on `store` directly.
async fn search_one(
    store: &PgStore,
    vector: &[f32],
    k: usize,
    ef: usize,
    filter: Option<Filter>,
    with_metadata: bool,
) -> Result<Vec<capot::query::stages::CorpusHits>, capot::store::StoreError> {
    let scope = StoreSearch {
        k,
        ef,
        filter: filter.map(Arc::new),
        with_metadata,
        after: None,
        deadline: None,
    };
    store.search(vec![vec![vector.to_vec()]], scope).await
}

fn ids_of(hits: &[capot::query::Hit]) -> Vec<String> {
    hits.iter().map(|h| h.id.clone()).collect()
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
            if admits_as_embedded(&store, &docs, bound(&v), &format!("filter {v}")).await {
                nonempty += 1;
            }
        }
        // The filters really select (not all empty, not all everything).
        assert!(nonempty >= 15, "{nonempty}");

        // A range on a declared number or datetime and a match on a declared keyword, top-level
        // or nested, are answerable from their B-tree (and the rows holding arrays from their partial
        // index): with sequential scans off, the plan uses them.
        let (_, client) = connect(&pg, "docs").await;
        client
            .batch_execute("ANALYZE docs; SET enable_seqscan = off")
            .await
            .unwrap();
        let range = json!({"gte": 1960, "lt": 2012});
        for (key, kind, condition) in [
            (
                "year",
                FieldType::Integer,
                json!({"key": "year", "range": range}),
            ),
            (
                "author.born",
                FieldType::Integer,
                json!({"key": "author.born", "range": range}),
            ),
            (
                "lang",
                FieldType::Keyword,
                json!({"key": "lang", "match": {"any": ["de", "fr"]}}),
            ),
            (
                "author.country",
                FieldType::Keyword,
                json!({"key": "author.country", "match": {"value": "nz"}}),
            ),
            (
                "at",
                FieldType::Datetime,
                json!({"key": "at", "range": {"gte": "2024-06-01T00:00:00+02:00"}}),
            ),
        ] {
            let f = bound(&json!({ "must": [condition] }));
            let ranged: BTreeMap<String, FieldType> = [(key.to_string(), kind)].into();
            let sql = postgres::sql::filter_sql_on(&f, 1, "id", "metadata", &ranged);
            assert!(sql.text.contains("CASE WHEN"), "{}", sql.text);
            let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = Vec::new();
            for p in &sql.order {
                match p {
                    postgres::sql::Param::Path(i) => params.push(&sql.paths[*i]),
                    postgres::sql::Param::Ids(i) => params.push(&sql.ids[*i]),
                    postgres::sql::Param::Number(i) => params.push(&sql.numbers[*i]),
                    postgres::sql::Param::Keywords(i) => params.push(&sql.keywords[*i]),
                }
            }
            let plan: Vec<String> = client
                .query(
                    &format!("EXPLAIN SELECT id FROM docs WHERE {}", sql.text),
                    &params,
                )
                .await
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            let plan = plan.join("\n");
            assert!(
                plan.contains("_num") && plan.contains("_arr") && !plan.contains("Seq Scan"),
                "{key}: {plan}"
            );
        }
    });
}

/// 64-bit integers past 2^53 (account and tenant ids), where one float64 stands for many
/// integers: a match or a range on an integer field admits in SQL exactly what the embedded
/// filter admits (which compares them as integers), through the field's float64 B-tree
/// (`account`, declared); a match does on an undeclared key too (`raw`, paths alone).
#[test]
fn sixty_four_bit_integers_are_compared_exactly_in_sql() {
    let big: i64 = 1 << 53;
    let snowflake: i64 = 1_100_000_000_000_000_000;
    let values: Vec<i64> = [
        vec![
            1,
            2,
            3,
            big - 1,
            big,
            big + 1,
            big + 2,
            big + 3,
            -big,
            -big - 1,
        ],
        [0, 1, 2, 63, 64, 127, 128, 200]
            .iter()
            .map(|d| snowflake + d)
            .collect(),
        vec![i64::MAX, i64::MAX - 1, i64::MIN],
    ]
    .concat();
    let mut rng = Rng(SEED ^ 0x64);
    let docs: Vec<RecordWrite> = values
        .iter()
        .enumerate()
        .map(|(i, v)| RecordWrite {
            id: format!("d{i}"),
            title: String::new(),
            text: format!("document {i}"),
            metadata: Some(json!({"account": v, "raw": v})),
            vector: unit((0..DIM).map(|_| rng.unit()).collect()),
        })
        .collect();
    let declared: BTreeMap<String, FieldSchema> = [(
        "account".to_string(),
        FieldSchema {
            kind: FieldType::Integer,
            tenant: false,
        },
    )]
    .into();
    let s = |d: i64| json!(snowflake + d);
    let conditions = [
        json!({"match": {"value": s(1)}}),
        json!({"match": {"value": big + 1}}),
        json!({"match": {"any": [big + 3, s(64)]}}),
        json!({"match": {"except": [s(1)]}}),
        json!({"range": {"gte": s(1), "lte": s(127)}}),
        json!({"range": {"gt": s(0), "lt": s(128)}}),
        json!({"range": {"gt": big + 1}}),
        json!({"range": {"lt": -big}}),
        json!({"range": {"gt": 1.5, "lte": 3.5}}),
        json!({"range": {"gte": i64::MAX}}),
        json!({"range": {"gt": u64::MAX}}),
    ];
    let pg = Postgres::start();
    runtime().block_on(async {
        let store = store_with(&pg, "ids", &docs, declared.clone()).await;
        for key in ["account", "raw"] {
            // A range on an undeclared key compares as float64 (docs/api.md).
            for c in conditions
                .iter()
                .filter(|c| key == "account" || c.get("match").is_some())
            {
                let mut c = c.clone();
                c["key"] = json!(key);
                let v = json!({ "must": [c] });
                let mut f = Filter::parse(&v, "filter").unwrap_or_else(|e| panic!("{v}: {e}"));
                f.bind(&declared, true, "filter")
                    .unwrap_or_else(|e| panic!("{v}: {e}"));
                admits_as_embedded(&store, &docs, f, &format!("filter {v}")).await;
            }
        }
    });
}

/// Keys, values and ids made of what SQL, SQL/JSON paths and JSON escape or give meaning to
/// (quotes, backslashes, `$`, `@`, `?`, brackets, `%` and `_`, operators, comment marks,
/// non-ASCII, a newline in values): every generated filter admits through SQL exactly what the
/// embedded filter admits, on declared keys (the B-tree form) and undeclared ones (paths alone).
#[test]
fn hostile_keys_values_and_ids_are_matched_exactly_in_sql() {
    const PARTS: [&str; 28] = [
        "a",
        "b",
        "\"",
        "'",
        "\\",
        "$",
        "@",
        "?",
        "(",
        ")",
        "[",
        "]",
        "*",
        "%",
        "_",
        "-",
        ";",
        " ",
        "é",
        "字",
        "🙂",
        "\\u0041",
        "like_regex",
        "||",
        "&&",
        "==",
        "--",
        "/*",
    ];
    fn word(rng: &mut Rng, newline: bool) -> String {
        let mut w: String = (0..1 + rng.below(4))
            .map(|_| PARTS[rng.below(PARTS.len() as u64) as usize])
            .collect();
        if newline && rng.below(5) == 0 {
            w.push('\n');
        }
        w
    }
    let mut rng = Rng(SEED ^ 0x5eed);
    let mut keys: Vec<String> = Vec::new();
    while keys.len() < 4 {
        let k = word(&mut rng, false);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let values: Vec<Vec<String>> = keys
        .iter()
        .map(|_| (0..5).map(|_| word(&mut rng, true)).collect())
        .collect();
    let ids: Vec<String> = (0..300)
        .map(|i| format!("{}{i}", word(&mut rng, false)))
        .collect();
    let docs: Vec<RecordWrite> = ids
        .iter()
        .map(|id| {
            let mut m = serde_json::Map::new();
            for (k, vs) in keys.iter().zip(&values) {
                let pick = |rng: &mut Rng| json!(vs[rng.below(vs.len() as u64) as usize]);
                match rng.below(5) {
                    0 => {}
                    1 => {
                        m.insert(k.clone(), json!([pick(&mut rng), pick(&mut rng)]));
                    }
                    2 => {
                        m.insert(k.clone(), json!(rng.below(3)));
                    }
                    _ => {
                        m.insert(k.clone(), pick(&mut rng));
                    }
                }
            }
            RecordWrite {
                id: id.clone(),
                title: String::new(),
                text: "text".into(),
                metadata: Some(Value::Object(m)),
                vector: unit((0..DIM).map(|_| rng.unit()).collect()),
            }
        })
        .collect();
    // The first two keys declared keyword fields, the other two not.
    let declared: BTreeMap<String, FieldSchema> = keys[..2]
        .iter()
        .map(|k| {
            let schema = FieldSchema {
                kind: FieldType::Keyword,
                tenant: false,
            };
            (k.clone(), schema)
        })
        .collect();
    let pg = Postgres::start();
    let rt = runtime();
    rt.block_on(async {
        let store = store_with(&pg, "hostile", &docs, declared.clone()).await;
        let mut selective = 0;
        for round in 0..150 {
            let condition = |rng: &mut Rng| {
                let i = rng.below(keys.len() as u64) as usize;
                let value = |rng: &mut Rng| {
                    if rng.below(4) == 0 {
                        word(rng, true)
                    } else {
                        values[i][rng.below(values[i].len() as u64) as usize].clone()
                    }
                };
                match rng.below(5) {
                    0 => json!({"key": keys[i], "match": {"value": value(rng)}}),
                    1 => json!({"key": keys[i], "match": {"any": [value(rng), value(rng)]}}),
                    2 => json!({"key": keys[i], "match": {"except": [value(rng)]}}),
                    3 => json!({"has_id": [ids[rng.below(ids.len() as u64) as usize], word(rng, false)]}),
                    _ => json!({"is_empty": {"key": keys[i]}}),
                }
            };
            let v = match rng.below(3) {
                0 => json!({"must": [condition(&mut rng)]}),
                1 => json!({"should": [condition(&mut rng), condition(&mut rng)]}),
                _ => json!({"must": [condition(&mut rng)], "must_not": [condition(&mut rng)]}),
            };
            let mut f = Filter::parse(&v, "filter").unwrap_or_else(|e| panic!("{v}: {e}"));
            f.bind(&declared, true, "filter")
                .unwrap_or_else(|e| panic!("{v}: {e}"));
            let context = format!("round {round}, filter {v}");
            if admits_as_embedded(&store, &docs, f, &context).await {
                selective += 1;
            }
        }
        // Most filters select some documents and not all.
        assert!(selective >= 75, "{selective}");
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
            let got = search_one(&store, &q, 10, 400, (qi > 0).then_some(f), true)
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

        // A range or a keyword with a B-tree: the planner's estimate of what it admits picks
        // exact scoring of those rows when they are few (admitted² ≤ 2.5 × ef × rows), the HNSW
        // walk otherwise.
        let q = unit((0..DIM).map(|_| rng.unit()).collect());
        for (v, ef, exact) in [
            (
                json!({"must": [{"key": "year", "range": {"gte": 2010, "lt": 2011}}]}),
                16,
                true,
            ),
            (
                json!({"must": [{"key": "price", "range": {"lt": 90}}]}),
                16,
                false,
            ),
            // A keyword's B-tree gives PostgreSQL its statistics: a small tenant is scored
            // exactly, one of a fifth of the rows walked at a small ef...
            (
                json!({"must": [{"key": "tenant", "match": {"value": "t9"}}]}),
                16,
                true,
            ),
            (
                json!({"must": [{"key": "tenant", "match": {"value": "t1"}}]}),
                8,
                false,
            ),
            // ...and scored at an ef where admitted² is about 1.4 × ef × rows: past the point where
            // the two cross at 100,000 rows, short of where the walk won (docs/benchmarks.md
            // "Stores").
            (
                json!({"must": [{"key": "tenant", "match": {"value": "t1"}}]}),
                36,
                true,
            ),
        ] {
            let f = bound(&v);
            let admitted = docs
                .iter()
                .filter(|d| f.admits(&d.id, d.metadata.as_ref()))
                .count();
            let got = search_one(&store, &q, 10, ef, Some(f), false)
                .await
                .expect("search");
            let strategy = got[0].filter.expect("a filter report").strategy;
            assert_eq!(
                strategy == Strategy::Exact,
                exact,
                "{v} at ef {ef}: {strategy:?}, {admitted} admitted"
            );
            assert_eq!(got[0].hits.len(), admitted.min(10), "{v}");
        }

        // What the filter alone bounds: a few ids are scored exactly (not looked for by a walk
        // that cannot find them), a filter that admits nothing is answered without a search.
        let few = json!({"must": [{"has_id": [docs[3].id, docs[700].id, "absent"]}]});
        let got = search_one(&store, &q, 10, 8, Some(bound(&few)), false)
            .await
            .expect("search");
        assert_eq!(
            got[0].filter.expect("a filter report").strategy,
            Strategy::Exact
        );
        let mut found = ids_of(&got[0].hits);
        found.sort();
        let mut want = vec![docs[3].id.clone(), docs[700].id.clone()];
        want.sort();
        assert_eq!(found, want);
        let nothing = json!({"should": [{"key": "tenant", "match": {"any": []}}, {"has_id": []}]});
        let got = search_one(&store, &q, 10, 8, Some(bound(&nothing)), false)
            .await
            .expect("search");
        let report = got[0].filter.expect("a filter report");
        assert_eq!(
            (report.strategy, report.admitted, got[0].hits.len()),
            (Strategy::Empty, Some(0), 0)
        );

        // A table whose declared range index is missing (loaded by an older capot) keeps the
        // path form: no B-tree estimate, the walk, every hit still there.
        let (location, client) = connect(&pg, "public.top").await;
        let index = postgres::sql::range_index_name("public_top", "year", FieldType::Integer);
        client
            .batch_execute(&format!("DROP INDEX \"{index}\""))
            .await
            .unwrap();
        let older = PgStore::open(location.clone(), PoolOptions::default(), &[])
            .await
            .unwrap();
        let narrow = json!({"must": [{"key": "year", "range": {"gte": 2010, "lt": 2011}}]});
        let got = search_one(&older, &q, 10, 16, Some(bound(&narrow)), false)
            .await
            .expect("search");
        assert_ne!(
            got[0].filter.expect("a filter report").strategy,
            Strategy::Exact
        );
        let admitted = docs
            .iter()
            .filter(|d| bound(&narrow).admits(&d.id, d.metadata.as_ref()))
            .count();
        assert_eq!(got[0].hits.len(), admitted.min(10));
        let path_form = ids_of(&got[0].hits);

        // Declared again on the running store (what `PUT /admin/index/payload/year` does): the
        // B-tree is built (concurrently), recorded, and the same search takes the exact plan
        // with the same hits; a declaration as float replaces the integer one's indexes;
        // dropped, the path form again, its indexes gone, and a fresh open reads the record.
        let integer = FieldSchema {
            kind: FieldType::Integer,
            tenant: false,
        };
        // Another server on the same table learns of declarations from its health checks.
        let other = PgStore::open(location.clone(), PoolOptions::default(), &[])
            .await
            .unwrap();
        let watcher = other.watch_health(std::time::Duration::from_millis(20));
        let other_sees = |want: Option<FieldSchema>| {
            let other = &other;
            async move {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while other.payload_fields().get("year").copied() != want {
                    assert!(std::time::Instant::now() < deadline, "never saw {want:?}");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        };
        older
            .set_payload_index("year", Some(integer))
            .await
            .expect("declare");
        // (The record declared `year` all along: what the other server must learn is that its
        // B-tree now exists.)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let got = search_one(&other, &q, 10, 16, Some(bound(&narrow)), false)
                .await
                .expect("search");
            if got[0].filter.expect("a filter report").strategy == Strategy::Exact {
                assert_eq!(ids_of(&got[0].hits), path_form);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the other server never used the new B-tree"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let valid = |name: String| {
            let client = &client;
            async move {
                client
                    .query_one(
                        "SELECT count(*) FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
                         WHERE c.relname = $1 AND i.indisvalid",
                        &[&name],
                    )
                    .await
                    .unwrap()
                    .get::<_, i64>(0)
            }
        };
        assert_eq!(valid(index.clone()).await, 1, "the B-tree is rebuilt");
        let got = search_one(&older, &q, 10, 16, Some(bound(&narrow)), false)
            .await
            .expect("search");
        assert_eq!(
            got[0].filter.expect("a filter report").strategy,
            Strategy::Exact
        );
        assert_eq!(
            ids_of(&got[0].hits),
            path_form,
            "the same hits in either form"
        );
        let float = FieldSchema {
            kind: FieldType::Float,
            ..integer
        };
        older
            .set_payload_index("year", Some(float))
            .await
            .expect("redeclare");
        let float_index = postgres::sql::range_index_name("public_top", "year", FieldType::Float);
        assert_eq!(
            valid(index.clone()).await,
            0,
            "the integer B-tree is dropped"
        );
        assert_eq!(valid(float_index.clone()).await, 1);
        assert_eq!(older.payload_fields()["year"], float);
        older.set_payload_index("year", None).await.expect("drop");
        assert_eq!(valid(float_index).await, 0);
        assert!(!older.payload_fields().contains_key("year"));
        other_sees(None).await;
        watcher.abort();
        let got = search_one(&older, &q, 10, 16, Some(bound(&narrow)), false)
            .await
            .expect("search");
        assert_ne!(
            got[0].filter.expect("a filter report").strategy,
            Strategy::Exact
        );
        assert_eq!(ids_of(&got[0].hits), path_form);
        let reopened = PgStore::open(location.clone(), PoolOptions::default(), &[])
            .await
            .unwrap();
        assert!(!reopened.payload_fields().contains_key("year"));
        assert_eq!(reopened.payload_fields().len(), fields().len() - 1);
    });
}

/// `curl -X METHOD URL [-d BODY]`: (status, headers, JSON body).
fn curl(
    method: &str,
    url: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> (u16, String, Value) {
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-sS", "--max-time", "60", "-D", "-", "-X", method]);
    if let Some(b) = body {
        cmd.args(["-H", "content-type: application/json", "-d"])
            .arg(b.to_string());
    }
    if let Some(t) = token {
        cmd.args(["-H", &format!("authorization: Bearer {t}")]);
    }
    let out = cmd.arg(url).output().expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (
        status,
        head.to_lowercase(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// `capot index build --store` of `corpus` into `table`; returns its stderr.
fn load(pg: &Postgres, corpus: &std::path::Path, table: &str, extra: &[&str]) -> String {
    let url = pg.url(table);
    let mut args = vec![
        "index",
        "build",
        "--doc-encoder",
        common::minilm_bundle().to_str().unwrap(),
        "--corpus",
        corpus.to_str().unwrap(),
        "--store",
        &url,
        "--chunk-size",
        "64",
    ];
    args.extend_from_slice(extra);
    let o = common::run_capot(&args, b"");
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "index build --store: {stderr}");
    stderr
}

/// A PostgreSQL holding the built-in corpus in the table `docs`, and a data directory for the
/// service that serves it.
fn default_corpus_store() -> (Postgres, tempfile::TempDir) {
    let pg = Postgres::start();
    load(
        &pg,
        &common::root().join("data/default-corpus"),
        "docs",
        &[],
    );
    (pg, tempfile::tempdir().unwrap())
}

fn serve_store(pg: &Postgres, table: &str, data: &std::path::Path) -> common::Server {
    common::Server::start(&[
        "--store",
        &pg.url(table),
        "--encoder",
        common::minilm_bundle().to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ])
}

/// `capot serve` on a table another pipeline filled, through `columns` (`--store-columns`),
/// with MiniLM as the document and the query encoder.
fn serve_attached(
    pg: &Postgres,
    table: &str,
    columns: &str,
    data: &std::path::Path,
) -> common::Server {
    let minilm = common::minilm_bundle();
    common::Server::start(&[
        "--store",
        &pg.url(table),
        "--store-columns",
        columns,
        "--document-encoder",
        minilm.to_str().unwrap(),
        "--encoder",
        minilm.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ])
}

/// `capot index vocab --store URL [--store-columns SPEC] --data-dir DATA`, which must succeed;
/// its summary on stdout.
fn build_store_vocab(url: &str, columns: Option<&str>, data: &std::path::Path) -> Value {
    let mut args = vec!["index", "vocab", "--store", url];
    if let Some(c) = columns {
        args.extend(["--store-columns", c]);
    }
    args.extend(["--data-dir", data.to_str().unwrap()]);
    let o = common::run_capot(&args, b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn search(server: &common::Server, body: &Value) -> Value {
    let (code, _, v) = curl("POST", &format!("{}/search", server.base), Some(body), None);
    assert_eq!(code, 200, "{body} -> {v}");
    v
}

#[test]
fn serving_from_postgres_gives_the_embedded_index_answers() {
    let pg = Postgres::start();
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::metadata_corpus(tmp.path());
    let first = load(
        &pg,
        &corpus,
        "docs",
        &[
            "--payload-index",
            "tenant:keyword:tenant",
            "--payload-index",
            "year:integer",
        ],
    );
    assert!(first.contains("loaded 200 documents"), "{first}");
    // Loading again skips what is stored: nothing twice, nothing lost.
    let again = load(&pg, &corpus, "docs", &[]);
    assert!(
        again.contains("loaded 0 documents") && again.contains("200 skipped"),
        "{again}"
    );
    assert_eq!(pg.psql("SELECT count(*) FROM docs"), "200");
    assert_eq!(
        pg.psql("SELECT metadata->>'tenant' FROM docs WHERE id = 'd002'"),
        common::test_metadata(1).unwrap()["tenant"]
            .as_str()
            .unwrap()
    );

    let data = tempfile::tempdir().unwrap();
    let stored = serve_store(&pg, "docs", data.path());
    let embedded_data = tempfile::tempdir().unwrap();
    let embedded = common::Server::start(&[
        "--index",
        common::filtered_index().to_str().unwrap(),
        "--encoder",
        common::minilm_bundle().to_str().unwrap(),
        "--data-dir",
        embedded_data.path().to_str().unwrap(),
        "--allow-unindexed-filters",
    ]);
    let info = curl("GET", &format!("{}/info", stored.base), None, None).2;
    assert_eq!(info["store"]["info"]["kind"], "postgres", "{info}");
    assert!(!info.to_string().contains("password"));
    let queries = [
        "what is the capital of france",
        "how do vaccines work",
        "symptoms of vitamin deficiency",
        "history of the roman empire",
    ];
    let filters = [
        Value::Null,
        json!({"must": [{"key": "tenant", "match": {"value": "t1"}}]}),
        json!({"must": [{"key": "lang", "match": {"any": ["de", "fr"]}}],
               "must_not": [{"key": "author.country", "match": {"value": "nz"}}]}),
        json!({"must": [{"key": "year", "range": {"gte": 2003, "lt": 2006}}]}),
        json!({"must": [{"key": "published", "range": {"gt": "2024-01-20T00:00:00Z"}}]}),
        json!({"must": [{"has_id": ["d001", "d007", "d150"]}]}),
    ];
    for (b, f) in same_answers(&embedded, &stored, &queries, &filters, 10) {
        if !f.is_null() {
            assert!(b["filter"]["strategy"].is_string(), "{b}");
        }
    }
    // A bad filter gets the same 400 from either store.
    let bad = json!({"query": "x", "filter": {"must": [{"key": "year", "range": {"gt": "soon"}}]}});
    let (ca, _, ea) = curl(
        "POST",
        &format!("{}/search", embedded.base),
        Some(&bad),
        None,
    );
    let (cb, _, eb) = curl("POST", &format!("{}/search", stored.base), Some(&bad), None);
    assert_eq!((ca, cb), (400, 400));
    assert_eq!(ea["error"]["code"], eb["error"]["code"]);
}

#[test]
fn a_table_another_pipeline_filled_is_searched_through_its_columns() {
    let (pg, data) = default_corpus_store();
    // Another pipeline's table: its own column names, no titles, a json metadata column and a
    // cosine HNSW index; the same vectors as capot's own table `docs`.
    pg.psql(
        "UPDATE docs SET metadata = jsonb_build_object('parity',
             CASE WHEN substr(id, 2)::int % 2 = 1 THEN 'odd' ELSE 'even' END);
         CREATE TABLE passages AS
             SELECT id AS doc_id, text AS body, metadata::json AS attrs, embedding AS emb FROM docs;
         CREATE INDEX passages_emb ON passages USING hnsw (emb vector_cosine_ops)",
    );
    let minilm = common::minilm_bundle();
    let columns = "id=doc_id,embedding=emb,text=body,metadata=attrs";
    let attached_data = tempfile::tempdir().unwrap();
    let attached = serve_attached(&pg, "passages", columns, attached_data.path());
    let own = serve_store(&pg, "docs", data.path());
    let info = curl("GET", &format!("{}/info", attached.base), None, None).2;
    assert_eq!(info["store"]["info"]["metric"], "cosine", "{info}");
    assert_eq!(info["store"]["info"]["writable"], false, "{info}");

    // The same documents in the same order with the same scores (cosine = inner product of
    // unit vectors), filtered by the json column or not; no titles.
    let filters = [
        Value::Null,
        json!({"must": [{"key": "parity", "match": {"value": "odd"}}]}),
        json!({"must": [{"has_id": ["d002", "d003", "d150"]}]}),
    ];
    let queries = [
        "how long do antibiotics take to work",
        "history of the roman empire",
    ];
    for (b, _) in same_answers(&own, &attached, &queries, &filters, 5) {
        assert!(!common::hit_ids(&b).is_empty(), "{b}");
        for hit in b["results"].as_array().unwrap() {
            assert_eq!(hit["title"], "", "{hit}");
        }
    }
    // capot only searches it: writes are refused with a reason, and the table is unchanged.
    let token = admin_token(attached_data.path());
    let doc =
        json!({"documents": [{"id": "new-1", "text": "Otters hold hands while they sleep."}]});
    let (code, _, v) = curl(
        "POST",
        &format!("{}/admin/documents", admin_base(&attached)),
        Some(&doc),
        Some(&token),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "store_read_only", "{v}");
    assert_eq!(pg.psql("SELECT count(*) FROM passages"), "200");
    let (code, _, v) = curl(
        "PUT",
        &format!("{}/admin/index/payload/parity", admin_base(&attached)),
        Some(&json!({"type": "keyword"})),
        Some(&token),
    );
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (409, Some("store_read_only")),
        "{v}"
    );

    // Query repair's vocabulary comes from the mapped text column.
    let words = build_store_vocab(&pg.url("passages"), Some(columns), attached_data.path());
    assert!(words["words"].as_u64().unwrap() > 100, "{words}");

    // Another pipeline's rows may lack a title, a text or a vector (NULL): they read as empty,
    // a row without a vector is no hit, and nothing fails.
    pg.psql(
        "ALTER TABLE passages ADD COLUMN headline text;
         UPDATE passages SET headline = 'Otters' WHERE doc_id = 'd001';
         UPDATE passages SET body = NULL WHERE doc_id = 'd002';
         INSERT INTO passages (doc_id, body) VALUES ('no-vector', 'a row the pipeline has not embedded')",
    );
    let titled = format!("{columns},title=headline");
    build_store_vocab(&pg.url("passages"), Some(&titled), attached_data.path());
    drop(attached);
    let attached = serve_attached(&pg, "passages", &titled, attached_data.path());
    let info = curl("GET", &format!("{}/info", attached.base), None, None).2;
    assert_eq!(
        info["repair"]["store_vocabulary"]["documents"], 201,
        "{info}"
    );
    let v = search(
        &attached,
        &json!({"query": "otters", "k": 5, "ef": 1000,
                "filter": {"must": [{"has_id": ["d001", "d002", "no-vector"]}]}}),
    );
    let mut got: Vec<(String, String, String)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let s = |k: &str| h[k].as_str().unwrap().to_string();
            (
                s("id"),
                s("title"),
                if h["text"] == "" { "" } else { "text" }.into(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("d001".into(), "Otters".into(), "text".into()),
            ("d002".into(), String::new(), String::new())
        ],
        "{v}"
    );

    // A mapping that does not fit the table is refused at start, with the reason.
    for (spec, encoder, why) in [
        (
            "id=doc_id,embedding=vec,text=body",
            true,
            "has no column vec (the embedding of --store-columns)",
        ),
        (
            "id=doc_id,embedding=body,text=body",
            true,
            "column body (the embedding) is text, not vector",
        ),
        (columns, false, "--store-columns needs --document-encoder"),
    ] {
        let mut args = vec![
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "off",
            "--admin-addr",
            "127.0.0.1:0",
            "--store",
        ];
        let url = pg.url("passages");
        args.extend([url.as_str(), "--store-columns", spec, "--encoder"]);
        args.push(minilm.to_str().unwrap());
        if encoder {
            args.extend(["--document-encoder", minilm.to_str().unwrap()]);
        }
        args.extend(["--data-dir", attached_data.path().to_str().unwrap()]);
        let o = common::run_capot(&args, b"");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{spec}: {stderr}");
        assert!(stderr.contains(why), "{spec}: {stderr}");
    }
}

/// Searches every query under every filter (none for `null`) on both servers, exactly (ef
/// above the corpus), and asserts the same ids in the same order with the same scores (within
/// 1e-4), texts and metadata; returns each of `b`'s answers with its filter.
fn same_answers(
    a: &common::Server,
    b: &common::Server,
    queries: &[&str],
    filters: &[Value],
    k: usize,
) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for q in queries {
        for f in filters {
            let mut body =
                json!({"query": q, "k": k, "ef": 1000, "repair": "off", "with_metadata": true});
            if !f.is_null() {
                body["filter"] = f.clone();
            }
            let (x, y) = (search(a, &body), search(b, &body));
            assert_eq!(common::hit_ids(&x), common::hit_ids(&y), "{body}");
            for (hx, hy) in x["results"]
                .as_array()
                .unwrap()
                .iter()
                .zip(y["results"].as_array().unwrap())
            {
                let (sx, sy) = (hx["score"].as_f64().unwrap(), hy["score"].as_f64().unwrap());
                assert!((sx - sy).abs() < 1e-4, "{body}: {sx} vs {sy}");
                assert_eq!(hx["metadata"], hy["metadata"], "{body}");
                assert_eq!(hx["text"], hy["text"], "{body}");
            }
            out.push((y, f.clone()));
        }
    }
    out
}

/// Upserts one document through the admin API; its `operation_id`.
fn write_one(admin: &str, token: &str, id: &str, text: &str) -> u64 {
    let doc = json!({"documents": [{"id": id, "text": text}]});
    let (code, _, v) = curl(
        "POST",
        &format!("{admin}/admin/documents"),
        Some(&doc),
        Some(token),
    );
    assert_eq!(code, 200, "{v}");
    v["result"]["operation_id"].as_u64().unwrap()
}

fn admin_token(data: &std::path::Path) -> String {
    std::fs::read_to_string(data.join("admin-token"))
        .expect("admin-token")
        .trim()
        .to_string()
}

fn admin_base(server: &common::Server) -> String {
    let log = server.stderr.lock().unwrap().clone();
    let addr = log
        .lines()
        .find_map(|l| l.strip_prefix("capot: admin listening on "))
        .expect("admin address");
    addr.trim().to_string()
}

/// Waits (bounded) until `/ready` answers `want`; returns how long it took.
fn wait_ready_is(
    server: &common::Server,
    want: u16,
    limit: std::time::Duration,
) -> std::time::Duration {
    let started = std::time::Instant::now();
    loop {
        let code = common::http_get(server.addr, "/ready")
            .map(|(c, _)| c)
            .unwrap_or(0);
        if code == want {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "/ready never answered {want}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// What a write client saw: the ids whose writes and deletes were answered 200, the ids whose
/// delete was sent at all (one may be applied though its answer never came), and the next
/// number it would have written.
#[derive(Default)]
struct Written {
    acked: Vec<String>,
    deleted: Vec<String>,
    tried: Vec<String>,
    next: usize,
}

impl Written {
    fn extend(&mut self, other: Written) {
        self.acked.extend(other.acked);
        self.deleted.extend(other.deleted);
        self.tried.extend(other.tried);
        self.next = other.next;
    }

    /// Every acknowledged write of `prefix` is in the table unless a delete of it was sent, and
    /// no acknowledged delete is.
    fn check(&self, pg: &Postgres, prefix: &str) {
        let present: BTreeSet<String> = pg
            .psql(&format!("SELECT id FROM docs WHERE id LIKE '{prefix}%'"))
            .lines()
            .map(str::to_string)
            .collect();
        for id in &self.acked {
            assert!(
                present.contains(id) || self.tried.contains(id),
                "acknowledged {id} is missing"
            );
        }
        for id in &self.deleted {
            assert!(
                !present.contains(id),
                "acknowledged delete of {id} is present"
            );
        }
    }
}

/// A client writing `{prefix}{i}` from `start` through the admin API until `stop`, deleting the
/// one before every `every`-th write; each acknowledged write bumps `counter`. A 503 (the
/// database away) is retried; no answer at all (the service killed) ends it; any other status
/// fails the test.
fn write_load(
    admin: String,
    token: String,
    prefix: &'static str,
    start: usize,
    every: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
    counter: Arc<std::sync::atomic::AtomicUsize>,
) -> std::thread::JoinHandle<Written> {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        let mut w = Written::default();
        let mut i = start;
        while !stop.load(Ordering::Acquire) {
            let id = format!("{prefix}{i}");
            let body = json!({"documents": [{"id": id, "text": format!("ledger entry {i} for the warehouse")}]});
            let (code, _, v) = curl(
                "POST",
                &format!("{admin}/admin/documents"),
                Some(&body),
                Some(&token),
            );
            match code {
                200 => {
                    w.acked.push(id);
                    counter.fetch_add(1, Ordering::AcqRel);
                }
                503 => {}
                0 => break,
                _ => panic!("write answered {code}: {v}"),
            }
            if i % every == every - 1 && i > start {
                let gone = format!("{prefix}{}", i - 1);
                w.tried.push(gone.clone());
                let (code, _, _) = curl(
                    "DELETE",
                    &format!("{admin}/admin/documents/{gone}"),
                    None,
                    Some(&token),
                );
                if code == 200 {
                    w.deleted.push(gone);
                }
            }
            i += 1;
        }
        w.next = i;
        w
    })
}

/// Waits (bounded) until `counter` has grown by `by`.
fn progress(counter: &std::sync::atomic::AtomicUsize, by: usize) {
    use std::sync::atomic::Ordering;
    let from = counter.load(Ordering::Acquire);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while counter.load(Ordering::Acquire) < from + by {
        assert!(
            std::time::Instant::now() < deadline,
            "the load made no progress"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn writes_are_committed_before_they_are_answered_and_survive_sigkill() {
    let (pg, data) = default_corpus_store();
    let mut server = serve_store(&pg, "docs", data.path());
    let token = admin_token(data.path());
    let zorb = "The zorblax is a purple flightless bird of the outer moons.";
    let body = json!({"documents": [
        {"id": "new-1", "title": "Zorblax", "text": zorb, "metadata": {"lang": "en"}},
        {"id": "d002", "text": "Sourdough needs a lively starter."},
    ]});
    let admin = admin_base(&server);
    let (code, _, v) = curl(
        "POST",
        &format!("{admin}/admin/documents"),
        Some(&body),
        Some(&token),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["result"]["status"], "completed", "{v}");
    let first = v["result"]["operation_id"].as_u64().expect("position");
    // In the table once answered, and found by the next search.
    assert_eq!(
        pg.psql("SELECT text FROM docs WHERE id = 'd002'"),
        "Sourdough needs a lively starter."
    );
    let hits = search(
        &server,
        &json!({"query": format!("Zorblax {zorb}"), "k": 3}),
    );
    assert_eq!(common::hit_ids(&hits)[0], "new-1");
    let hits = search(
        &server,
        &json!({"query": "zorblax", "filter": {"must": [{"key": "lang", "match": {"value": "en"}}]}}),
    );
    assert_eq!(common::hit_ids(&hits), ["new-1"]);
    let (code, _, doc) = curl(
        "GET",
        &format!("{admin}/admin/documents/new-1"),
        None,
        Some(&token),
    );
    assert_eq!(code, 200, "{doc}");
    assert_eq!(
        (doc["source"].as_str(), doc["metadata"]["lang"].as_str()),
        (Some("store"), Some("en"))
    );
    let (code, _, v) = curl(
        "DELETE",
        &format!("{admin}/admin/documents/new-1"),
        None,
        Some(&token),
    );
    assert_eq!(code, 200, "{v}");
    assert!(v["result"]["operation_id"].as_u64().unwrap() > first);
    assert_eq!(pg.psql("SELECT count(*) FROM docs WHERE id = 'new-1'"), "0");
    let (code, _, _) = curl(
        "GET",
        &format!("{admin}/admin/documents/new-1"),
        None,
        Some(&token),
    );
    assert_eq!(code, 404);
    // What PostgreSQL cannot hold (the NUL character, in a text, a title or metadata) is refused
    // with a reason and nothing is written; a filter holding it is refused too.
    for doc in [
        json!({"id": "nul-1", "text": "a \u{0} b"}),
        json!({"id": "nul-1", "title": "\u{0}", "text": "ok"}),
        json!({"id": "nul-1", "text": "ok", "metadata": {"tags": ["x\u{0}"]}}),
    ] {
        let (code, _, v) = curl(
            "POST",
            &format!("{admin}/admin/documents"),
            Some(&json!({"documents": [doc]})),
            Some(&token),
        );
        assert_eq!(code, 400, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("U+0000"),
            "{v}"
        );
    }
    assert_eq!(pg.psql("SELECT count(*) FROM docs WHERE id = 'nul-1'"), "0");
    let (code, _, v) = curl(
        "GET",
        &format!("{admin}/admin/documents/%00"),
        None,
        Some(&token),
    );
    assert_eq!(code, 404, "{v}");
    for filter in [
        json!({"must": [{"key": "lang", "match": {"value": "e\u{0}n"}}]}),
        json!({"must_not": [{"has_id": ["d\u{0}"]}]}),
    ] {
        let (code, _, v) = curl(
            "POST",
            &format!("{}/search", server.base),
            Some(&json!({"query": "sourdough", "filter": filter})),
            None,
        );
        assert_eq!(code, 400, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("U+0000"),
            "{v}"
        );
    }
    // The store's own view, and what belongs to the embedded index only.
    let (code, _, v) = curl("GET", &format!("{admin}/admin/index"), None, Some(&token));
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (v["documents"].as_u64(), v["healthy"].as_bool()),
        (Some(200), Some(true)),
        "{v}"
    );
    // A payload index declared on the running store: built in the database in the background
    // (202, then `payload.builds` until it is recorded), its B-tree present, ranges on it
    // answered; dropped again (200, then 404).
    let (code, _, v) = curl(
        "PUT",
        &format!("{admin}/admin/index/payload/rank"),
        Some(&json!({"type": "integer"})),
        Some(&token),
    );
    assert_eq!(
        (code, v["result"]["state"].as_str()),
        (202, Some("building")),
        "{v}"
    );
    // A drop while the build runs is refused (the build would declare the field again after
    // it), not answered 404 as if nothing were declared; once the build is done it drops.
    let (code, _, v) = curl(
        "DELETE",
        &format!("{admin}/admin/index/payload/rank"),
        None,
        Some(&token),
    );
    assert!(
        code == 409 && v["error"]["code"] == "payload_index_building" || code == 200,
        "{code} {v}"
    );
    if code == 200 {
        // The build finished first: declare it again for what follows.
        let (code, _, v) = curl(
            "PUT",
            &format!("{admin}/admin/index/payload/rank"),
            Some(&json!({"type": "integer"})),
            Some(&token),
        );
        assert_eq!(code, 202, "{v}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let view = loop {
        let (_, _, v) = curl("GET", &format!("{admin}/admin/index"), None, Some(&token));
        let declared = v["payload"]["indexes"].as_array().is_some_and(|a| {
            a.iter()
                .any(|f| f["key"] == "rank" && f["type"] == "integer")
        });
        if declared && v["payload"]["builds"].get("rank").is_none() {
            break v;
        }
        assert!(v["payload"]["builds"]["rank"]["state"] != "failed", "{v}");
        assert!(std::time::Instant::now() < deadline, "never built: {v}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        view["store"]["payload_fields"]["rank"]["type"], "integer",
        "{view}"
    );
    let btree =
        "SELECT count(*) FROM pg_indexes WHERE tablename = 'docs' AND indexdef LIKE '%''rank''%'";
    assert_eq!(
        pg.psql(btree),
        "2",
        "the B-tree and the partial index of arrays"
    );
    let ranged = json!({"query": "vaccines", "k": 3,
                        "filter": {"must": [{"key": "rank", "range": {"gte": 1}}]}});
    let (code, _, v) = curl(
        "POST",
        &format!("{}/search", server.base),
        Some(&ranged),
        None,
    );
    assert_eq!(code, 200, "{v}");
    let drop_rank = || {
        curl(
            "DELETE",
            &format!("{admin}/admin/index/payload/rank"),
            None,
            Some(&token),
        )
    };
    let (code, _, v) = drop_rank();
    assert_eq!((code, &v["result"]["dropped"]), (200, &json!(true)), "{v}");
    assert_eq!(pg.psql(btree), "0");
    let (code, _, v) = drop_rank();
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (404, Some("payload_index_not_found")),
        "{v}"
    );

    // An encoder loaded through the admin API is checked against the store's document encoder
    // and serves searches like the one loaded at start.
    let load_body = json!({"name": "minilm-2", "path": common::minilm_bundle()});
    let (code, _, v) = curl(
        "POST",
        &format!("{admin}/admin/encoders"),
        Some(&load_body),
        Some(&token),
    );
    assert_eq!(code, 201, "{v}");
    let a = search(&server, &json!({"query": "how do vaccines work", "k": 5}));
    let b = search(
        &server,
        &json!({"query": "how do vaccines work", "k": 5, "encoder": "minilm-2"}),
    );
    assert_eq!(common::hit_ids(&a), common::hit_ids(&b));

    // SIGKILL the service while a client writes; every write it answered is in the table and
    // every delete it answered is not.
    const KILLS: usize = 20;
    let mut written = Written::default();
    for _ in 0..KILLS {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let acked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writer = write_load(
            admin_base(&server),
            admin_token(data.path()),
            "w-",
            written.next,
            3,
            stop.clone(),
            acked.clone(),
        );
        // Kill once some writes of this round were answered.
        progress(&acked, 3);
        server.child.kill().expect("SIGKILL capot");
        let _ = server.child.wait();
        stop.store(true, std::sync::atomic::Ordering::Release);
        written.extend(writer.join().expect("writer"));
        server = serve_store(&pg, "docs", data.path());
    }
    written.check(&pg, "w-");
    assert!(written.acked.len() >= KILLS * 3, "{}", written.acked.len());
}

#[test]
fn a_database_that_goes_away_makes_the_service_unready_and_it_recovers_by_itself() {
    let (pg, data) = default_corpus_store();
    let server = serve_store(&pg, "docs", data.path());
    let token = admin_token(data.path());
    let admin = admin_base(&server);
    let body = json!({"query": "how do vaccines work", "k": 5});
    let before = search(&server, &body);

    for (round, how) in ["stop", "kill"].into_iter().enumerate() {
        match how {
            "stop" => pg.stop(),
            _ => pg.kill(),
        }
        // Searches and writes answer 503 with a reason and Retry-After, never hang or panic.
        let (code, head, v) = curl(
            "POST",
            &format!("{}/search", server.base),
            Some(&body),
            None,
        );
        assert_eq!(code, 503, "{v}");
        assert!(head.contains("retry-after"), "{head}");
        assert!(
            ["store_unavailable", "not_ready"].contains(&v["error"]["code"].as_str().unwrap_or("")),
            "{v}"
        );
        let doc =
            json!({"documents": [{"id": format!("down-{round}"), "text": "written while down"}]});
        let (code, _, v) = curl(
            "POST",
            &format!("{admin}/admin/documents"),
            Some(&doc),
            Some(&token),
        );
        assert_eq!(code, 503, "{v}");
        wait_ready_is(&server, 503, std::time::Duration::from_secs(30));
        // A vocabulary rebuild would only fail: refused at once.
        let (code, _, v) = curl(
            "POST",
            &format!("{admin}/admin/index/vocab"),
            None,
            Some(&token),
        );
        assert_eq!(
            (code, v["error"]["code"].as_str()),
            (503, Some("store_unavailable")),
            "{v}"
        );
        pg.start_again();
        let took = wait_ready_is(&server, 200, std::time::Duration::from_secs(30));
        eprintln!("{how}: ready again {took:?} after the database started");
        assert_eq!(
            common::hit_ids(&search(&server, &body)),
            common::hit_ids(&before)
        );
        // The write that was refused was not made.
        assert_eq!(
            pg.psql(&format!(
                "SELECT count(*) FROM docs WHERE id = 'down-{round}'"
            )),
            "0"
        );
    }
    assert!(!server.stderr.lock().unwrap().contains("panicked"));
}

/// A service still waiting for its database when it is told to stop exits at once, with
/// success: before, the wait went on in a blocking thread the runtime waited for, and the process
/// lived on after `capot: stopped` until SIGKILL.
#[test]
fn a_service_waiting_for_its_database_stops_on_sigterm() {
    // A port nothing listens on: every connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("postgres://capot@127.0.0.1:{port}/search?table=docs");
    let mut server = common::Server::start_with(
        &[
            "--store",
            &url,
            "--encoder",
            common::minilm_bundle().to_str().unwrap(),
        ],
        &[],
        false,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !server
        .stderr
        .lock()
        .unwrap()
        .contains("waiting for the document store")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no wait reported: {}",
            server.stderr.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (code, _) = common::http_get(server.addr, "/ready").expect("/ready");
    assert_eq!(code, 503);
    let status = server.terminate();
    assert!(
        status.success(),
        "{status:?}: {}",
        server.stderr.lock().unwrap()
    );
}

#[test]
fn repair_reads_the_vocabulary_built_from_the_table_and_rebuilt_as_it_grows() {
    let (pg, data) = default_corpus_store();
    let typo = json!({"query": "symptoms of vitamin d deficeincy", "repair": "on"});
    {
        // No vocabulary yet: `on` is refused with the way to build one, `auto` skips.
        let server = serve_store(&pg, "docs", data.path());
        let (code, _, v) = curl(
            "POST",
            &format!("{}/search", server.base),
            Some(&typo),
            None,
        );
        assert_eq!(code, 422, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("vocab"),
            "{v}"
        );
        let info = curl("GET", &format!("{}/info", server.base), None, None).2;
        assert_eq!(info["repair"]["status"], "no_vocabulary", "{info}");
    }
    build_store_vocab(&pg.url("docs"), None, data.path());
    let server = serve_store(&pg, "docs", data.path());
    let v = search(&server, &typo);
    assert_eq!(
        v["repair"]["text"], "symptoms of vitamin d deficiency",
        "{v}"
    );
    let info = curl("GET", &format!("{}/info", server.base), None, None).2;
    assert_eq!(
        info["repair"]["store_vocabulary"]["documents"], 200,
        "{info}"
    );

    // A word the table did not hold is not a correction until the vocabulary is rebuilt.
    let token = admin_token(data.path());
    let admin = admin_base(&server);
    let doc = json!({"documents": [
        {"id": "z1", "text": "The zorblaxian migration crosses the outer moons each winter."},
        {"id": "z2", "text": "Zorblaxian herds graze on moss; a zorblaxian calf walks within hours."},
        {"id": "z3", "text": "Watching the zorblaxian migration needs a permit and a telescope."},
    ]});
    let (code, _, v) = curl(
        "POST",
        &format!("{admin}/admin/documents"),
        Some(&doc),
        Some(&token),
    );
    assert_eq!(code, 200, "{v}");
    let novel = json!({"query": "zorblaxain migration", "repair": "on"});
    let before = search(&server, &novel);
    assert!(
        before["repair"]["text"] != "zorblaxian migration",
        "{before}"
    );
    let (code, _, v) = curl(
        "POST",
        &format!("{admin}/admin/index/vocab"),
        None,
        Some(&token),
    );
    assert_eq!(code, 202, "{v}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let v = curl("GET", &format!("{admin}/admin/index"), None, Some(&token)).2;
        if v["vocabulary"]["state"] == "idle" && v["vocabulary"]["built"]["documents"] == 203 {
            break;
        }
        assert_ne!(v["vocabulary"]["state"], "failed", "{v}");
        assert!(std::time::Instant::now() < deadline, "never rebuilt: {v}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let after = search(&server, &novel);
    assert_eq!(after["repair"]["text"], "zorblaxian migration", "{after}");
    drop(server);
    // The texts were spilled to a file while counted, and the file is gone: only the
    // vocabulary's files stay.
    let spills: Vec<_> = std::fs::read_dir(data.path().join("store-vocab").join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".spill"))
        .collect();
    assert!(spills.is_empty(), "{spills:?}");

    // The table's documents vote on repair when asked: the raw query searched in the store
    // first, the vote's time reported, the same reading where the speller was sure.
    let voting = common::Server::start(&[
        "--store",
        &pg.url("docs"),
        "--encoder",
        common::minilm_bundle().to_str().unwrap(),
        "--data-dir",
        data.path().to_str().unwrap(),
        "--repair-vote-documents",
        "5",
    ]);
    let v = search(&voting, &typo);
    assert_eq!(
        v["repair"]["text"], "symptoms of vitamin d deficiency",
        "{v}"
    );
    assert!(v["timings_ms"]["vote"].as_f64().unwrap() > 0.0, "{v}");
    // A query left as typed is answered by the vote's search of the table, not searched again:
    // the same hits as with repair off.
    let clean = |repair: &str| {
        search(
            &voting,
            &json!({ "query": "how long to boil an egg", "k": 8, "with_metadata": true, "repair": repair }),
        )
    };
    let (voted, off) = (clean("auto"), clean("off"));
    assert!(voted.get("repair").is_none(), "{voted}");
    assert_eq!(voted["timings_ms"]["search"], 0.0, "{voted}");
    assert_eq!(voted["results"], off["results"], "{voted}");
    let info = curl("GET", &format!("{}/info", voting.base), None, None).2;
    assert_eq!(info["repair"]["vote_documents"], 5, "{info}");
    wait_metric(
        &voting,
        "capot_query_repair_votes_total{encoder=\"minilm\"}",
        |n| n >= 1.0,
    );
}

/// The value of one series (`name{labels}`) on the server's `/metrics`, waiting (bounded) until
/// `pred` holds for it.
fn wait_metric(server: &common::Server, series: &str, pred: impl Fn(f64) -> bool) -> f64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let text = common::http_get(server.addr, "/metrics")
            .map(|(_, t)| t)
            .unwrap_or_default();
        let value = text.lines().find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
                .and_then(|v| v.trim().parse::<f64>().ok())
        });
        if let Some(v) = value.filter(|v| pred(*v)) {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{series} never satisfied the test: {value:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn replicas_serve_searches_a_stopped_one_fails_none_and_writes_are_read_back_through_lag() {
    let (primary, data) = default_corpus_store();
    let replica = Postgres::replica_of(&primary);
    let caught_up = |pg: &Postgres, id: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while pg.psql(&format!("SELECT count(*) FROM docs WHERE id = '{id}'")) != "1" {
            assert!(
                std::time::Instant::now() < deadline,
                "the replica never replayed {id}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    assert_eq!(replica.psql("SELECT count(*) FROM docs"), "200");
    let server = common::Server::start(&[
        "--store",
        &primary.url("docs"),
        "--store-replica",
        &replica.url("docs"),
        "--store-replica-wait-ms",
        "60000",
        "--encoder",
        common::minilm_bundle().to_str().unwrap(),
        "--data-dir",
        data.path().to_str().unwrap(),
    ]);
    let info = curl("GET", &format!("{}/info", server.base), None, None).2;
    assert_eq!(
        info["store"]["replicas"][0]["healthy"], true,
        "{}",
        info["store"]
    );
    let token = admin_token(data.path());
    let admin = admin_base(&server);

    // Replay paused: a write is on the primary only. A search that names it is served by a
    // node that has it; one that does not may be served by the lagging replica.
    replica.psql("SELECT pg_wal_replay_pause()");
    let text = "Glassblowers anneal each vase overnight so it does not crack.";
    let op = write_one(&admin, &token, "ryw-1", text);
    assert_eq!(
        replica.psql("SELECT count(*) FROM docs WHERE id = 'ryw-1'"),
        "0"
    );
    let primary_served = format!(
        "capot_store_searches_total{{node=\"{}\",role=\"primary\"}}",
        primary.url("docs")
    );
    let replica_served = format!(
        "capot_store_searches_total{{node=\"{}\",role=\"replica\"}}",
        replica.url("docs")
    );
    // It waits for the paused replica (at most half the request's time), then the primary
    // answers it.
    let before = wait_metric(&server, &primary_served, |_| true);
    let fresh = search(&server, &json!({"query": text, "k": 1, "after": op}));
    assert_eq!(common::hit_ids(&fresh), ["ryw-1"], "{fresh}");
    wait_metric(&server, &primary_served, |v| v == before + 1.0);
    let mut stale = 0;
    for _ in 0..6 {
        let any = search(&server, &json!({"query": text, "k": 1}));
        if common::hit_ids(&any) != ["ryw-1"] {
            stale += 1;
        }
    }
    // Searches without `after` go to the replica in turn: the lag shows.
    assert!(stale > 0, "no search was served by the paused replica");
    // The lag shows on /metrics while replay is paused, and goes back to 0 after.
    let lag = format!(
        "capot_store_replica_lag_bytes{{node=\"{}\"}}",
        replica.url("docs")
    );
    wait_metric(&server, &lag, |v| v > 0.0);
    replica.psql("SELECT pg_wal_replay_resume()");
    caught_up(&replica, "ryw-1");
    wait_metric(&server, &lag, |v| v == 0.0);

    // A search naming a write the replica has not replayed yet waits for it, and the replica
    // (not the primary) answers it once replay resumes.
    replica.psql("SELECT pg_wal_replay_pause()");
    let text = "Beekeepers smoke the hive so the bees stay calm.";
    let op = write_one(&admin, &token, "ryw-2", text);
    let before = (
        wait_metric(&server, &primary_served, |_| true),
        wait_metric(&server, &replica_served, |_| true),
    );
    let waiter = {
        let base = server.base.clone();
        std::thread::spawn(move || {
            let body = json!({"query": text, "k": 1, "after": op});
            curl("POST", &format!("{base}/search"), Some(&body), None)
        })
    };
    wait_metric(&server, "capot_store_waiting_searches", |v| v >= 1.0);
    replica.psql("SELECT pg_wal_replay_resume()");
    let (code, _, waited) = waiter.join().unwrap();
    assert_eq!(code, 200, "{waited}");
    assert_eq!(common::hit_ids(&waited), ["ryw-2"], "{waited}");
    wait_metric(&server, &replica_served, |v| v == before.1 + 1.0);
    wait_metric(&server, &primary_served, |v| v == before.0);
    wait_metric(&server, "capot_store_waiting_searches", |v| v == 0.0);

    // The replica stops under search load: no search fails.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let load_thread = {
        let (base, stop, served) = (server.base.clone(), stop.clone(), served.clone());
        std::thread::spawn(move || {
            let mut failed = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                let body = json!({"query": "how do vaccines work", "k": 3});
                let (code, _, v) = curl("POST", &format!("{base}/search"), Some(&body), None);
                if code == 200 {
                    served.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                } else {
                    failed.push((code, v));
                }
            }
            failed
        })
    };
    let wait_served = |n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while served.load(std::sync::atomic::Ordering::Acquire) < n {
            assert!(
                std::time::Instant::now() < deadline,
                "searches stopped being served"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    wait_served(5);
    replica.stop();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let info = curl("GET", &format!("{}/info", server.base), None, None).2;
        if info["store"]["replicas"][0]["healthy"] == false {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the stopped replica is still healthy"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    wait_metric(
        &server,
        &format!(
            "capot_store_up{{node=\"{}\",role=\"replica\"}}",
            replica.url("docs")
        ),
        |v| v == 0.0,
    );
    // And afterwards, on the primary.
    wait_served(served.load(std::sync::atomic::Ordering::Acquire) + 5);
    stop.store(true, std::sync::atomic::Ordering::Release);
    let failed = load_thread.join().unwrap();
    assert!(
        failed.is_empty(),
        "{} of {} searches failed: {:?}",
        failed.len(),
        served.load(std::sync::atomic::Ordering::Acquire) + failed.len(),
        failed.first()
    );
    assert_eq!(common::http_get(server.addr, "/ready").unwrap().0, 200);
}

#[test]
fn the_primary_killed_under_search_and_write_load_loses_no_acknowledged_write() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    const KILLS: usize = 5;
    let (pg, data) = default_corpus_store();
    let server = serve_store(&pg, "docs", data.path());
    let token = admin_token(data.path());
    let admin = admin_base(&server);
    let query = json!({"query": "how do vaccines work", "k": 5});
    let want = common::hit_ids(&search(&server, &query));
    let stop = Arc::new(AtomicBool::new(false));
    let (searched, written) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // Searches: a 200 is the right answer, or a 503 while the database is away; nothing else.
    let searcher = {
        let (base, stop, searched, want, query) = (
            server.base.clone(),
            stop.clone(),
            searched.clone(),
            want.clone(),
            query.clone(),
        );
        std::thread::spawn(move || {
            let mut wrong = Vec::new();
            while !stop.load(Ordering::Acquire) {
                let (code, _, v) = curl("POST", &format!("{base}/search"), Some(&query), None);
                match code {
                    200 if common::hit_ids(&v) == want => {
                        searched.fetch_add(1, Ordering::AcqRel);
                    }
                    503 => {}
                    _ => wrong.push((code, v)),
                }
            }
            wrong
        })
    };
    // Writes (unrelated to the query): acknowledged ones are kept, as are deletes sent.
    let writer = write_load(
        admin.clone(),
        token.clone(),
        "k-",
        0,
        4,
        stop.clone(),
        written.clone(),
    );
    let mut recoveries = Vec::new();
    for _ in 0..KILLS {
        progress(&searched, 3);
        progress(&written, 3);
        pg.kill();
        wait_ready_is(&server, 503, std::time::Duration::from_secs(30));
        pg.start_again();
        recoveries.push(wait_ready_is(
            &server,
            200,
            std::time::Duration::from_secs(30),
        ));
    }
    progress(&searched, 3);
    progress(&written, 3);
    stop.store(true, Ordering::Release);
    let wrong = searcher.join().unwrap();
    let w = writer.join().unwrap();
    assert!(
        wrong.is_empty(),
        "{} searches answered wrongly: {:?}",
        wrong.len(),
        wrong.first()
    );
    w.check(&pg, "k-");
    eprintln!(
        "{KILLS} SIGKILLs of PostgreSQL: {} writes and {} deletes acknowledged, {} searches answered; ready again after {recoveries:?}",
        w.acked.len(),
        w.deleted.len(),
        searched.load(Ordering::Acquire)
    );
    assert!(!server.stderr.lock().unwrap().contains("panicked"));
}

#[test]
fn tls_modes_encrypt_and_verify_as_libpq_does() {
    let (pg, ca, other) = Postgres::start_tls();
    let rt = runtime();
    rt.block_on(async {
        let url = |mode: &str, roots: Option<&std::path::Path>| {
            let mut u = format!("{}&sslmode={mode}", pg.url("docs"));
            if let Some(r) = roots {
                u.push_str(&format!("&sslrootcert={}", r.display()));
            }
            u
        };
        // Whether a connection made as `url` says is encrypted (Err: refused, with the reason).
        let ssl = |u: String| async move {
            let l = PgLocation::parse(&u, None).map_err(|e| e.to_string())?;
            let pool = l.pool(PoolOptions::default()).map_err(|e| e.to_string())?;
            let client = pool.get().await.map_err(|e| {
                let mut text = e.to_string();
                let mut cause = std::error::Error::source(&e);
                while let Some(c) = cause {
                    text.push_str(&format!(": {c}"));
                    cause = c.source();
                }
                text
            })?;
            let row = client
                .query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok::<bool, String>(row.get(0))
        };
        assert_eq!(ssl(url("disable", None)).await, Ok(false));
        // require: encrypted, the certificate not checked without a CA file.
        assert_eq!(ssl(url("require", None)).await, Ok(true));
        // verify-ca: the chain checked, not the name (the certificate names db.internal).
        assert_eq!(ssl(url("verify-ca", Some(&ca))).await, Ok(true));
        // verify-full: the name too, and 127.0.0.1 is not db.internal.
        let e = ssl(url("verify-full", Some(&ca))).await.unwrap_err();
        assert!(e.to_lowercase().contains("certificate"), "{e}");
        // Another CA: refused by verify-ca, and by require given that CA (as libpq does).
        for mode in ["verify-ca", "require"] {
            let e = ssl(url(mode, Some(&other))).await.unwrap_err();
            assert!(e.to_lowercase().contains("certificate"), "{mode}: {e}");
        }
    });
}
