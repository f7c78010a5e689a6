//! The PostgreSQL + pgvector store: documents in one table (`id`, `title`, `text`, `metadata`
//! jsonb, `embedding` vector), an HNSW index on the embeddings, and a record in
//! `capot_stores` of the document encoder whose vectors the table holds.
//!
//! Searches run pgvector's HNSW index scan with `hnsw.ef_search` from the request and, under a
//! filter, `hnsw.iterative_scan = relaxed_order`, so a selective filter keeps scanning instead of
//! returning fewer than `k` rows; when the scan still stops short, the same query runs once more
//! without the HNSW index (every admitted row scored), so a filtered search returns
//! `min(k, admitted)` hits like the embedded index does. Writes are one transaction each and
//! answered after commit (durable by PostgreSQL's WAL). Connections come from a bounded pool
//! with connect, wait and statement timeouts, so a database that is down answers 503 quickly
//! instead of holding requests.

use std::collections::{BTreeMap, HashSet};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use futures_util::pin_mut;
use pgvector::Vector;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{Kind, ToSql, Type};

pub use columns::{Columns, Metric};
use tokio_postgres::NoTls;

use super::{merge_vectors, StoredRecord};
use super::{BoxFuture, DocumentStore, RecordWrite, StoreError, StoreInfo, StoreSearch};
use crate::index::payload::{FieldSchema, FieldType};
use crate::index::Strategy;
use crate::query::stages::{CorpusHits, FilterReport};
use crate::query::{Filter, Hit};

pub mod columns;
pub mod sql;
pub mod tls;

/// Where the store is: a PostgreSQL connection string with `?table=NAME`.
#[derive(Clone)]
pub struct PgLocation {
    pub config: tokio_postgres::Config,
    /// The documents table, possibly schema-qualified (`search.documents`).
    pub table: String,
    /// `sslmode` and `sslrootcert`.
    pub tls: tls::TlsMode,
}

/// How the store uses its connections: the pool's bounds and timeouts, and how long a search
/// waits for a replica.
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions {
    /// Connections at most.
    pub max_connections: usize,
    /// How long a connection attempt, or a wait for a free connection, may take.
    pub connect_timeout: Duration,
    /// How long one statement may run before PostgreSQL cancels it.
    pub statement_timeout: Duration,
    /// How long a search that names a write (`after`) waits for a replica to replay it before
    /// the primary serves it; never more than half the time the request has left.
    pub replica_wait: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_connections: 16,
            connect_timeout: Duration::from_secs(3),
            statement_timeout: Duration::from_secs(10),
            replica_wait: Duration::from_millis(100),
        }
    }
}

impl std::fmt::Debug for PgLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_string())
    }
}

impl std::fmt::Display for PgLocation {
    /// The location without its password: what logs and `/info` show.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.config;
        let user = c.get_user().unwrap_or("");
        let host = c
            .get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(h) => h.clone(),
                tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
            })
            .unwrap_or_default();
        let port = c.get_ports().first().copied().unwrap_or(5432);
        let db = c.get_dbname().unwrap_or(user);
        write!(
            f,
            "postgres://{user}@{host}:{port}/{db}?table={}",
            self.table
        )?;
        match &self.tls {
            tls::TlsMode::Disable => Ok(()),
            tls::TlsMode::Require { .. } => f.write_str("&sslmode=require"),
            tls::TlsMode::VerifyCa { .. } => f.write_str("&sslmode=verify-ca"),
            tls::TlsMode::VerifyFull { .. } => f.write_str("&sslmode=verify-full"),
        }
    }
}

impl PgLocation {
    /// Parses `postgres://user[:password]@host:port/db?table=NAME[&sslmode=disable&...]`;
    /// `password` (from `PGPASSWORD` or a password file) is used when the URL gives none.
    pub fn parse(url: &str, password: Option<String>) -> Result<PgLocation, StoreError> {
        let invalid = |m: String| StoreError::Invalid(format!("--store: {m}"));
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(invalid(
                "expected a postgres://user@host:port/database?table=NAME connection string".into(),
            ));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut table = None;
        let (mut sslmode, mut rootcert) = (None, None);
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "table" => table = Some(v.to_string()),
                "sslmode" => sslmode = Some(v),
                "sslrootcert" => rootcert = Some(v),
                _ => kept.push(pair),
            }
        }
        let tls = tls::TlsMode::parse(sslmode, rootcert).map_err(invalid)?;
        let table = table.ok_or_else(|| invalid("name the documents table: ?table=NAME".into()))?;
        check_table(&table).map_err(invalid)?;
        let rebuilt = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        // The parser's message may quote the input; say what is wrong without it.
        let mut config = tokio_postgres::Config::from_str(&rebuilt)
            .map_err(|_| invalid("not a valid PostgreSQL connection string".into()))?;
        if config.get_password().is_none() {
            if let Some(p) = password {
                config.password(p);
            }
        }
        if config.get_hosts().is_empty() {
            config.host("127.0.0.1");
        }
        if tls != tls::TlsMode::Disable {
            config.ssl_mode(tokio_postgres::config::SslMode::Require);
        }
        Ok(PgLocation { config, table, tls })
    }

    /// What the names of the table's indexes start with (`search_documents`).
    fn index_prefix(&self) -> String {
        self.table.replace('.', "_")
    }

    /// An index of the table quoted for SQL: in the table's schema.
    fn quoted_index(&self, name: &str) -> String {
        match self.table.split_once('.') {
            Some((schema, _)) => format!("\"{schema}\".\"{name}\""),
            None => format!("\"{name}\""),
        }
    }

    /// The table name quoted for SQL (`"search"."documents"`).
    fn quoted_table(&self) -> String {
        self.table
            .split('.')
            .map(|p| format!("\"{p}\""))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// A bounded pool of connections with `options`' timeouts.
    pub fn pool(&self, options: PoolOptions) -> Result<Pool, StoreError> {
        let mut config = self.config.clone();
        config.connect_timeout(options.connect_timeout);
        config.application_name("capot");
        config.options(format!(
            "-c statement_timeout={}",
            options.statement_timeout.as_millis()
        ));
        let recycling = || ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match self
            .tls
            .client_config()
            .map_err(|e| StoreError::Invalid(format!("--store: {e}")))?
        {
            Some(tls) => Manager::from_config(
                config,
                tokio_postgres_rustls::MakeRustlsConnect::new(tls),
                recycling(),
            ),
            None => Manager::from_config(config, NoTls, recycling()),
        };
        Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StoreError::Invalid(format!("cannot make a connection pool: {e}")))
    }
}

/// A table name: one or two (schema-qualified) identifiers of letters, digits and `_`.
fn check_table(t: &str) -> Result<(), String> {
    let ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 63
            && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !p.starts_with(|c: char| c.is_ascii_digit())
    };
    let parts: Vec<&str> = t.split('.').collect();
    if parts.len() > 2 || !parts.iter().all(|p| ok(p)) {
        return Err(format!(
            "table {t:?}: use letters, digits and _ (optionally schema.table)"
        ));
    }
    Ok(())
}

