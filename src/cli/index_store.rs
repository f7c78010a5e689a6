//! `capot index build --store URL`: a corpus encoded by the document encoder and loaded into
//! PostgreSQL + pgvector (binary COPY, one transaction per chunk), then the HNSW index built.
//! A load run again after a crash skips the ids the table holds already.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use capot::dataset::{self, CorpusStream, ReadMode};
use capot::store::postgres::{self, PgLocation, PoolOptions, StoreRecord};
use capot::store::RecordWrite;

use super::index::{bar, check_rows, encode_chunk, report_skipped, BuildArgs};
use super::GlobalArgs;

pub fn build(args: BuildArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    let url = args.store.clone().context("--store is required")?;
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    if args.chunk_size == 0 {
        bail!("--chunk-size must be at least 1");
    }
    if !(2..=100).contains(&args.m) || !(4..=1000).contains(&args.ef_construction) {
        bail!("pgvector takes --m in 2..=100 and --ef-construction in 4..=1000");
    }
    let mut fields = BTreeMap::new();
    for (k, s) in &args.payload_index {
        if fields.insert(k.clone(), *s).is_some() {
            bail!("--payload-index names {k} twice");
        }
    }
    let password = super::serve::store_password(args.store_password_file.as_deref())?;
    let location = PgLocation::parse(&url, password)?;

    let (pool, manifest) = super::index::document_encoder(&args, global)?;
    let record = StoreRecord {
        encoder_fingerprint: manifest.fingerprint.clone(),
        encoder_name: manifest.label(),
        dimension: manifest.dimension,
        ef_search: args.ef_search,
        payload_fields: fields,
    };

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let db = location.pool(PoolOptions {
        max_connections: 2,
        connect_timeout: Duration::from_secs(10),
        // COPY of a chunk and the HNSW build may take long; nothing here waits on a client.
        statement_timeout: Duration::from_secs(24 * 3600),
        ..PoolOptions::default()
    })?;
    rt.block_on(postgres::create(&db, &location, &record))
        .with_context(|| format!("cannot prepare {location}"))?;
    let stored = rt.block_on(postgres::stored_ids(&db, &location))?;
    if !stored.is_empty() {
        eprintln!(
            "{location} holds {} documents already: those ids are skipped",
            stored.len()
        );
    }
    // Metadata by id (the corpus stream reads id, title and text).
    let mut metadata: HashMap<String, serde_json::Value> = HashMap::new();
    dataset::for_each_metadata(&args.corpus, |id, m| {
        metadata.insert(id, m);
    })?;

    let mode = if args.strict {
        ReadMode::Strict
    } else {
        ReadMode::Lenient
    };
    let mut corpus = CorpusStream::open(&args.corpus, mode)?;
    // Precomputed vectors: row i is the corpus's i-th document, stored or not.
    let npy = match &args.vectors {
        Some(path) => {
            let rows = capot::index::npy::NpyRows::open(path)?;
            if rows.cols() != manifest.dimension {
                bail!(
                    "{} holds {}-dimensional vectors; {} makes {}-dimensional vectors",
                    path.display(),
                    rows.cols(),
                    manifest.label(),
                    manifest.dimension
                );
            }
            Some((path.as_path(), rows))
        }
        None => None,
    };
    let mut ordinal = 0usize;
    let mut checked = 0usize;
    let started = Instant::now();
    let pb = bar(
        corpus.len_bytes(),
        "loading [{bar:30}] {bytes}/{total_bytes} · {msg} · ETA {eta}",
    );
    let (mut loaded, mut skipped) = (0usize, 0usize);
    loop {
        let mut chunk = Vec::with_capacity(args.chunk_size);
        let mut rows = Vec::new();
        while chunk.len() < args.chunk_size {
            match corpus.next_document()? {
                Some((line, doc)) => {
                    if stored.contains(&doc.id) {
                        skipped += 1;
                    } else {
                        chunk.push((line, doc));
                        rows.push(ordinal);
                    }
                    ordinal += 1;
                }
                None => break,
            }
        }
        if report_skipped(&mut corpus, &pb) > 0 {
            if let Some((path, _)) = &npy {
                bail!(
                    "the corpus has bad lines, so the rows of {} cannot be matched to its documents; fix them (or use --strict to find them)",
                    path.display()
                );
            }
        }
        if chunk.is_empty() {
            if corpus.position().0 >= corpus.len_bytes() {
                break;
            }
            pb.set_position(corpus.position().0);
            continue;
        }
        let vectors = match &npy {
            Some((path, npy_rows)) => {
                let mut vectors = Vec::with_capacity(chunk.len());
                let mut row = vec![0f32; manifest.dimension];
                for &i in &rows {
                    if !npy_rows.row(i, &mut row) {
                        bail!(
                            "{} holds {} rows; the corpus has more documents",
                            path.display(),
                            npy_rows.rows()
                        );
                    }
                    vectors.push(row.clone());
                }
                // The first documents re-encoded: the rows must be this encoder's, in order.
                let want = args.check_vectors.saturating_sub(checked).min(chunk.len());
                let sampled: Vec<(usize, &dataset::Document, &[f32])> = (0..want)
                    .map(|k| (rows[k], &chunk[k].1, vectors[k].as_slice()))
                    .collect();
                check_rows(&pool, &sampled, path)?;
                checked += want;
                vectors
            }
            None => encode_chunk(&pool, &chunk, args.batch_size, &|_| {})?,
        };
        let records: Vec<RecordWrite> = chunk
            .into_iter()
            .zip(vectors)
            .map(|((_, d), vector)| RecordWrite {
                metadata: metadata.remove(&d.id),
                id: d.id,
                title: d.title,
                text: d.text,
                vector,
            })
            .collect();
        rt.block_on(postgres::copy_in(&db, &location, &records))
            .with_context(|| {
                format!(
                    "cannot load into {location}; the {loaded} documents loaded before are kept, and running the same command again skips them"
                )
            })?;
        loaded += records.len();
        pb.set_position(corpus.position().0);
        pb.set_message(format!(
            "{loaded} docs · {:.0} docs/s",
            loaded as f64 / started.elapsed().as_secs_f64().max(1e-9)
        ));
    }
    pb.finish_and_clear();
    let load_seconds = started.elapsed().as_secs_f64();
    let spinner = bar(0, "building the HNSW index · {elapsed}");
    spinner.enable_steady_tick(Duration::from_millis(200));
    let hnsw_started = Instant::now();
    rt.block_on(postgres::create_hnsw(
        &db,
        &location,
        args.m,
        args.ef_construction,
    ))
    .with_context(|| format!("cannot build the HNSW index of {location}"))?;
    spinner.finish_and_clear();
    eprintln!(
        "loaded {loaded} documents ({}-d, {}) into {location}{} — encoding and COPY {load_seconds:.1}s ({:.0} docs/s), HNSW index {:.1}s",
        manifest.dimension,
        manifest.label(),
        if skipped > 0 {
            format!(", {skipped} skipped (stored already)")
        } else {
            String::new()
        },
        loaded as f64 / load_seconds.max(1e-9),
        hnsw_started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `capot index vocab --store URL`: query repair's vocabulary from the table's titles and texts,
/// written into `data_dir` where `capot serve --store` (same table, same data directory) loads it.
pub fn vocab(
    url: &str,
    password_file: Option<&std::path::Path>,
    columns: Option<&str>,
    data_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let password = super::serve::store_password(password_file)?;
    let location = PgLocation::parse(url, password)?;
    let columns = columns
        .map(postgres::Columns::parse)
        .transpose()?
        .unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let db = location.pool(PoolOptions {
        max_connections: 1,
        connect_timeout: Duration::from_secs(10),
        statement_timeout: Duration::from_secs(24 * 3600),
        ..PoolOptions::default()
    })?;
    let spinner = bar(0, "reading titles and texts · {elapsed}");
    spinner.enable_steady_tick(Duration::from_millis(200));
    let started = Instant::now();
    let dir = capot::store::vocab::vocab_dir(data_dir, &location.table);
    let mut spill = capot::store::vocab::TextSpill::create(&dir)
        .with_context(|| format!("cannot write into {}", dir.display()))?;
    rt.block_on(postgres::texts(&db, &location, &columns, &mut spill))
        .with_context(|| format!("cannot read {location}"))?;
    spinner.set_message(format!(
        "counting the words of {} documents",
        spill.documents()
    ));
    let texts = spill
        .finish()
        .with_context(|| format!("cannot read back the texts spilled into {}", dir.display()))?;
    let record = capot::store::vocab::build(&dir, &location.to_string(), texts.iter())
        .with_context(|| format!("cannot write the vocabulary into {}", dir.display()))?;
    drop(texts);
    spinner.finish_and_clear();
    eprintln!(
        "vocabulary of {location}: {} words from {} documents in {:.1}s, in {}",
        record.info.words,
        record.documents,
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    println!("{}", serde_json::to_string_pretty(&record.info)?);
    Ok(())
}
