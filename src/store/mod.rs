//! Document stores other than the embedded index: where searches find documents and writes keep
//! them when the corpus lives in a database the operator already runs.
//!
//! [`DocumentStore`] is the seam between the query pipeline and such a store: search (vectors,
//! `k`, `ef`, a bound [`Filter`]), get, upsert, delete and statistics. The query pipeline
//! (`src/query/`) holds an `Arc<dyn DocumentStore>` and names no implementation;
//! [`postgres::PgStore`] (PostgreSQL + pgvector) is the one here. The embedded index with its
//! live segment is served by its own path (`query::stages::corpus_search`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;

use crate::index::payload::FieldSchema;
use crate::query::filter::Filter;
use crate::query::stages::CorpusHits;

pub mod postgres;
pub mod vocab;

/// A boxed future, so the trait stays usable as `dyn DocumentStore`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached, or did not answer in time: retry later (503).
    #[error("the document store is unavailable: {0}")]
    Unavailable(String),
    /// The store holds something capot cannot serve (another encoder's vectors, a missing
    /// table): an operator must act.
    #[error("{0}")]
    Mismatch(String),
    /// The request cannot be answered by this store (400).
    #[error("{0}")]
    Invalid(String),
    /// The store takes no writes from capot (a table another pipeline fills): 409.
    #[error("{0}")]
    ReadOnly(String),
    /// Anything else the database reported.
    #[error("the document store failed: {0}")]
    Database(String),
    /// A file capot writes beside the store's data could not be written (a full disk, say).
    #[error("{0}")]
    Local(String),
}

/// What one search asks of a store, for every query of a request.
#[derive(Debug, Clone)]
pub struct StoreSearch {
    pub k: usize,
    pub ef: usize,
    /// A bound filter ([`Filter::bind`] against [`DocumentStore::payload_fields`]).
    pub filter: Option<Arc<Filter>>,
    pub with_metadata: bool,
    /// Served only by a node that holds this write (its `operation_id`): read-your-writes
    /// across replicas.
    pub after: Option<u64>,
    /// When the request must be answered: a store waits for a lagging node only within it.
    pub deadline: Option<std::time::Instant>,
}

/// A document as a store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    pub id: String,
    pub title: String,
    pub text: String,
    pub metadata: Option<serde_json::Value>,
}

/// A document to write, with its vector from the store's document encoder.
#[derive(Debug, Clone)]
pub struct RecordWrite {
    pub id: String,
    pub title: String,
    pub text: String,
    pub metadata: Option<serde_json::Value>,
    pub vector: Vec<f32>,
}

/// What a store serves, as `/info` and `GET /admin/index` report it.
#[derive(Debug, Clone, Serialize)]
pub struct StoreInfo {
    /// `postgres`.
    pub kind: &'static str,
    /// Where, without credentials (`postgres://capot@db:5432/search?table=documents`).
    pub location: String,
    /// Fingerprint of the document encoder whose vectors the store holds.
    pub encoder_fingerprint: String,
    pub encoder_name: String,
    pub dimension: usize,
    /// HNSW ef when a request gives none.
    pub ef_search: usize,
    /// Declared payload indexes, by metadata key.
    pub payload_fields: std::collections::BTreeMap<String, FieldSchema>,
    /// How searches compare vectors: `inner_product`, `cosine` or `l2` (an attached table's
    /// index decides).
    pub metric: &'static str,
    /// Whether capot writes documents into it (false for a table attached with
    /// `--store-columns`).
    pub writable: bool,
}

/// A read replica as `/info` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaHealth {
    /// Without credentials.
    pub location: String,
    pub healthy: bool,
    /// WAL bytes the replica had still to replay at its last health check (`None` before the
    /// first, or while it does not answer).
    pub lag_bytes: Option<u64>,
}

/// Searches a node has served, as `/metrics` counts them.
#[derive(Debug, Clone)]
pub struct NodeServed {
    /// `primary` or `replica`.
    pub role: &'static str,
    /// Without credentials.
    pub location: String,
    pub searches: u64,
}

/// What a store's nodes have been doing, for `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct StoreActivity {
    pub served: Vec<NodeServed>,
    /// Searches waiting now for a replica to replay the write they name.
    pub waiting: u64,
}

/// The seam between the query pipeline and a document store (see the module doc).
pub trait DocumentStore: Send + Sync + 'static {
    /// What the store serves now (its declared payload fields change with
    /// [`DocumentStore::set_payload_index`]).
    fn info(&self) -> StoreInfo;

    /// The `ef` a search uses when it gives none (read per search: no copy of [`StoreInfo`]).
    fn default_ef(&self) -> usize;

    /// Declared payload fields, by metadata key: what filters are bound against.
    fn payload_fields(&self) -> std::collections::BTreeMap<String, FieldSchema>;

    /// Declares the payload field `key` (`Some`, replacing an earlier type) or drops its
    /// declaration (`None`), with the indexes the declaration creates; answers once searches use
    /// them.
    fn set_payload_index<'a>(
        &'a self,
        key: &'a str,
        schema: Option<FieldSchema>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Whether the store answered its last health check (any node that can serve searches).
    fn healthy(&self) -> bool;

    /// Whether the node that takes writes answered its last health check.
    fn primary_healthy(&self) -> bool {
        self.healthy()
    }

    /// Read replicas and whether each answered its last health check (none by default).
    fn replicas(&self) -> Vec<ReplicaHealth> {
        Vec::new()
    }

    /// Searches served per node and searches waiting for a replica (none by default).
    fn activity(&self) -> StoreActivity {
        StoreActivity::default()
    }

    /// The `k` best documents for each query's vectors (one list per query; a query with two
    /// vectors — raw and repaired — gets each document once with its best score).
    fn search<'a>(
        &'a self,
        queries: Vec<Vec<Vec<f32>>>,
        scope: StoreSearch,
    ) -> BoxFuture<'a, Result<Vec<CorpusHits>, StoreError>>;

    /// One document by id.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<StoredRecord>, StoreError>>;

    /// Adds or replaces documents in one transaction; answers once it is committed, with a
    /// position that orders it among writes (PostgreSQL: the commit's WAL position).
    fn upsert(&self, docs: Vec<RecordWrite>) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Deletes documents by id in one transaction (ids stored nowhere are no error).
    fn delete(&self, ids: Vec<String>) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Documents stored now.
    fn count(&self) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Every document's title and text, for query repair's vocabulary, written into `spill`
    /// as they are read (a table's text may not fit in memory).
    fn texts<'a>(
        &'a self,
        spill: &'a mut crate::store::vocab::TextSpill,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// Hits of a query searched with several vectors: each document once, with its best score,
/// best first (ties by id), ranked from 1.
pub fn merge_vectors(lists: Vec<Vec<crate::query::Hit>>, k: usize) -> Vec<crate::query::Hit> {
    let mut best: std::collections::HashMap<String, crate::query::Hit> = Default::default();
    for h in lists.into_iter().flatten() {
        match best.get(&h.id) {
            Some(b) if b.score >= h.score => {}
            _ => {
                best.insert(h.id.clone(), h);
            }
        }
    }
    let mut all: Vec<crate::query::Hit> = best.into_values().collect();
    all.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    all.truncate(k);
    for (i, h) in all.iter_mut().enumerate() {
        h.rank = i + 1;
    }
    all
}