/// An error of the database or of reaching it, as the store reports it.
fn db_error(e: tokio_postgres::Error) -> StoreError {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        // 08: connection exception; 57: operator intervention (shutdown, statement timeout);
        // 53: insufficient resources (too many connections).
        if code.starts_with("08") || code.starts_with("57") || code.starts_with("53") {
            return StoreError::Unavailable(db.message().to_string());
        }
        return StoreError::Database(format!("{} ({code})", db.message()));
    }
    if e.is_closed() {
        return StoreError::Unavailable("the connection was closed".into());
    }
    // Reaching the server (connect, I/O, TLS, timeouts) versus what capot sent or read.
    let reaching = std::error::Error::source(&e)
        .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
        || e.to_string().contains("timeout")
        || e.to_string().contains("connect")
        || e.to_string().contains("TLS");
    if reaching {
        StoreError::Unavailable(with_causes(&e))
    } else {
        StoreError::Database(with_causes(&e))
    }
}

/// An error and its causes on one line (`error performing TLS handshake: invalid peer
/// certificate: ...`): the cause is what an operator needs.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

fn pool_error(e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => db_error(e),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// The record of the table's document encoder (`capot_stores`).
#[derive(Debug, Clone, PartialEq)]
pub struct StoreRecord {
    pub encoder_fingerprint: String,
    pub encoder_name: String,
    pub dimension: usize,
    pub ef_search: usize,
    pub payload_fields: BTreeMap<String, FieldSchema>,
}

/// DDL of the record table.
const RECORD_TABLE: &str = "CREATE TABLE IF NOT EXISTS capot_stores (
    table_name text PRIMARY KEY,
    encoder_fingerprint text NOT NULL,
    encoder_name text NOT NULL,
    dimension integer NOT NULL,
    ef_search integer NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now())";

/// Creates the documents table, its record and the metadata index if missing; refuses a table
/// recorded for another encoder or dimension.
pub async fn create(
    pool: &Pool,
    location: &PgLocation,
    record: &StoreRecord,
) -> Result<(), StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
        .await
        .map_err(db_error)?;
    client.batch_execute(RECORD_TABLE).await.map_err(db_error)?;
    if let Some(found) = read_record(&client, &location.table).await? {
        if found.encoder_fingerprint != record.encoder_fingerprint
            || found.dimension != record.dimension
        {
            return Err(StoreError::Mismatch(format!(
                "table {} holds vectors of {} ({}-d, fingerprint {}), not of {} ({}-d, fingerprint {})",
                location.table,
                found.encoder_name,
                found.dimension,
                found.encoder_fingerprint,
                record.encoder_name,
                record.dimension,
                record.encoder_fingerprint
            )));
        }
    }
    let t = location.quoted_table();
    let index_prefix = location.index_prefix();
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {t} (
                id text PRIMARY KEY,
                title text NOT NULL DEFAULT '',
                text text NOT NULL,
                metadata jsonb NOT NULL DEFAULT '{{}}',
                embedding vector({dim}) NOT NULL);
             CREATE INDEX IF NOT EXISTS \"{index_prefix}_metadata\" ON {t} USING gin (metadata jsonb_path_ops)",
            dim = record.dimension
        ))
        .await
        .map_err(db_error)?;
    for (key, kind) in ranged_keys(&record.payload_fields) {
        for statement in sql::range_index_ddl(&t, &index_prefix, &key, kind, false) {
            client.batch_execute(&statement).await.map_err(db_error)?;
        }
    }
    let payload = serde_json::to_value(&record.payload_fields)
        .map_err(|e| StoreError::Invalid(e.to_string()))?;
    client
        .execute(
            "INSERT INTO capot_stores (table_name, encoder_fingerprint, encoder_name, dimension, ef_search, payload)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (table_name) DO UPDATE SET ef_search = EXCLUDED.ef_search,
                 payload = capot_stores.payload || EXCLUDED.payload",
            &[
                &location.table,
                &record.encoder_fingerprint,
                &record.encoder_name,
                &(record.dimension as i32),
                &(record.ef_search as i32),
                &payload,
            ],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Whether a declared field of type `kind` at `key` gets B-tree indexes
/// ([`sql::range_index_ddl`]): integer, float and datetime fields answer ranges from them,
/// keyword fields matches (with the column statistics that make PostgreSQL's estimate of a
/// tenant or a category exact enough to choose the plan).
fn btree_indexed(key: &str, kind: FieldType) -> bool {
    matches!(
        kind,
        FieldType::Integer | FieldType::Float | FieldType::Datetime | FieldType::Keyword
    ) && sql::rangeable(key)
}

/// The declared fields a B-tree answers ([`btree_indexed`]).
fn ranged_keys(fields: &BTreeMap<String, FieldSchema>) -> BTreeMap<String, FieldType> {
    fields
        .iter()
        .filter(|(key, schema)| btree_indexed(key, schema.kind))
        .map(|(key, schema)| (key.clone(), schema.kind))
        .collect()
}

/// The [`ranged_keys`] of `fields` whose B-tree index the table has, valid: ranges take the
/// B-tree form only there (a table loaded by an older capot has declarations without them, and
/// a `CREATE INDEX CONCURRENTLY` that failed leaves an invalid one).
async fn valid_ranges(
    client: &tokio_postgres::Client,
    location: &PgLocation,
    fields: &BTreeMap<String, FieldSchema>,
) -> Result<BTreeMap<String, FieldType>, StoreError> {
    let mut ranged = ranged_keys(fields);
    let prefix = location.index_prefix();
    let names: Vec<String> = ranged
        .iter()
        .map(|(key, kind)| sql::range_index_name(&prefix, key, *kind))
        .collect();
    let present: HashSet<String> = client
        .query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
             WHERE c.relname = ANY($1) AND i.indisvalid AND i.indrelid = $2::text::regclass",
            &[&names, &location.quoted_table()],
        )
        .await
        .map_err(db_error)?
        .into_iter()
        .map(|r| r.get(0))
        .collect();
    ranged.retain(|key, kind| present.contains(&sql::range_index_name(&prefix, key, *kind)));
    Ok(ranged)
}

async fn read_record(
    client: &tokio_postgres::Client,
    table: &str,
) -> Result<Option<StoreRecord>, StoreError> {
    let exists = client
        .query_one("SELECT to_regclass('capot_stores') IS NOT NULL", &[])
        .await
        .map_err(db_error)?;
    if !exists.get::<_, bool>(0) {
        return Ok(None);
    }
    let row = client
        .query_opt(
            "SELECT encoder_fingerprint, encoder_name, dimension, ef_search, payload
             FROM capot_stores WHERE table_name = $1",
            &[&table],
        )
        .await
        .map_err(db_error)?;
    let Some(row) = row else { return Ok(None) };
    let payload: serde_json::Value = row.get(4);
    Ok(Some(StoreRecord {
        encoder_fingerprint: row.get(0),
        encoder_name: row.get(1),
        dimension: row.get::<_, i32>(2) as usize,
        ef_search: row.get::<_, i32>(3) as usize,
        payload_fields: serde_json::from_value(payload)
            .map_err(|e| StoreError::Mismatch(format!("capot_stores.payload: {e}")))?,
    }))
}

/// Ids the table holds already: what a resumed load skips.
pub async fn stored_ids(pool: &Pool, location: &PgLocation) -> Result<HashSet<String>, StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    let rows = client
        .query(&format!("SELECT id FROM {}", location.quoted_table()), &[])
        .await
        .map_err(db_error)?;
    Ok(rows.into_iter().map(|r| r.get(0)).collect())
}

/// The `vector` type of the connected database (an extension type: its oid varies).
async fn vector_type(client: &tokio_postgres::Client) -> Result<Type, StoreError> {
    let row = client
        .query_one(
            "SELECT t.oid, n.nspname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
             WHERE t.typname = 'vector'",
            &[],
        )
        .await
        .map_err(db_error)?;
    Ok(Type::new(
        "vector".into(),
        row.get(0),
        Kind::Simple,
        row.get(1),
    ))
}

/// Loads documents with binary `COPY` in one transaction: all of them or none.
pub async fn copy_in(
    pool: &Pool,
    location: &PgLocation,
    docs: &[RecordWrite],
) -> Result<(), StoreError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    let vector = vector_type(&client).await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let sink = tx
        .copy_in(&format!(
            "COPY {} (id, title, text, metadata, embedding) FROM STDIN BINARY",
            location.quoted_table()
        ))
        .await
        .map_err(db_error)?;
    let writer = BinaryCopyInWriter::new(
        sink,
        &[Type::TEXT, Type::TEXT, Type::TEXT, Type::JSONB, vector],
    );
    pin_mut!(writer);
    let empty = serde_json::Value::Object(Default::default());
    for d in docs {
        storable(d)?;
        let v = unit(d)?;
        let metadata = d.metadata.as_ref().unwrap_or(&empty);
        writer
            .as_mut()
            .write(&[&d.id, &d.title, &d.text, metadata, &v])
            .await
            .map_err(db_error)?;
    }
    writer.finish().await.map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(())
}

/// Refuses a document PostgreSQL cannot hold: `text` and `jsonb` have no NUL character
/// (U+0000), and the database would fail the whole write with an encoding error.
fn storable(d: &RecordWrite) -> Result<(), StoreError> {
    let field = if d.id.contains('\0') {
        "id"
    } else if d.title.contains('\0') {
        "title"
    } else if d.text.contains('\0') {
        "text"
    } else if d.metadata.as_ref().is_some_and(sql::json_holds_nul) {
        "metadata"
    } else {
        return Ok(());
    };
    Err(StoreError::Invalid(format!(
        "document {:?}: its {field} holds the NUL character (U+0000), which PostgreSQL cannot store",
        d.id
    )))
}

/// A document's vector at unit length, as the embedded index keeps vectors: pgvector's inner
/// product is then the cosine that scores report.
fn unit(d: &RecordWrite) -> Result<Vector, StoreError> {
    let mut v = d.vector.clone();
    crate::index::vectors::normalize(&mut v)
        .map_err(|e| StoreError::Invalid(format!("document {:?}: its vector {e}", d.id)))?;
    Ok(Vector::from(v))
}

/// Builds the HNSW index on the embeddings (inner product of normalised vectors: cosine) if
/// the table has none, then gathers the statistics the planner estimates filters with.
pub async fn create_hnsw(
    pool: &Pool,
    location: &PgLocation,
    m: usize,
    ef_construction: usize,
) -> Result<(), StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    // A large build outlives the statement timeout of searches.
    client
        .batch_execute(&format!(
            "SET statement_timeout = 0;
             CREATE INDEX IF NOT EXISTS \"{}_embedding\" ON {t} USING hnsw (embedding vector_ip_ops)
             WITH (m = {m}, ef_construction = {ef_construction});
             ANALYZE {t}",
            location.table.replace('.', "_"),
            t = location.quoted_table()
        ))
        .await
        .map_err(db_error)
}

/// What an operator says of a table another pipeline filled (`--store-columns` and
/// `--document-encoder`).
#[derive(Debug, Clone)]
pub struct Attach {
    pub columns: Columns,
    /// Of the document encoder that made the table's vectors.
    pub encoder_fingerprint: String,
    pub encoder_name: String,
    pub dimension: usize,
    /// HNSW ef when a request gives none.
    pub ef_search: usize,
}

/// What an attached table's catalog says.
struct Layout {
    /// The embedding column's dimension (None: an empty table with an unsized `vector` column).
    dimension: Option<usize>,
    /// The operator class of an HNSW index on the embedding column.
    metric: Option<Metric>,
}

/// Checks that the table and the mapped columns exist with usable types, and reads the
/// embedding's dimension and index.
async fn inspect(
    client: &tokio_postgres::Client,
    location: &PgLocation,
    columns: &Columns,
) -> Result<Layout, StoreError> {
    let table = location.quoted_table();
    let found = client
        .query_one("SELECT to_regclass($1::text) IS NOT NULL", &[&table])
        .await
        .map_err(db_error)?;
    if !found.get::<_, bool>(0) {
        return Err(StoreError::Mismatch(format!(
            "{location}: the database has no table {}",
            location.table
        )));
    }
    let rows = client
        .query(
            "SELECT a.attname::text, t.typname::text, a.atttypmod
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
             WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped",
            &[&table],
        )
        .await
        .map_err(db_error)?;
    let types: BTreeMap<String, (String, i32)> = rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let roles = [
        ("id", Some(&columns.id)),
        ("embedding", Some(&columns.embedding)),
        ("text", Some(&columns.text)),
        ("title", columns.title.as_ref()),
        ("metadata", columns.metadata.as_ref()),
    ];
    for (role, column) in roles {
        let Some(column) = column else { continue };
        let name = Columns::name(column);
        let Some((ty, _)) = types.get(name) else {
            return Err(StoreError::Mismatch(format!(
                "{location}: table {} has no column {name} (the {role} of --store-columns)",
                location.table
            )));
        };
        let wanted = match role {
            "embedding" => Some(&["vector"][..]),
            "metadata" => Some(&["jsonb", "json"][..]),
            _ => None,
        };
        if let Some(wanted) = wanted.filter(|w| !w.contains(&ty.as_str())) {
            return Err(StoreError::Mismatch(format!(
                "{location}: column {name} (the {role}) is {ty}, not {}",
                wanted.join(" or ")
            )));
        }
    }
    let embedding = Columns::name(&columns.embedding);
    let dimension = match types.get(embedding).map(|(_, m)| *m) {
        Some(m) if m > 0 => Some(m as usize),
        _ => client
            .query_opt(
                &format!(
                    "SELECT vector_dims({e}) FROM {table} WHERE {e} IS NOT NULL LIMIT 1",
                    e = columns.embedding
                ),
                &[],
            )
            .await
            .map_err(db_error)?
            .map(|r| r.get::<_, i32>(0) as usize),
    };
    let opclasses: Vec<String> = client
        .query(
            "SELECT opc.opcname::text FROM pg_index i
               JOIN pg_class ic ON ic.oid = i.indexrelid
               JOIN pg_am am ON am.oid = ic.relam
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
               JOIN pg_opclass opc ON opc.oid = i.indclass[0]
             WHERE i.indrelid = $1::text::regclass AND am.amname = 'hnsw'
               AND a.attname = $2 AND i.indpred IS NULL",
            &[&table, &embedding],
        )
        .await
        .map_err(db_error)?
        .into_iter()
        .map(|r| r.get(0))
        .collect();
    let metric = [Metric::InnerProduct, Metric::Cosine, Metric::L2]
        .into_iter()
        .find(|m| opclasses.iter().any(|o| Metric::of_opclass(o) == Some(*m)));
    Ok(Layout { dimension, metric })
}

/// A streaming replica searches may be served by.
struct Replica {
    pool: Pool,
    /// Without its password.
    location: String,
    healthy: Arc<AtomicBool>,
    /// WAL bytes left to replay at the last health check (`u64::MAX`: unknown).
    lag: Arc<AtomicU64>,
    /// Searches this replica has answered.
    served: AtomicU64,
}

/// What the table's record declares, as searches use it: changed by
/// [`DocumentStore::set_payload_index`] and re-read from the record by the health watcher, so a
/// declaration made through another server reaches this one within a health check.
#[derive(Debug, Default)]
struct Declared {
    fields: BTreeMap<String, FieldSchema>,
    /// Declared integer and float keys whose B-tree indexes exist and are valid.
    ranged: BTreeMap<String, FieldType>,
    /// Bumped by every change made here: a health check that read the record before it does not
    /// write its older reading over it.
    generation: u64,
}

/// A document store served from PostgreSQL: the primary takes writes (and searches when no
/// replica can), streaming replicas take searches in turn.
pub struct PgStore {
    pool: Pool,
    location: PgLocation,
    info: StoreInfo,
    /// Where the table keeps what capot reads.
    columns: Columns,
    /// How its HNSW index compares vectors.
    metric: Metric,
    /// Declared payload fields and the keys whose ranges a B-tree answers.
    declared: Arc<RwLock<Declared>>,
    /// The table's rows as the planner's statistics count them (at the last health check).
    rows: Arc<AtomicU64>,
    healthy: Arc<AtomicBool>,
    replicas: Vec<Replica>,
    /// Round-robin position over the replicas.
    turn: std::sync::atomic::AtomicUsize,
    /// Searches the primary has answered.
    served: AtomicU64,
    /// Searches waiting now for a replica to replay the write they name.
    waiting: Arc<AtomicU64>,
    /// How long such a search may wait ([`PoolOptions::replica_wait`]).
    replica_wait: Duration,
}

impl PgStore {
    /// Connects and reads the table's record; fails when the table has none. Searches are
    /// spread over `replicas` (streaming replicas of the primary), health-checked by
    /// [`PgStore::watch_health`]; a replica that cannot be reached at start is skipped until it
    /// answers.
    pub async fn open(
        location: PgLocation,
        options: PoolOptions,
        replicas: &[PgLocation],
    ) -> Result<PgStore, StoreError> {
        let pool = location.pool(options)?;
        let client = pool.get().await.map_err(pool_error)?;
        let record = read_record(&client, &location.table)
            .await?
            .ok_or_else(|| {
                StoreError::Mismatch(format!(
                    "{location} has no capot record: load it with `capot index build --store`, or attach a table another pipeline filled with --store-columns and --document-encoder"
                ))
            })?;
        let ranged = valid_ranges(&client, &location, &record.payload_fields).await?;
        drop(client);
        let info = StoreInfo {
            kind: "postgres",
            location: location.to_string(),
            encoder_fingerprint: record.encoder_fingerprint,
            encoder_name: record.encoder_name,
            dimension: record.dimension,
            ef_search: record.ef_search,
            payload_fields: BTreeMap::new(),
            metric: Metric::InnerProduct.as_str(),
            writable: true,
        };
        let store = PgStore::with(
            location,
            pool,
            options,
            replicas,
            info,
            Columns::default(),
            Metric::InnerProduct,
        )?;
        *crate::sync::write(&store.declared) = Declared {
            fields: record.payload_fields,
            ranged,
            generation: 0,
        };
        Ok(store)
    }

    /// Serves a table another pipeline filled, read through `attach.columns`: no capot record is
    /// needed, the vectors are taken to be `attach`'s document encoder's (the embedding
    /// column's dimension must be its), searches order by the operator of the column's HNSW
    /// index (inner product, cosine or L2), and writes are refused (the table's own pipeline
    /// writes it).
    pub async fn attach(
        location: PgLocation,
        options: PoolOptions,
        replicas: &[PgLocation],
        attach: Attach,
    ) -> Result<PgStore, StoreError> {
        let pool = location.pool(options)?;
        let client = pool.get().await.map_err(pool_error)?;
        let layout = inspect(&client, &location, &attach.columns).await?;
        drop(client);
        if layout.dimension.is_some_and(|d| d != attach.dimension) {
            return Err(StoreError::Mismatch(format!(
                "{location}: column {} holds {}-d vectors, the document encoder {} makes {}-d ones",
                Columns::name(&attach.columns.embedding),
                layout.dimension.unwrap_or_default(),
                attach.encoder_name,
                attach.dimension
            )));
        }
        let metric = match layout.metric {
            Some(m) => m,
            None => {
                tracing::warn!(
                    store = %location,
                    column = Columns::name(&attach.columns.embedding),
                    "no HNSW index of vector_ip_ops, vector_cosine_ops or vector_l2_ops on the embedding column: every search scans the table"
                );
                Metric::InnerProduct
            }
        };
        let info = StoreInfo {
            kind: "postgres",
            location: location.to_string(),
            encoder_fingerprint: attach.encoder_fingerprint,
            encoder_name: attach.encoder_name,
            dimension: attach.dimension,
            ef_search: attach.ef_search,
            payload_fields: Default::default(),
            metric: metric.as_str(),
            writable: false,
        };
        PgStore::with(
            location,
            pool,
            options,
            replicas,
            info,
            attach.columns,
            metric,
        )
    }

    fn with(
        location: PgLocation,
        pool: Pool,
        options: PoolOptions,
        replicas: &[PgLocation],
        info: StoreInfo,
        columns: Columns,
        metric: Metric,
    ) -> Result<PgStore, StoreError> {
        let replicas = replicas
            .iter()
            .map(|r| {
                if r.table != location.table {
                    return Err(StoreError::Invalid(format!(
                        "--store-replica {r} names table {}, the primary {}",
                        r.table, location.table
                    )));
                }
                Ok(Replica {
                    pool: r.pool(options)?,
                    location: r.to_string(),
                    healthy: Arc::new(AtomicBool::new(true)),
                    lag: Arc::new(AtomicU64::new(u64::MAX)),
                    served: AtomicU64::new(0),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PgStore {
            pool,
            location,
            declared: Default::default(),
            rows: Default::default(),
            info,
            columns,
            metric,
            healthy: Arc::new(AtomicBool::new(true)),
            replicas,
            turn: Default::default(),
            served: AtomicU64::new(0),
            waiting: Default::default(),
            replica_wait: options.replica_wait,
        })
    }

    /// Checks the primary and each replica every `every` until the returned task is aborted:
    /// a node turns unhealthy within one check of going away and healthy within one of its
    /// return.
    pub fn watch_health(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let primary = (
            self.pool.clone(),
            self.healthy.clone(),
            self.location.to_string(),
        );
        let (rows, table) = (self.rows.clone(), self.location.quoted_table());
        let declarations = self
            .info
            .writable
            .then(|| (self.location.clone(), self.declared.clone()));
        let replicas: Vec<_> = self
            .replicas
            .iter()
            .map(|r| {
                (
                    r.pool.clone(),
                    r.healthy.clone(),
                    r.location.clone(),
                    r.lag.clone(),
                )
            })
            .collect();
        let limit = every.max(Duration::from_millis(500));
        tokio::spawn(async move {
            loop {
                // The primary's WAL position, then how far each replica has replayed it.
                let head = tokio::time::timeout(limit, replayed(&primary.0))
                    .await
                    .ok()
                    .and_then(Result::ok);
                note_health(&primary.1, head.is_some(), &primary.2);
                if head.is_some() {
                    if let Ok(Ok(n)) = tokio::time::timeout(limit, async {
                        let client = primary.0.get().await.map_err(pool_error)?;
                        estimated_rows(&client, &table).await
                    })
                    .await
                    {
                        rows.store(n, Ordering::Relaxed);
                    }
                    if let Some((location, declared)) = &declarations {
                        // Declarations another server made since.
                        let _ = tokio::time::timeout(limit, async {
                            let seen = crate::sync::read(declared).generation;
                            let client = primary.0.get().await.map_err(pool_error)?;
                            let Some(record) = read_record(&client, &location.table).await? else {
                                return Ok(());
                            };
                            let ranged =
                                valid_ranges(&client, location, &record.payload_fields).await?;
                            let mut d = crate::sync::write(declared);
                            if d.generation == seen {
                                d.fields = record.payload_fields;
                                d.ranged = ranged;
                            }
                            Ok::<_, StoreError>(())
                        })
                        .await;
                    }
                }
                for (pool, healthy, location, lag) in &replicas {
                    let at = tokio::time::timeout(limit, replayed(pool))
                        .await
                        .ok()
                        .and_then(Result::ok);
                    note_health(healthy, at.is_some(), location);
                    let behind = match (head, at) {
                        (Some(h), Some(a)) => h.saturating_sub(a),
                        _ => u64::MAX,
                    };
                    lag.store(behind, Ordering::Release);
                }
                tokio::time::sleep(every).await;
            }
        })
    }

    /// Runs `query` on a connection to the primary; a failure to reach it marks it down.
    async fn primary<T, F, Fut>(&self, query: F) -> Result<T, StoreError>
    where
        F: FnOnce(deadpool_postgres::Object) -> Fut,
        Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    {
        query(self.connection().await?)
            .await
            .map_err(db_error)
            .map_err(|e| self.mark(e))
    }

    /// A connection to the primary; a failure to get one marks it down.
    async fn connection(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(pool_error)
            .map_err(|e| self.mark(e))
    }

    /// What a search reads: the table, its columns, its metric.
    fn target(&self) -> Target<'_> {
        Target {
            table: self.location.quoted_table(),
            columns: &self.columns,
            metric: self.metric,
            ranged: crate::sync::read(&self.declared).ranged.clone(),
            rows: self.rows.load(Ordering::Relaxed),
        }
    }

    /// Refuses writes to a table attached with `--store-columns`.
    fn check_writable(&self) -> Result<(), StoreError> {
        if self.info.writable {
            Ok(())
        } else {
            Err(StoreError::ReadOnly(format!(
                "{} is attached with --store-columns: the pipeline that fills it writes it, capot only searches it",
                self.location
            )))
        }
    }

    /// [`DocumentStore::set_payload_index`]: the new B-tree indexes first (built
    /// `CONCURRENTLY`, so writes go on; no statement timeout), then the record, then searches use
    /// them; the indexes of a declaration replaced or dropped go last. An attached table has no
    /// record to declare in: refused.
    async fn declare(&self, key: &str, schema: Option<FieldSchema>) -> Result<(), StoreError> {
        self.check_writable()?;
        let client = self.connection().await?;
        client
            .batch_execute("SET statement_timeout = 0")
            .await
            .map_err(db_error)?;
        let result = self.declare_on(&client, key, schema).await;
        // The pool's connections keep the statement timeout they were opened with.
        let reset = client.batch_execute("RESET statement_timeout").await;
        result?;
        reset.map_err(db_error)
    }

    async fn declare_on(
        &self,
        client: &tokio_postgres::Client,
        key: &str,
        schema: Option<FieldSchema>,
    ) -> Result<(), StoreError> {
        let (t, prefix) = (self.location.quoted_table(), self.location.index_prefix());
        let record = read_record(client, &self.location.table)
            .await?
            .ok_or_else(|| {
                StoreError::Mismatch(format!("{} has no capot record", self.location))
            })?;
        let ranged = |s: Option<FieldSchema>| s.map(|s| s.kind).filter(|k| btree_indexed(key, *k));
        let (old, new) = (
            ranged(record.payload_fields.get(key).copied()),
            ranged(schema),
        );
        if let Some(kind) = new {
            for statement in sql::range_index_ddl(&t, &prefix, key, kind, true) {
                if let Err(e) = client.batch_execute(&statement).await {
                    // A failed concurrent build leaves an invalid index behind: drop it, so a
                    // retry builds it again rather than finding it there.
                    self.drop_range_indexes(client, key, kind).await.ok();
                    return Err(db_error(e));
                }
            }
        }
        let value = schema
            .map(|s| serde_json::to_value(s).map_err(|e| StoreError::Invalid(e.to_string())))
            .transpose()?;
        client
            .execute(
                "UPDATE capot_stores SET payload = CASE WHEN $3::jsonb IS NULL THEN payload - $2
                     ELSE payload || jsonb_build_object($2::text, $3::jsonb) END
                 WHERE table_name = $1",
                &[&self.location.table, &key, &value],
            )
            .await
            .map_err(db_error)?;
        {
            let mut declared = crate::sync::write(&self.declared);
            declared.generation += 1;
            match schema {
                Some(s) => declared.fields.insert(key.to_string(), s),
                None => declared.fields.remove(key),
            };
            match new {
                Some(kind) => declared.ranged.insert(key.to_string(), kind),
                None => declared.ranged.remove(key),
            };
        }
        match old {
            Some(kind) if old != new => self.drop_range_indexes(client, key, kind).await,
            _ => Ok(()),
        }
    }

    /// Drops the B-tree indexes of `key` as a field of type `kind` (those that exist).
    async fn drop_range_indexes(
        &self,
        client: &tokio_postgres::Client,
        key: &str,
        kind: FieldType,
    ) -> Result<(), StoreError> {
        let num = sql::range_index_name(&self.location.index_prefix(), key, kind);
        for name in [num.replace("_num", "_arr"), num] {
            client
                .batch_execute(&format!(
                    "DROP INDEX CONCURRENTLY IF EXISTS {}",
                    self.location.quoted_index(&name)
                ))
                .await
                .map_err(db_error)?;
        }
        Ok(())
    }

    fn mark(&self, e: StoreError) -> StoreError {
        if matches!(e, StoreError::Unavailable(_)) {
            self.healthy.store(false, Ordering::Release);
        }
        e
    }

    /// Serves a search on a healthy replica (in turn) or else on the primary; a replica that
    /// fails to answer is marked down and the next one asked, so a replica going away fails no
    /// search. A search that names a write (`scope.after`) is served only by a node that has
    /// replayed it: it waits for a lagging replica up to [`PoolOptions::replica_wait`] (at most
    /// half the time to `scope.deadline`), then goes to the primary.
    async fn search_routed(
        &self,
        queries: Vec<Vec<Vec<f32>>>,
        scope: StoreSearch,
    ) -> Result<Vec<CorpusHits>, StoreError> {
        let n = self.replicas.len();
        let start = self.turn.fetch_add(1, Ordering::Relaxed);
        let wait_until = scope.after.map(|_| {
            let now = Instant::now();
            let left = scope
                .deadline
                .map_or(Duration::MAX, |d| d.saturating_duration_since(now));
            now + self.replica_wait.min(left / 2)
        });
        let mut waiting: Option<Waiting> = None;
        let mut pause = Duration::from_millis(2);
        loop {
            let mut lagging = false;
            for i in 0..n {
                let r = &self.replicas[(start + i) % n];
                if !r.healthy.load(Ordering::Acquire) {
                    continue;
                }
                let answer = async {
                    if let Some(after) = scope.after {
                        if replayed(&r.pool).await? < after {
                            return Ok(None);
                        }
                    }
                    search_on(&r.pool, &self.target(), &queries, &scope)
                        .await
                        .map(Some)
                };
                match answer.await {
                    Ok(Some(hits)) => {
                        r.served.fetch_add(1, Ordering::Relaxed);
                        return Ok(hits);
                    }
                    Ok(None) => lagging = true,
                    Err(StoreError::Unavailable(why)) => {
                        tracing::warn!(store = %r.location, reason = %why, "replica skipped");
                        r.healthy.store(false, Ordering::Release);
                    }
                    Err(e) => return Err(e),
                }
            }
            match wait_until {
                Some(until) if lagging && Instant::now() + pause < until => {
                    waiting.get_or_insert_with(|| Waiting::start(&self.waiting));
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(32));
                }
                _ => break,
            }
        }
        drop(waiting);
        let hits = search_on(&self.pool, &self.target(), &queries, &scope)
            .await
            .map_err(|e| self.mark(e))?;
        self.served.fetch_add(1, Ordering::Relaxed);
        Ok(hits)
    }
}

/// A search counted as waiting for a replica until it is dropped (answered, or abandoned by
/// its request's timeout).
struct Waiting(Arc<AtomicU64>);

impl Waiting {
    fn start(count: &Arc<AtomicU64>) -> Waiting {
        count.fetch_add(1, Ordering::AcqRel);
        Waiting(count.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Records a node's health check, logging a change.
fn note_health(healthy: &AtomicBool, ok: bool, location: &str) {
    if healthy.swap(ok, Ordering::AcqRel) != ok {
        if ok {
            tracing::info!(store = %location, "the database answers again");
        } else {
            tracing::warn!(store = %location, "the database does not answer");
        }
    }
}

/// How far a replica has replayed the primary's WAL (bytes); a primary answers its own
/// position.
async fn replayed(pool: &Pool) -> Result<u64, StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    let row = client
        .query_one(
            "SELECT (coalesce(pg_last_wal_replay_lsn(), pg_current_wal_lsn()) - '0/0'::pg_lsn)::text",
            &[],
        )
        .await
        .map_err(db_error)?;
    let text: String = row.get(0);
    text.parse()
        .map_err(|_| StoreError::Database(format!("unexpected WAL position {text:?}")))
}

/// The table a search reads, where its columns are and how its vectors compare.
struct Target<'a> {
    table: String,
    columns: &'a Columns,
    metric: Metric,
    ranged: BTreeMap<String, FieldType>,
    /// The table's rows, estimated.
    rows: u64,
}

/// The `k` best rows for each query's vectors, searched on `pool`.
async fn search_on(
    pool: &Pool,
    target: &Target<'_>,
    queries: &[Vec<Vec<f32>>],
    scope: &StoreSearch,
) -> Result<Vec<CorpusHits>, StoreError> {
    let c = target.columns;
    let metadata_column = c.metadata_expr();
    let path_only = BTreeMap::new();
    let written = |first: usize, ranged: &BTreeMap<String, FieldType>| {
        scope
            .filter
            .as_deref()
            .map(|f| sql::filter_sql_on(f, first, &c.id, &metadata_column, ranged))
    };
    if scope.filter.as_deref().is_some_and(sql::filter_holds_nul) {
        return Err(StoreError::Invalid(
            "filter: a value or id holds the NUL character (U+0000), which PostgreSQL cannot hold (so no document has it)".into(),
        ));
    }
    let mut filter = written(3, &target.ranged);
    if c.metadata.is_none() && filter.as_ref().is_some_and(|f| !f.paths.is_empty()) {
        return Err(StoreError::Invalid(
            "filter: the store's table has no metadata column (--store-columns metadata=COLUMN): only has_id applies".into(),
        ));
    }
    // What the filter alone says it admits at most: nothing (an empty `any`, say) is answered
    // without asking the database; a few ids are scored exactly rather than looked for by a walk.
    let at_most = scope.filter.as_deref().and_then(Filter::admits_at_most);
    if at_most == Some(0) {
        return Ok(queries
            .iter()
            .map(|_| CorpusHits {
                hits: Vec::new(),
                filter: Some(FilterReport {
                    admitted: Some(0),
                    strategy: Strategy::Empty,
                }),
            })
            .collect());
    }
    let mut client = pool.get().await.map_err(pool_error)?;
    let ef = scope.ef.clamp(1, 1000);
    // A filter with a B-tree form: the planner's estimate of the rows it admits chooses, as the
    // embedded planner does with exact counts, between scoring each of them (the B-tree, then an
    // exact sort) and walking HNSW with the filter written as paths only, which no B-tree
    // answers — left to itself PostgreSQL takes the B-tree far past the point where the walk is
    // faster (docs/benchmarks.md "Stores").
    // Only a B-tree form (a range on a number, a match on a keyword) gives PostgreSQL the
    // statistics to estimate what a filter admits; a path alone gets a fixed guess.
    let mut plan = None;
    let btree = filter
        .as_ref()
        .is_some_and(|f| !f.numbers.is_empty() || !f.keywords.is_empty());
    if btree || at_most.is_some() {
        let admitted = if btree {
            let alone = written(1, &target.ranged).unwrap_or_default();
            let estimate = estimate_admitted(&client, &target.table, &alone).await?;
            at_most.map_or(estimate, |b| b.min(estimate))
        } else {
            at_most.unwrap_or_default()
        };
        let rows = match target.rows {
            0 => estimated_rows(&client, &target.table).await?,
            n => n,
        };
        if exact_is_cheaper(admitted, ef, rows) {
            plan = Some(Strategy::Exact);
        } else {
            filter = written(3, &path_only);
        }
    }
    let where_clause = filter.as_ref().map_or("TRUE", |f| f.text.as_str());
    let metadata = if scope.with_metadata {
        c.metadata_expr()
    } else {
        "NULL::jsonb".into()
    };
    let (op, embedding) = (target.metric.operator(), &c.embedding);
    let statement = format!(
        "SELECT {}::text, {}, {}, {metadata}, ({embedding} {op} $1)::float8 FROM {} WHERE {where_clause}
             ORDER BY {embedding} {op} $1 LIMIT $2",
        c.id,
        c.title_expr(),
        c.text_expr(),
        target.table
    );
    let mut out = Vec::with_capacity(queries.len());
    for vectors in queries {
        let tx = client.transaction().await.map_err(db_error)?;
        let iterative = if filter.is_some() {
            "SET LOCAL hnsw.iterative_scan = relaxed_order;"
        } else {
            ""
        };
        // Exact: no index scan (HNSW's kind), so the B-tree bitmap, then a sort.
        let steer = if plan == Some(Strategy::Exact) {
            "SET LOCAL enable_indexscan = off;"
        } else {
            ""
        };
        tx.batch_execute(&format!(
            "SET LOCAL hnsw.ef_search = {ef}; {iterative} {steer}"
        ))
        .await
        .map_err(db_error)?;
        let prepared = tx.prepare_cached(&statement).await.map_err(db_error)?;
        let mut lists = Vec::with_capacity(vectors.len());
        let mut strategy = plan.unwrap_or(Strategy::Graph);
        for v in vectors.iter() {
            let mut hits = run(&tx, &prepared, v, scope.k, filter.as_ref(), target.metric).await?;
            if filter.is_some() && hits.len() < scope.k && strategy != Strategy::Exact {
                // The walk stopped short: score every admitted row instead.
                tx.batch_execute("SET LOCAL enable_indexscan = off")
                    .await
                    .map_err(db_error)?;
                hits = run(&tx, &prepared, v, scope.k, filter.as_ref(), target.metric).await?;
                tx.batch_execute("SET LOCAL enable_indexscan = on")
                    .await
                    .map_err(db_error)?;
                strategy = Strategy::GraphThenExact;
            }
            lists.push(hits);
        }
        tx.commit().await.map_err(db_error)?;
        out.push(CorpusHits {
            hits: merge_vectors(lists, scope.k),
            filter: filter.as_ref().map(|_| FilterReport {
                admitted: None,
                strategy,
            }),
        });
    }
    Ok(out)
}

/// A filter's parameters, in the order its SQL numbers them.
fn filter_params(f: &sql::Sql) -> Vec<&(dyn ToSql + Sync)> {
    f.order
        .iter()
        .map(|p| -> &(dyn ToSql + Sync) {
            match p {
                sql::Param::Path(i) => &f.paths[*i],
                sql::Param::Ids(i) => &f.ids[*i],
                sql::Param::Number(i) => &f.numbers[*i],
                sql::Param::Keywords(i) => &f.keywords[*i],
            }
        })
        .collect()
}

/// Admitted rows' squared count, per unit of `ef × rows`, below which scoring each of them is
/// expected to beat the filtered HNSW walk. Measured on pgvector (docs/benchmarks.md "Stores"):
/// a 1% range at 1M rows (1.5 here at ef 64) ran 44× faster scored exactly than left to
/// PostgreSQL, a 10% range at 100,000 rows (4.0 at ef 256) 3× faster walked; 2.5 sits between
/// them with room on either side.
const EXACT_BELOW: f64 = 2.5;

/// Whether scoring the `admitted` rows exactly is expected to beat walking HNSW at `ef` through a
/// table of `rows`: the exact plan's cost grows with what the filter admits, the walk's as it
/// narrows (about `ef × rows / admitted` rows read to find `ef` admitted ones).
fn exact_is_cheaper(admitted: u64, ef: usize, rows: u64) -> bool {
    let admitted = admitted as f64;
    admitted * admitted <= EXACT_BELOW * ef as f64 * rows as f64
}

/// How many rows the planner expects `filter` (numbered from `$1`) to admit.
async fn estimate_admitted(
    client: &tokio_postgres::Client,
    table: &str,
    filter: &sql::Sql,
) -> Result<u64, StoreError> {
    let rows = client
        .query(
            &format!("EXPLAIN SELECT 1 FROM {table} WHERE {}", filter.text),
            &filter_params(filter),
        )
        .await
        .map_err(db_error)?;
    let top: String = rows.first().map(|r| r.get(0)).unwrap_or_default();
    top.split("rows=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| StoreError::Database(format!("unexpected plan {top:?}")))
}

/// The table's rows as the planner's statistics count them (0 before its first ANALYZE).
async fn estimated_rows(client: &tokio_postgres::Client, table: &str) -> Result<u64, StoreError> {
    let row = client
        .query_one(
            "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass($1::text)",
            &[&table],
        )
        .await
        .map_err(db_error)?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// One statement's hits for one vector.
async fn run(
    tx: &deadpool_postgres::Transaction<'_>,
    statement: &tokio_postgres::Statement,
    vector: &[f32],
    k: usize,
    filter: Option<&sql::Sql>,
    metric: Metric,
) -> Result<Vec<Hit>, StoreError> {
    let v = Vector::from(vector.to_vec());
    let limit = k as i64;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&v, &limit];
    if let Some(f) = filter {
        params.extend(filter_params(f));
    }
    let rows = tx.query(statement, &params).await.map_err(db_error)?;
    let mut hits = Vec::with_capacity(rows.len());
    for r in rows {
        // A row with no vector (NULL) has no distance: it is no hit.
        let Some(distance) = r.try_get::<_, Option<f64>>(4).map_err(db_error)? else {
            continue;
        };
        hits.push(Hit {
            id: r
                .try_get::<_, Option<String>>(0)
                .map_err(db_error)?
                .unwrap_or_default(),
            title: r.try_get(1).map_err(db_error)?,
            text: r.try_get(2).map_err(db_error)?,
            metadata: metadata_of(r.try_get(3).map_err(db_error)?),
            score: metric.score(distance),
            rank: hits.len() + 1,
        });
    }
    Ok(hits)
}

/// Metadata as responses carry it: none for an empty object (the column's default).
fn metadata_of(v: Option<serde_json::Value>) -> Option<serde_json::Value> {
    v.filter(|m| m.as_object().is_none_or(|o| !o.is_empty()))
}

impl DocumentStore for PgStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            payload_fields: self.payload_fields(),
            ..self.info.clone()
        }
    }

    fn default_ef(&self) -> usize {
        self.info.ef_search
    }

    fn payload_fields(&self) -> BTreeMap<String, FieldSchema> {
        crate::sync::read(&self.declared).fields.clone()
    }

    fn set_payload_index<'a>(
        &'a self,
        key: &'a str,
        schema: Option<FieldSchema>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.declare(key, schema))
    }

    fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
            || self
                .replicas
                .iter()
                .any(|r| r.healthy.load(Ordering::Acquire))
    }

    fn primary_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    fn replicas(&self) -> Vec<super::ReplicaHealth> {
        self.replicas
            .iter()
            .map(|r| super::ReplicaHealth {
                location: r.location.clone(),
                healthy: r.healthy.load(Ordering::Acquire),
                lag_bytes: Some(r.lag.load(Ordering::Acquire)).filter(|&l| l != u64::MAX),
            })
            .collect()
    }

    fn activity(&self) -> super::StoreActivity {
        let mut served = vec![super::NodeServed {
            role: "primary",
            location: self.location.to_string(),
            searches: self.served.load(Ordering::Relaxed),
        }];
        served.extend(self.replicas.iter().map(|r| super::NodeServed {
            role: "replica",
            location: r.location.clone(),
            searches: r.served.load(Ordering::Relaxed),
        }));
        super::StoreActivity {
            served,
            waiting: self.waiting.load(Ordering::Acquire),
        }
    }

    fn search<'a>(
        &'a self,
        queries: Vec<Vec<Vec<f32>>>,
        scope: StoreSearch,
    ) -> BoxFuture<'a, Result<Vec<CorpusHits>, StoreError>> {
        Box::pin(self.search_routed(queries, scope))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<StoredRecord>, StoreError>> {
        Box::pin(async move {
            // No row's id holds a NUL character: PostgreSQL's text cannot.
            if id.contains('\0') {
                return Ok(None);
            }
            let c = &self.columns;
            let sql = format!(
                "SELECT {id}::text, {}, {}, {} FROM {} WHERE {id}::text = $1",
                c.title_expr(),
                c.text_expr(),
                c.metadata_expr(),
                self.location.quoted_table(),
                id = c.id,
            );
            let row = self
                .primary(|c| async move { c.query_opt(&sql, &[&id]).await })
                .await?;
            row.map(|r| {
                Ok(StoredRecord {
                    id: r.try_get(0).map_err(db_error)?,
                    title: r.try_get(1).map_err(db_error)?,
                    text: r.try_get(2).map_err(db_error)?,
                    metadata: metadata_of(r.try_get(3).map_err(db_error)?),
                })
            })
            .transpose()
        })
    }

    fn upsert(&self, docs: Vec<RecordWrite>) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            self.check_writable()?;
            let write = async {
                let mut client = self.pool.get().await.map_err(pool_error)?;
                let tx = client.transaction().await.map_err(db_error)?;
                let statement = tx
                    .prepare_cached(&format!(
                        "INSERT INTO {} (id, title, text, metadata, embedding)
                         VALUES ($1, $2, $3, $4, $5)
                         ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title,
                             text = EXCLUDED.text, metadata = EXCLUDED.metadata,
                             embedding = EXCLUDED.embedding",
                        self.location.quoted_table()
                    ))
                    .await
                    .map_err(db_error)?;
                let empty = serde_json::Value::Object(Default::default());
                for d in &docs {
                    storable(d)?;
                    let v = unit(d)?;
                    let metadata = d.metadata.as_ref().unwrap_or(&empty);
                    tx.execute(&statement, &[&d.id, &d.title, &d.text, metadata, &v])
                        .await
                        .map_err(db_error)?;
                }
                tx.commit().await.map_err(db_error)?;
                commit_position(&client).await
            };
            write.await.map_err(|e| self.mark(e))
        })
    }

    fn delete(&self, ids: Vec<String>) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            self.check_writable()?;
            let write = async {
                let client = self.pool.get().await.map_err(pool_error)?;
                client
                    .execute(
                        &format!(
                            "DELETE FROM {} WHERE id = ANY($1::text[])",
                            self.location.quoted_table()
                        ),
                        &[&ids],
                    )
                    .await
                    .map_err(db_error)?;
                commit_position(&client).await
            };
            write.await.map_err(|e| self.mark(e))
        })
    }

    fn texts<'a>(
        &'a self,
        spill: &'a mut crate::store::vocab::TextSpill,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let pool = self.pool.clone();
            texts(&pool, &self.location, &self.columns, spill)
                .await
                .map_err(|e| self.mark(e))
        })
    }

    fn count(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let sql = format!("SELECT count(*) FROM {}", self.location.quoted_table());
            let row = self
                .primary(|c| async move { c.query_one(&sql, &[]).await })
                .await?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }
}

/// Every row's title and text, read through a server-side cursor (a portal) a batch at a time
/// and written into `spill`, with no statement timeout: a large table takes as long as it
/// takes, and its text is never all in memory.
pub async fn texts(
    pool: &Pool,
    location: &PgLocation,
    columns: &Columns,
    spill: &mut crate::store::vocab::TextSpill,
) -> Result<(), StoreError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    let tx = client.transaction().await.map_err(db_error)?;
    tx.batch_execute("SET LOCAL statement_timeout = 0")
        .await
        .map_err(db_error)?;
    let statement = tx
        .prepare(&format!(
            "SELECT {}, {} FROM {}",
            columns.title_expr(),
            columns.text_expr(),
            location.quoted_table()
        ))
        .await
        .map_err(db_error)?;
    let portal = tx.bind(&statement, &[]).await.map_err(db_error)?;
    loop {
        let rows = tx.query_portal(&portal, 10_000).await.map_err(db_error)?;
        if rows.is_empty() {
            break;
        }
        // The spill's writes block on the disk: off the runtime's worker where it has others.
        blocking(|| {
            for row in &rows {
                let title: &str = row.try_get(0).map_err(db_error)?;
                let text: &str = row.try_get(1).map_err(db_error)?;
                spill
                    .push(title, text)
                    .map_err(|e| StoreError::Local(format!("cannot write the text spill: {e}")))?;
            }
            Ok::<_, StoreError>(())
        })?;
    }
    tx.commit().await.map_err(db_error)?;
    Ok(())
}

/// Runs `f`, which blocks on IO, where it holds up no other task: in place of the worker thread
/// on a multi-threaded runtime (which hands that worker's tasks to another), inline elsewhere.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// The WAL position after a committed write (bytes from the log's start): it orders writes,
/// and a replica that has replayed this far has the write.
async fn commit_position(client: &tokio_postgres::Client) -> Result<u64, StoreError> {
    let row = client
        .query_one("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::text", &[])
        .await
        .map_err(db_error)?;
    let text: String = row.get(0);
    text.parse()
        .map_err(|_| StoreError::Database(format!("unexpected WAL position {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_never_show_their_password() {
        let l = PgLocation::parse(
            "postgres://capot:s3cret@db.internal:6543/search?table=docs&connect_timeout=2",
            None,
        )
        .unwrap();
        assert_eq!(
            l.to_string(),
            "postgres://capot@db.internal:6543/search?table=docs"
        );
        assert_eq!(format!("{l:?}"), l.to_string());
        assert_eq!(l.config.get_password(), Some(&b"s3cret"[..]));
        let l = PgLocation::parse("postgres://capot@db/search?table=s.docs", Some("pw".into()))
            .unwrap();
        assert_eq!(l.config.get_password(), Some(&b"pw"[..]));
        assert_eq!(l.quoted_table(), "\"s\".\"docs\"");
    }

    #[test]
    fn bad_locations_are_refused_with_a_reason() {
        for (url, why) in [
            ("mysql://x/y?table=t", "postgres://"),
            ("postgres://u@h/db", "?table=NAME"),
            ("postgres://u@h/db?table=a;drop", "letters, digits"),
            ("postgres://u@h/db?table=a.b.c", "letters, digits"),
            (
                "postgres://u@h/db?table=t&sslmode=verify-full",
                "sslrootcert",
            ),
            ("postgres://u@h/db?table=t&sslmode=sure", "expected disable"),
            ("postgres://u:secret@h:notaport/db?table=t", "not a valid"),
        ] {
            let e = PgLocation::parse(url, None).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
