//! Tests of the index module: round trip, recall, atomicity, corruption handling.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::*;

/// SplitMix64: a tiny seeded generator (no dev-dependency needed).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    fn gauss(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
    fn unit_vector(&mut self, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim).map(|_| self.gauss()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }
}

fn corpus(n: usize, dim: usize, seed: u64) -> (Vec<Document>, Vec<f32>) {
    let mut rng = Rng(seed);
    let docs = (0..n)
        .map(|i| Document {
            id: format!("doc-{i}"),
            title: if i % 3 == 0 {
                String::new()
            } else {
                format!("Title {i} — é")
            },
            text: format!("Text of document {i}, with some words: ünïcödé ✓."),
        })
        .collect();
    let vectors = (0..n).flat_map(|_| rng.unit_vector(dim)).collect();
    (docs, vectors)
}

fn fields(dim: usize) -> ManifestFields {
    ManifestFields {
        encoder_fingerprint: "sha256:test-doc-encoder".into(),
        encoder_name: "test-encoder".into(),
        dimension: dim,
        capot_version: "0.0.0-test".into(),
    }
}

fn quick_params() -> HnswParams {
    HnswParams {
        m: 16,
        ef_construction: 100,
        ef_search: 64,
        ..HnswParams::default()
    }
}

fn build_small(dir: &Path, n: usize, dim: usize, seed: u64) -> Index {
    let (docs, vecs) = corpus(n, dim, seed);
    IndexBuilder::new(dir, fields(dim))
        .params(quick_params())
        .build(docs, vecs, &mut |_| Ok(()))
        .expect("build")
}

/// Entries of `parent` other than `keep` (temporary or old directories left behind).
fn leftovers(parent: &Path, keep: &str) -> Vec<String> {
    std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != keep)
        .collect()
}

fn recall_at(index: &Index, queries: &[Vec<f32>], k: usize, ef: usize) -> f64 {
    let mut found = 0usize;
    for q in queries {
        let exact = index.search_exact(q, k).unwrap();
        let approx = index.search(q, k, ef).unwrap();
        found += approx
            .iter()
            .filter(|h| exact.iter().any(|e| e.index == h.index))
            .count();
    }
    found as f64 / (queries.len() * k) as f64
}

#[test]
fn build_load_roundtrip_identical_results_and_recall() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let (n, dim) = (2000, 32);
    let (docs, vecs) = corpus(n, dim, 7);
    let mut stages = Vec::new();
    let built = IndexBuilder::new(&out, fields(dim))
        .params(HnswParams::default())
        .build(docs.clone(), vecs.clone(), &mut |p| {
            stages.push(p.stage);
            Ok(())
        })
        .unwrap();
    assert_eq!(stages.first(), Some(&BuildStage::Validated));
    assert_eq!(stages.last(), Some(&BuildStage::Committing));
    assert!(stages.contains(&BuildStage::Inserting));
    assert_eq!(leftovers(tmp.path(), "idx"), Vec::<String>::new());

    let loaded = Index::load(&out).unwrap();
    let mut same = built.manifest().clone();
    assert!((same.build_seconds - loaded.manifest().build_seconds).abs() < 1e-9);
    same.build_seconds = loaded.manifest().build_seconds;
    assert_eq!(loaded.manifest(), &same);
    let m = loaded.manifest();
    assert_eq!((m.count, m.dimension, m.metric), (n, dim, Metric::Cosine));
    assert_eq!(m.encoder_fingerprint, "sha256:test-doc-encoder");
    assert_eq!(
        (m.hnsw.m, m.hnsw.ef_construction, m.hnsw.ef_search),
        (16, 200, 64)
    );
    assert!(m.hnsw.top_level >= 1, "{m:?}");
    assert_eq!(m.hnsw.distance, "dot");
    assert!(m.created_at.ends_with('Z') && m.build_seconds > 0.0);

    // Store and vectors round trip.
    for i in [0, 1, 2, 999, n - 1] {
        assert_eq!(loaded.document(i).unwrap().as_ref(), Some(&docs[i]));
        assert_eq!(loaded.index_of(&docs[i].id).unwrap(), Some(i));
        let v = loaded.vector(i).unwrap();
        assert_eq!(v, built.vector(i).unwrap());
        for (a, b) in v.iter().zip(&vecs[i * dim..(i + 1) * dim]) {
            assert!((a - b).abs() < 1e-6);
        }
    }
    assert!(loaded.document(n).unwrap().is_none() && loaded.vector(n).is_none());
    assert_eq!(loaded.index_of("nope").unwrap(), None);

    // Same results before and after reload; recall vs exact.
    let mut rng = Rng(99);
    let queries: Vec<Vec<f32>> = (0..200).map(|_| rng.unit_vector(dim)).collect();
    for q in &queries {
        for ef in [16, 64] {
            assert_eq!(
                built.search(q, 10, ef).unwrap(),
                loaded.search(q, 10, ef).unwrap()
            );
        }
    }
    let recall = recall_at(&loaded, &queries, 10, 64);
    println!("recall@10 at ef=64 on {n} random {dim}-d vectors: {recall:.4}");
    assert!(recall >= 0.95, "recall@10 {recall}");

    // A document's own vector finds itself first, with cosine 1.
    let hits = loaded.search(loaded.vector(42).unwrap(), 5, 64).unwrap();
    assert_eq!(hits[0].index, 42);
    assert!((hits[0].score - 1.0).abs() < 1e-5);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    // Scale does not matter (cosine): the query is normalised.
    let scaled: Vec<f32> = loaded.vector(42).unwrap().iter().map(|x| x * 3.0).collect();
    let rescaled = loaded.search(&scaled, 5, 64).unwrap();
    for (a, b) in rescaled.iter().zip(&hits) {
        assert_eq!(a.index, b.index);
        assert!((a.score - b.score).abs() < 1e-6);
    }
    assert_eq!(loaded.search_exact(&scaled, 5).unwrap()[0].index, 42);
}

#[test]
fn k_larger_than_ef_or_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let index = build_small(&tmp.path().join("i"), 300, 16, 1);
    let q = Rng(5).unit_vector(16);
    assert_eq!(index.search(&q, 50, 10).unwrap().len(), 50);
    assert!(index.search(&q, 0, 10).unwrap().is_empty());
    assert!(index.search_exact(&q, 0).unwrap().is_empty());
    assert_eq!(index.search_exact(&q, 1000).unwrap().len(), 300);
    let all = index.search(&q, 1000, 5).unwrap();
    assert!(all.len() <= 300 && all.len() >= 290, "{}", all.len());
    let exact = index.search_exact(&q, 20).unwrap();
    assert_eq!(index.search(&q, 20, 300).unwrap(), exact);
}

/// Identical (duplicate) document vectors tie exactly; each is found once, and a query equal
/// to them finds all of them.
#[test]
fn duplicate_vectors_are_each_found_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dim = 384;
    let (docs, base) = corpus(600, dim, 12);
    let vecs: Vec<f32> = (0..600)
        .flat_map(|i| base[(i % 150) * dim..(i % 150 + 1) * dim].to_vec())
        .collect();
    // Several threads too: a node linked before its own lists were complete used to be cut
    // off from the graph.
    for threads in [1, 4] {
        let index = IndexBuilder::new(tmp.path().join(format!("dup{threads}")), fields(dim))
            .params(quick_params())
            .threads(threads)
            .build(docs.clone(), vecs.clone(), &mut |_| Ok(()))
            .unwrap();
        for i in 0..150 {
            let hits = index.search(index.vector(i).unwrap(), 4, 32).unwrap();
            let mut got: Vec<usize> = hits.iter().map(|h| h.index).collect();
            got.sort_unstable();
            assert_eq!(got, vec![i, i + 150, i + 300, i + 450], "{threads} threads");
            assert!(hits.iter().all(|h| (h.score - 1.0).abs() < 1e-5));
        }
    }
}

#[test]
fn query_validation() {
    let tmp = tempfile::tempdir().unwrap();
    let index = build_small(&tmp.path().join("i"), 200, 8, 2);
    assert!(matches!(
        index.search(&[0.5; 7], 5, 16),
        Err(IndexError::DimensionMismatch {
            expected: 8,
            got: 7
        })
    ));
    assert!(matches!(
        index.search_exact(&[0.5; 9], 5),
        Err(IndexError::DimensionMismatch { .. })
    ));
    assert!(matches!(
        index.search(&[0.0; 8], 5, 16),
        Err(IndexError::InvalidQuery(_))
    ));
    let mut nan = vec![0.1; 8];
    nan[3] = f32::NAN;
    assert!(matches!(
        index.search(&nan, 5, 16),
        Err(IndexError::InvalidQuery(_))
    ));
    assert!(matches!(
        index.search_exact(&nan, 5),
        Err(IndexError::InvalidQuery(_))
    ));
}

#[test]
fn index_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Index>();
    let tmp = tempfile::tempdir().unwrap();
    let index = Arc::new(build_small(&tmp.path().join("i"), 500, 16, 3));
    let q = Rng(11).unit_vector(16);
    let expected = index.search(&q, 10, 32).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (index, q) = (Arc::clone(&index), q.clone());
            std::thread::spawn(move || {
                (0..50)
                    .map(|_| index.search(&q, 10, 32).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap().iter().all(|r| *r == expected));
    }
}

#[test]
fn bad_build_inputs_leave_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let b = IndexBuilder::new(&out, fields(8)).params(quick_params());
    let none = &mut |_: &BuildProgress| Ok(());

    assert!(matches!(
        b.build(vec![], vec![], none),
        Err(IndexError::EmptyCorpus)
    ));
    let (docs, vecs) = corpus(50, 8, 4);
    let e = b
        .build(docs.clone(), vecs[..vecs.len() - 8].to_vec(), none)
        .unwrap_err();
    assert!(
        matches!(e, IndexError::InvalidInput(ref m) if m.contains("mismatch")),
        "{e}"
    );
    let mut dup = docs.clone();
    dup[7].id = dup[3].id.clone();
    let e = b.build(dup, vecs.clone(), none).unwrap_err();
    assert!(
        e.to_string().contains("duplicate document id \"doc-3\""),
        "{e}"
    );
    let mut empty_id = docs.clone();
    empty_id[5].id.clear();
    assert!(matches!(
        b.build(empty_id, vecs.clone(), none),
        Err(IndexError::InvalidInput(_))
    ));
    let mut zero = vecs.clone();
    zero[8..16].fill(0.0);
    assert!(matches!(
        b.build(docs.clone(), zero, none),
        Err(IndexError::InvalidInput(_))
    ));
    let mut nan = vecs.clone();
    nan[20] = f32::INFINITY;
    assert!(matches!(
        b.build(docs.clone(), nan, none),
        Err(IndexError::InvalidInput(_))
    ));
    let bad_m = b.clone().params(HnswParams {
        m: 300,
        ..quick_params()
    });
    assert!(matches!(
        bad_m.build(docs, vecs, none),
        Err(IndexError::InvalidInput(_))
    ));
    assert_eq!(leftovers(tmp.path(), ""), Vec::<String>::new());
}

#[test]
fn cancelled_build_leaves_nothing_loadable() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let (docs, vecs) = corpus(1500, 8, 5);
    for (stage, at) in [
        (BuildStage::Inserting, 1),
        (BuildStage::Writing, 2),
        (BuildStage::Writing, 3),
        (BuildStage::Committing, 0),
    ] {
        let e = IndexBuilder::new(&out, fields(8))
            .params(quick_params())
            .build(docs.clone(), vecs.clone(), &mut |p| {
                if p.stage == stage && p.done >= at {
                    Err(IndexError::Cancelled(format!("test at {stage:?}")))
                } else {
                    Ok(())
                }
            })
            .unwrap_err();
        assert!(matches!(e, IndexError::Cancelled(_)), "{e}");
        assert!(!out.exists(), "out dir exists after cancel at {stage:?}");
        assert_eq!(leftovers(tmp.path(), ""), Vec::<String>::new());
        assert!(Index::load(&out).is_err());
    }
}

#[test]
fn existing_output_and_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    build_small(&out, 100, 8, 6);
    let (docs, vecs) = corpus(120, 8, 7);
    let b = IndexBuilder::new(&out, fields(8)).params(quick_params());
    let e = b
        .build(docs.clone(), vecs.clone(), &mut |_| Ok(()))
        .unwrap_err();
    assert!(matches!(e, IndexError::AlreadyExists(_)), "{e}");
    assert_eq!(Index::load(&out).unwrap().len(), 100);

    let replaced = b
        .clone()
        .overwrite(true)
        .build(docs.clone(), vecs.clone(), &mut |_| Ok(()));
    assert_eq!(replaced.unwrap().len(), 120);
    assert_eq!(Index::load(&out).unwrap().len(), 120);
    assert_eq!(leftovers(tmp.path(), "idx"), Vec::<String>::new());

    // Overwrite refuses to delete a directory that is not an index.
    let other = tmp.path().join("precious");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "keep me").unwrap();
    let e = IndexBuilder::new(&other, fields(8))
        .overwrite(true)
        .build(docs, vecs, &mut |_| Ok(()))
        .unwrap_err();
    assert!(e.to_string().contains("not an index"), "{e}");
    assert!(other.join("notes.txt").exists());
}

#[test]
fn load_errors_on_missing_or_bad_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Index::load(tmp.path().join("absent")).unwrap_err();
    assert!(matches!(e, IndexError::Io { .. }), "{e}");
    let e = Index::load(tmp.path()).unwrap_err();
    assert!(matches!(e, IndexError::MissingManifest(_)), "{e}");
    assert!(e.to_string().contains("index.json is missing"));

    let out = tmp.path().join("idx");
    build_small(&out, 100, 8, 8);
    let manifest = out.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("\"format_version\": 2", "\"format_version\": 9"),
    )
    .unwrap();
    assert!(matches!(
        Index::load(&out),
        Err(IndexError::UnsupportedVersion {
            found: 9,
            supported: 2
        })
    ));
    std::fs::write(&manifest, &text[..text.len() / 2]).unwrap();
    assert!(matches!(
        Index::load(&out),
        Err(IndexError::InvalidManifest { .. })
    ));
    std::fs::write(
        &manifest,
        text.replace("\"dimension\": 8", "\"dimension\": 16"),
    )
    .unwrap();
    let e = Index::load(&out).unwrap_err();
    assert!(matches!(e, IndexError::InvalidManifest { .. }), "{e}");
    std::fs::write(&manifest, text.replace("\"cosine\"", "\"l2\"")).unwrap();
    assert!(matches!(
        Index::load(&out),
        Err(IndexError::InvalidManifest { .. })
    ));
    std::fs::write(&manifest, &text).unwrap();
    Index::load(&out).unwrap();
    std::fs::remove_file(out.join(DOCS_FILE)).unwrap();
    let e = Index::load(&out).unwrap_err();
    assert!(
        e.to_string().contains("docs.bin") && e.to_string().contains("missing"),
        "{e}"
    );
}

/// Rewrites `len` bytes at `at` (negative: from the end) of a file.
fn patch(path: &Path, at: i64, bytes: &[u8]) {
    let mut data = std::fs::read(path).unwrap();
    let at = if at < 0 { data.len() as i64 + at } else { at } as usize;
    data[at..at + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, data).unwrap();
}

fn truncate(path: &Path, by: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len - by).unwrap();
}

/// A named way of damaging an index.
type Corruption<'a> = (&'static str, Box<dyn Fn() + 'a>);

const NO_CHECKSUMS: LoadOptions = LoadOptions {
    verify_checksums: false,
};

#[test]
fn truncated_or_tampered_vectors_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    build_small(&out, 200, 8, 9);
    let vf = out.join(VECTORS_FILE);
    let good = std::fs::read(&vf).unwrap();

    truncate(&vf, 4);
    let e = Index::load(&out).unwrap_err();
    assert!(
        matches!(e, IndexError::Corrupt { .. }) && e.to_string().contains("truncated"),
        "{e}"
    );

    std::fs::write(&vf, &good).unwrap();
    patch(&vf, 100, &0.5f32.to_le_bytes());
    let e = Index::load(&out).unwrap_err();
    assert!(matches!(e, IndexError::ChecksumMismatch { .. }), "{e}");
    // Without checksum verification a same-size change is not detectable.
    Index::load_with(&out, NO_CHECKSUMS).unwrap();

    std::fs::write(&vf, &good).unwrap();
    let docs = out.join(DOCS_FILE);
    let good_docs = std::fs::read(&docs).unwrap();
    patch(&docs, 0, b"XXXX");
    let e = Index::load_with(&out, NO_CHECKSUMS).unwrap_err();
    assert!(e.to_string().contains("bad magic"), "{e}");
    // The id order (after the header and 3n + 1 offsets) naming one document twice.
    std::fs::write(&docs, &good_docs).unwrap();
    let order = 24 + (3 * 200 + 1) * 8;
    let first: [u8; 4] = good_docs[order..order + 4].try_into().unwrap();
    patch(&docs, order as i64 + 4, &first);
    let e = Index::load_with(&out, NO_CHECKSUMS).unwrap_err();
    assert!(e.to_string().contains("id order"), "{e}");
    // A text byte changed: only the checksum sees it.
    std::fs::write(&docs, &good_docs).unwrap();
    patch(&docs, -2, b"#");
    let e = Index::load(&out).unwrap_err();
    assert!(
        matches!(e, IndexError::ChecksumMismatch { .. }) && e.to_string().contains("docs.bin"),
        "{e}"
    );
}

#[test]
fn corrupt_graph_is_an_error_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let n = 300u32;
    build_small(&out, n as usize, 8, 10);
    let graph = out.join(GRAPH_FILE);
    let g0 = std::fs::read(&graph).unwrap();
    let restore = || std::fs::write(&graph, &g0).unwrap();
    let word = |i: usize| u32::from_le_bytes(g0[4 * i..4 * i + 4].try_into().unwrap());
    let m0 = word(4) as usize;
    let put = |i: usize, v: u32| patch(&graph, 4 * i as i64, &v.to_le_bytes());
    // Word index of node 5's first layer-0 neighbour, and of the level table.
    let node5 = 16 + 5 * (1 + m0);
    let offsets = 16 + n as usize * (1 + m0);

    let cases: Vec<Corruption<'_>> = vec![
        ("truncated graph", Box::new(|| truncate(&graph, 100))),
        ("one word short", Box::new(|| truncate(&graph, 4))),
        ("magic", Box::new(|| put(0, 0))),
        ("layout version", Box::new(|| put(2, 7))),
        ("m", Box::new(|| put(3, 12))),
        ("node count", Box::new(|| put(5, n + 1))),
        ("entry point out of range", Box::new(|| put(6, n))),
        ("top level", Box::new(|| put(7, word(7) + 1))),
        ("neighbour count", Box::new(|| put(node5, u32::MAX))),
        ("neighbour id", Box::new(|| put(node5 + 1, n + 5))),
        ("level table start", Box::new(|| put(offsets, 1))),
        ("level table order", Box::new(|| put(offsets + 3, u32::MAX))),
        (
            "garbage graph",
            Box::new(|| {
                let mut rng = Rng(1);
                let junk: Vec<u8> = (0..g0.len()).map(|_| rng.next_u64() as u8).collect();
                std::fs::write(&graph, junk).unwrap();
            }),
        ),
    ];
    for (what, corrupt) in &cases {
        restore();
        corrupt();
        for opts in [LoadOptions::default(), NO_CHECKSUMS] {
            let e = Index::load_with(&out, opts).expect_err(what);
            println!("{what} (checksums {}): {e}", opts.verify_checksums);
            assert!(
                matches!(
                    e,
                    IndexError::Corrupt { .. } | IndexError::ChecksumMismatch { .. }
                ),
                "{what}: {e}"
            );
            assert!(e.to_string().contains("graph.bin"), "{what}: {e}");
        }
    }
    // A link to another valid node is structurally fine: only the checksum catches it,
    // and searching the tampered graph still answers.
    restore();
    put(node5 + 1, (word(node5 + 1) + 1) % n);
    let e = Index::load(&out).unwrap_err();
    assert!(matches!(e, IndexError::ChecksumMismatch { .. }), "{e}");
    let index = Index::load_with(&out, NO_CHECKSUMS).unwrap();
    assert_eq!(
        index.search(&Rng(3).unit_vector(8), 5, 32).unwrap().len(),
        5
    );
    restore();
    Index::load(&out).unwrap();
}

#[test]
fn one_thread_builds_are_deterministic_and_threads_agree_on_quality() {
    let tmp = tempfile::tempdir().unwrap();
    let (n, dim) = (1500, 24);
    let (docs, vecs) = corpus(n, dim, 21);
    let build = |name: &str, threads: usize, seed: u64| {
        IndexBuilder::new(tmp.path().join(name), fields(dim))
            .params(HnswParams {
                seed,
                ..quick_params()
            })
            .threads(threads)
            .build(docs.clone(), vecs.clone(), &mut |_| Ok(()))
            .unwrap()
    };
    let (a, b, par) = (
        build("a", 1, DEFAULT_LEVEL_SEED),
        build("b", 1, DEFAULT_LEVEL_SEED),
        build("par", 4, DEFAULT_LEVEL_SEED),
    );
    let other = build("other-seed", 1, 7);
    let bytes = |i: &Index| std::fs::read(i.dir().join(GRAPH_FILE)).unwrap();
    assert_eq!(bytes(&a), bytes(&b), "one-thread builds differ");
    assert_eq!(
        a.manifest().files[GRAPH_FILE],
        b.manifest().files[GRAPH_FILE]
    );
    assert_ne!(
        bytes(&a),
        bytes(&other),
        "another seed built the same graph"
    );
    assert_eq!(
        (a.manifest().hnsw.seed, other.manifest().hnsw.seed),
        (DEFAULT_LEVEL_SEED, 7)
    );
    let mut rng = Rng(77);
    let queries: Vec<Vec<f32>> = (0..200).map(|_| rng.unit_vector(dim)).collect();
    let (r1, r4, r_other) = (
        recall_at(&a, &queries, 10, 64),
        recall_at(&par, &queries, 10, 64),
        recall_at(&other, &queries, 10, 64),
    );
    println!("recall@10 ef=64: 1 thread {r1:.4}, 4 threads {r4:.4}, seed 7 {r_other:.4}");
    assert!(
        [r1, r4, r_other]
            .iter()
            .all(|&r| r >= 0.9 && (r - r1).abs() < 0.05),
        "{r1} {r4} {r_other}"
    );
}

#[test]
fn a_manifest_without_a_level_seed_reads_as_the_default_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    build_small(&dir, 50, 8, 3);
    let path = dir.join(MANIFEST_FILE);
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(json["hnsw"]["seed"], DEFAULT_LEVEL_SEED);
    json["hnsw"].as_object_mut().unwrap().remove("seed");
    std::fs::write(&path, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    let index = Index::load(&dir).unwrap();
    assert_eq!(index.manifest().hnsw.seed, DEFAULT_LEVEL_SEED);
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Measurements on 10k random 384-d vectors (prints, asserts nothing).
/// Run: `cargo test --release -- --ignored --nocapture bench_10k`.
#[test]
#[ignore]
fn bench_10k_384() {
    let (n, dim) = (
        std::env::var("BENCH_N")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10_000),
        384,
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let (docs, vecs) = corpus(n, dim, 42);
    let t = Instant::now();
    let built = IndexBuilder::new(&out, fields(dim))
        .build(docs, vecs, &mut |_| Ok(()))
        .unwrap();
    println!(
        "build {n}×{dim} (M=16, ef_c=200): {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let mut sizes = Vec::new();
    for f in [DOCS_FILE, VECTORS_FILE, GRAPH_FILE] {
        let b = std::fs::metadata(out.join(f)).unwrap().len();
        sizes.push(format!("{f} {:.0} B/doc", b as f64 / n as f64));
    }
    println!("disk: {}", sizes.join(", "));

    // Memory of one loaded index: RSS growth while the built one stays alive
    // (so the load cannot reuse memory freed by the build).
    let rss0 = rss_bytes();
    let index = Index::load(&out).unwrap();
    let rss = rss_bytes().saturating_sub(rss0) as f64;
    println!(
        "memory: RSS +{:.0} B/doc for a loaded index (before any search); heap {:.0} B/doc, mapped {:.0} B/doc",
        rss / n as f64,
        index.heap_bytes() as f64 / n as f64,
        index.mapped_bytes() as f64 / n as f64,
    );
    drop(built);

    for round in 0..3 {
        for opts in [NO_CHECKSUMS, LoadOptions::default()] {
            let t = Instant::now();
            drop(Index::load_with(&out, opts).unwrap());
            println!(
                "load (round {round}, checksums {}): {:.0} ms",
                opts.verify_checksums,
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    let mut rng = Rng(1234);
    let random: Vec<Vec<f32>> = (0..300).map(|_| rng.unit_vector(dim)).collect();
    // Queries near documents (doc + noise, cosine ≈ 0.8), closer to real use.
    let near: Vec<Vec<f32>> = (0..300)
        .map(|i| {
            let d = index.vector((i * 31) % n).unwrap();
            let noise = rng.unit_vector(dim);
            d.iter().zip(&noise).map(|(a, b)| a + 0.75 * b).collect()
        })
        .collect();
    for (name, qs) in [("random", &random), ("near-doc", &near)] {
        for ef in [64, 128] {
            let t = Instant::now();
            for q in qs.iter() {
                std::hint::black_box(index.search(q, 10, ef).unwrap());
            }
            let ms = t.elapsed().as_secs_f64() * 1e3 / qs.len() as f64;
            let recall = recall_at(&index, qs, 10, ef);
            println!("{name} queries, ef={ef}: {ms:.3} ms/query, recall@10 {recall:.3}");
        }
        let t = Instant::now();
        for q in qs.iter() {
            std::hint::black_box(index.search_exact(q, 10).unwrap());
        }
        println!(
            "{name} queries, exact: {:.3} ms/query",
            t.elapsed().as_secs_f64() * 1e3 / qs.len() as f64
        );
    }
}

/// Rewrites a current index directory into the format-1 layout (hnsw_rs dump files,
/// SHA-256 checksums): what `upgrade` meets on disk. The dump files' content is never read
/// by the upgrade, so placeholders stand in for them.
fn downgrade_to_v1(dir: &Path) {
    use sha2::{Digest, Sha256};
    let path = dir.join(MANIFEST_FILE);
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(dir.join(GRAPH_FILE)).unwrap();
    for f in ["hnsw.hnsw.graph", "hnsw.hnsw.data"] {
        std::fs::write(dir.join(f), b"hnsw_rs dump").unwrap();
    }
    let mut files = serde_json::Map::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name != MANIFEST_FILE {
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            files.insert(
                name,
                serde_json::json!({"bytes": bytes.len(), "sha256": hex::encode(Sha256::digest(&bytes))}),
            );
        }
    }
    m["format_version"] = 1.into();
    m["files"] = files.into();
    m["hnsw"] = serde_json::json!({"m": 16, "ef_construction": 100, "ef_search": 48,
        "max_layers": 16, "distance": "DistDot", "library": "hnsw_rs 0.3.5"});
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
}

#[test]
fn format_1_indexes_are_refused_with_a_hint_and_upgrade_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let original = build_small(&out, 400, 16, 31);
    let q = Rng(8).unit_vector(16);
    let exact = original.search_exact(&q, 10).unwrap();
    let docs: Vec<Document> = (0..400)
        .map(|i| original.document(i).unwrap().unwrap())
        .collect();
    drop(original);
    downgrade_to_v1(&out);

    let e = Index::load(&out).unwrap_err();
    assert!(
        matches!(e, IndexError::UnsupportedVersion { found: 1, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("capot index upgrade"), "{e}");

    // A rotten vectors file is refused by the old checksum; nothing is changed.
    let vf = out.join(VECTORS_FILE);
    let good = std::fs::read(&vf).unwrap();
    patch(&vf, 64, &0.25f32.to_le_bytes());
    let e = upgrade(&out, &mut |_| Ok(())).unwrap_err();
    assert!(matches!(e, IndexError::ChecksumMismatch { .. }), "{e}");
    assert!(out.join("hnsw.hnsw.graph").exists());
    std::fs::write(&vf, &good).unwrap();

    let Upgrade::Upgraded { from: 1, index } = upgrade(&out, &mut |_| Ok(())).unwrap() else {
        panic!("not upgraded")
    };
    assert_eq!(index.manifest().hnsw.ef_search, 48);
    let loaded = Index::load(&out).unwrap();
    assert_eq!(loaded.manifest().format_version, FORMAT_VERSION);
    assert_eq!(loaded.search_exact(&q, 10).unwrap(), exact);
    assert_eq!(loaded.search(&q, 10, 400).unwrap(), exact);
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(loaded.document(i).unwrap().as_ref(), Some(d));
    }
    assert!(!out.join("hnsw.hnsw.graph").exists());
    assert_eq!(leftovers(tmp.path(), "idx"), Vec::<String>::new());
    assert!(matches!(
        upgrade(&out, &mut |_| Ok(())).unwrap(),
        Upgrade::Current
    ));
}

#[test]
fn float16_and_int8_graph_vectors_keep_recall_and_exact_scores() {
    let tmp = tempfile::tempdir().unwrap();
    let (n, dim) = (2000, 48);
    let (docs, vecs) = corpus(n, dim, 5);
    let mut rng = Rng(17);
    let queries: Vec<Vec<f32>> = (0..150).map(|_| rng.unit_vector(dim)).collect();
    let mut recalls = Vec::new();
    for precision in [
        GraphVectors::Float32,
        GraphVectors::Float16,
        GraphVectors::Int8,
    ] {
        let out = tmp.path().join(format!("{precision:?}"));
        IndexBuilder::new(&out, fields(dim))
            .params(quick_params())
            .threads(1)
            .graph_vectors(precision)
            .build(docs.clone(), vecs.clone(), &mut |_| Ok(()))
            .unwrap();
        let index = Index::load(&out).unwrap();
        assert_eq!(index.manifest().graph_vectors, precision);
        let copy = index.mapped_bytes() - n * dim * 4 - index.graph.bytes();
        assert_eq!(copy, precision.bytes(n, dim));
        // Scores are the float32 ones whatever the walk read.
        for q in &queries[..20] {
            let exact = index.search_exact(q, 10).unwrap();
            for h in index.search(q, 10, 64).unwrap() {
                let v = index.vector(h.index).unwrap();
                assert_eq!(h.score, vectors::dot(&index.prepare_query(q).unwrap(), v));
            }
            assert_eq!(
                index.search(q, 10, n).unwrap(),
                exact,
                "{precision:?}, ef = n"
            );
        }
        recalls.push(recall_at(&index, &queries, 10, 64));
        if let Some(file) = precision.file() {
            // A flipped byte in the copy is caught by its checksum, a short copy by its size.
            let path = out.join(file);
            let good = std::fs::read(&path).unwrap();
            patch(&path, -1, &[good[good.len() - 1] ^ 0x40]);
            let e = Index::load(&out).unwrap_err();
            assert!(matches!(e, IndexError::ChecksumMismatch { .. }), "{e}");
            truncate(&path, 1);
            let e = Index::load_with(&out, NO_CHECKSUMS).unwrap_err();
            assert!(e.to_string().contains(file), "{e}");
        }
    }
    println!("recall@10 at ef=64, float32 / float16 / int8: {recalls:?}");
    assert!(recalls[1] >= recalls[0] - 0.01, "{recalls:?}");
    assert!(recalls[2] >= recalls[0] - 0.03, "{recalls:?}");
}

/// Pushes `docs[range]` with their vectors.
fn push_range(
    w: &mut IndexWriter,
    docs: &[Document],
    vecs: &[f32],
    dim: usize,
    range: std::ops::Range<usize>,
) {
    for i in range {
        let d = &docs[i];
        w.push(&d.id, &d.title, &d.text, &vecs[i * dim..(i + 1) * dim])
            .unwrap();
    }
}

fn file_bytes(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap()
}

/// An uninterrupted one-thread (deterministic) build of `docs` at `parent/whole`.
fn one_thread_build(parent: &Path, docs: &[Document], vecs: &[f32]) -> std::path::PathBuf {
    let whole = parent.join("whole");
    let dim = vecs.len() / docs.len();
    IndexBuilder::new(&whole, fields(dim))
        .params(quick_params())
        .threads(1)
        .build(docs.to_vec(), vecs.to_vec(), &mut |_| Ok(()))
        .unwrap();
    whole
}

#[test]
fn resumed_build_equals_an_uninterrupted_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (n, dim) = (600, 16);
    let (docs, vecs) = corpus(n, dim, 21);
    let none = &mut |_: &BuildProgress| Ok(());
    let whole = one_thread_build(tmp.path(), &docs, &vecs);

    let out = tmp.path().join("resumed");
    let builder = IndexBuilder::new(&out, fields(dim))
        .params(quick_params())
        .threads(1);
    let (mut w, resume) = builder.resumable_writer("corpus A").unwrap();
    assert_eq!(resume, Resume::Fresh);
    // Two more builds of the same output are kept out while this one holds the lock.
    let e = builder.resumable_writer("corpus A").unwrap_err();
    assert!(e.to_string().contains("another build is writing"), "{e}");
    push_range(&mut w, &docs, &vecs, dim, 0..250);
    w.checkpoint(SourcePosition {
        byte: 1234,
        line: 250,
    })
    .unwrap();
    // Pushed after the last checkpoint, then "killed": these are written again on resume.
    push_range(&mut w, &docs, &vecs, dim, 250..300);
    drop(w);
    assert!(!out.exists(), "nothing is at the output before the commit");

    let (mut w, resume) = builder.resumable_writer("corpus A").unwrap();
    assert_eq!(
        resume,
        Resume::Continue {
            documents: 250,
            position: SourcePosition {
                byte: 1234,
                line: 250
            }
        }
    );
    assert_eq!(w.len(), 250);
    // The ids kept are still known: a duplicate of one is refused and nothing is written.
    let e = w.push(&docs[3].id, "t", "x", &vecs[..dim]).unwrap_err();
    assert!(
        matches!(e, IndexError::DuplicateId { ref id, first: 3 } if id == "doc-3"),
        "{e}"
    );
    assert_eq!(w.len(), 250);
    push_range(&mut w, &docs, &vecs, dim, 250..n);
    let index = w.finish(none).unwrap();
    assert_eq!(index.len(), n);
    for name in [DOCS_FILE, VECTORS_FILE, GRAPH_FILE] {
        assert!(
            file_bytes(&whole, name) == file_bytes(&out, name),
            "{name} differs between the resumed and the uninterrupted build"
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(
        names
            .iter()
            .all(|n| !n.starts_with("build.") && !n.ends_with(".part")),
        "build-only files left in the index: {names:?}"
    );
    assert_eq!(leftovers(tmp.path(), "resumed"), vec!["whole".to_string()]);
}

#[test]
fn a_failed_finish_keeps_the_work_and_the_old_index() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let old = build_small(&out, 40, 8, 1);
    let old_first = old.document(0).unwrap().unwrap().id;
    drop(old);
    let (docs, vecs) = corpus(300, 8, 2);
    let builder = IndexBuilder::new(&out, fields(8))
        .params(quick_params())
        .overwrite(true);
    let (mut w, _) = builder.resumable_writer("corpus B").unwrap();
    push_range(&mut w, &docs, &vecs, 8, 0..300);
    w.checkpoint(SourcePosition {
        byte: 99,
        line: 300,
    })
    .unwrap();
    // The graph stage fails (as a full disk or a cancel would).
    let e = w
        .finish(&mut |p: &BuildProgress| match p.stage {
            BuildStage::Inserting => Err(IndexError::Cancelled("stop".into())),
            _ => Ok(()),
        })
        .unwrap_err();
    assert!(matches!(e, IndexError::Cancelled(_)), "{e}");
    // The old index is untouched and still loads.
    let still = Index::load(&out).unwrap();
    assert_eq!(still.len(), 40);
    assert_eq!(still.document(0).unwrap().unwrap().id, old_first);
    // Running it again resumes with every document and goes straight to the finish.
    let (w, resume) = builder.resumable_writer("corpus B").unwrap();
    assert!(
        matches!(resume, Resume::Continue { documents: 300, .. }),
        "{resume:?}"
    );
    let index = w.finish(&mut |_| Ok(())).unwrap();
    assert_eq!(index.len(), 300);
    assert_eq!(
        index.search(&vecs[8 * 17..8 * 18], 1, 64).unwrap()[0].index,
        17
    );
    assert_eq!(leftovers(tmp.path(), "idx"), Vec::<String>::new());
}

#[test]
fn another_input_or_a_damaged_work_dir_starts_over() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let (docs, vecs) = corpus(100, 8, 3);
    let builder = IndexBuilder::new(&out, fields(8)).params(quick_params());
    let (mut w, _) = builder.resumable_writer("corpus C").unwrap();
    push_range(&mut w, &docs, &vecs, 8, 0..60);
    w.checkpoint(SourcePosition { byte: 1, line: 60 }).unwrap();
    drop(w);
    // Another input: discarded, with the reason.
    let (w, resume) = builder.resumable_writer("corpus D").unwrap();
    match resume {
        Resume::Discarded { reason } => assert!(reason.contains("another input"), "{reason}"),
        other => panic!("expected a discard, got {other:?}"),
    }
    assert_eq!(w.len(), 0);
    drop(w);
    // Another document encoder: discarded.
    let (mut w, _) = builder.resumable_writer("corpus C").unwrap();
    push_range(&mut w, &docs, &vecs, 8, 0..10);
    w.checkpoint(SourcePosition { byte: 1, line: 10 }).unwrap();
    drop(w);
    let mut other = fields(8);
    other.encoder_fingerprint = "sha256:another".into();
    let (w, resume) = IndexBuilder::new(&out, other)
        .resumable_writer("corpus C")
        .unwrap();
    assert!(matches!(resume, Resume::Discarded { .. }), "{resume:?}");
    drop(w);
    // Vectors shorter than the checkpoint says: discarded, not trusted.
    let (mut w, _) = builder.resumable_writer("corpus C").unwrap();
    push_range(&mut w, &docs, &vecs, 8, 0..10);
    w.checkpoint(SourcePosition { byte: 1, line: 10 }).unwrap();
    let work = w.work_dir().to_path_buf();
    drop(w);
    truncate(&work.join(VECTORS_FILE), 4);
    let (w, resume) = builder.resumable_writer("corpus C").unwrap();
    match resume {
        Resume::Discarded { reason } => assert!(reason.contains("checkpoint"), "{reason}"),
        other => panic!("expected a discard, got {other:?}"),
    }
    drop(w);
    // --restart: the partial build goes.
    assert!(builder.discard_partial().unwrap());
    assert!(!work.exists());
    assert!(!builder.discard_partial().unwrap());
}

#[test]
fn a_temporary_writer_leaves_nothing_when_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let (docs, vecs) = corpus(20, 8, 5);
    let mut w = IndexBuilder::new(&out, fields(8)).writer().unwrap();
    push_range(&mut w, &docs, &vecs, 8, 0..20);
    // A temporary writer makes nothing durable to resume from.
    w.checkpoint(SourcePosition::default()).unwrap();
    assert!(!w.work_dir().join(CHECKPOINT_FILE).exists());
    let e = w.push("bad", "", "zero vector", &[0.0; 8]).unwrap_err();
    assert!(e.to_string().contains("vector of document 20"), "{e}");
    let e = w.push("short", "", "", &[1.0; 4]).unwrap_err();
    assert!(matches!(e, IndexError::DimensionMismatch { .. }), "{e}");
    drop(w);
    assert_eq!(leftovers(tmp.path(), "nothing"), Vec::<String>::new());
}

/// A graph build that saves its progress at every tick and is stopped (like a kill) at the
/// first tick after a save: what the interrupted build left in `progress_file`.
fn interrupted_graph_build(vecs: &[f32], dim: usize, params: &HnswParams, progress_file: &Path) {
    let every = graph_build::GraphCheckpoint {
        path: progress_file,
        every: std::time::Duration::ZERO,
    };
    let e = graph_build::build(vecs, dim, params, 2, Some(&every), &mut |_, _| {
        if progress_file.exists() {
            Err(IndexError::Cancelled("killed".into()))
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert!(matches!(e, IndexError::Cancelled(_)), "{e}");
}

#[test]
fn saved_graph_progress_is_continued_only_when_it_fits() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("graph.progress");
    let (n, dim) = (2000, 16);
    let (_, vecs) = corpus(n, dim, 31);
    let params = quick_params();
    interrupted_graph_build(&vecs, dim, &params, &file);
    let inserted = graph_build::saved_progress(&file).expect("progress was saved");
    assert!(0 < inserted && inserted < n, "{inserted} of {n}");
    let start_of = |params: &HnswParams, path: &Path| {
        let every = graph_build::GraphCheckpoint {
            path,
            every: std::time::Duration::from_secs(3600),
        };
        graph_build::build(&vecs, dim, params, 2, Some(&every), &mut |_, _| Ok(())).unwrap()
    };
    // Another m or ef_construction: not continued, and the build is whole anyway.
    let mut other_m = params;
    other_m.m = 12;
    let (words, start) = start_of(&other_m, &file);
    assert!(
        matches!(&start, graph_build::GraphStart::Discarded { reason } if reason.contains("m = 16")),
        "{start:?}"
    );
    assert!(graph::validate(&words, n, 12).is_ok());
    let mut other_ef = params;
    other_ef.ef_construction = 120;
    let (_, start) = start_of(&other_ef, &file);
    assert!(
        matches!(&start, graph_build::GraphStart::Discarded { reason } if reason.contains("ef_construction 100")),
        "{start:?}"
    );
    // A damaged file: refused by its checksum.
    let damaged = tmp.path().join("damaged.progress");
    std::fs::copy(&file, &damaged).unwrap();
    patch(&damaged, 4 * 40, &[0xff]);
    let (_, start) = start_of(&params, &damaged);
    assert!(
        matches!(&start, graph_build::GraphStart::Discarded { reason } if reason.contains("checksum")),
        "{start:?}"
    );
    // The same build: continued from where it stopped, into a graph as good as a whole one.
    let (words, start) = start_of(&params, &file);
    assert_eq!(start, graph_build::GraphStart::Resumed { inserted });
    assert!(graph::validate(&words, n, params.m).is_ok());
}

#[test]
fn an_interrupted_graph_resumes_into_the_same_index() {
    let tmp = tempfile::tempdir().unwrap();
    let (n, dim) = (2000, 16);
    let (docs, vecs) = corpus(n, dim, 32);
    let none = &mut |_: &BuildProgress| Ok(());
    // One thread: the graph is deterministic, so a resumed one must equal it word for word.
    let whole = one_thread_build(tmp.path(), &docs, &vecs);
    let out = tmp.path().join("resumed");
    let builder = IndexBuilder::new(&out, fields(dim))
        .params(quick_params())
        .threads(1)
        .graph_checkpoint_every(Some(std::time::Duration::ZERO));
    let (mut w, _) = builder.resumable_writer("corpus G").unwrap();
    push_range(&mut w, &docs, &vecs, dim, 0..n);
    w.checkpoint(SourcePosition {
        byte: 1,
        line: n as u64,
    })
    .unwrap();
    assert_eq!(w.saved_graph_progress(), None);
    let progress_file = w.work_dir().join("graph.progress");
    let e = w
        .finish(&mut |p: &BuildProgress| {
            if p.stage == BuildStage::Inserting && progress_file.exists() {
                Err(IndexError::Cancelled("killed".into()))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
    assert!(matches!(e, IndexError::Cancelled(_)), "{e}");
    let (w, resume) = builder.resumable_writer("corpus G").unwrap();
    assert!(
        matches!(resume, Resume::Continue { documents, .. } if documents == n),
        "{resume:?}"
    );
    let inserted = w
        .saved_graph_progress()
        .expect("the graph's progress is kept");
    assert!(0 < inserted && inserted < n, "{inserted} of {n}");
    let index = w.finish(none).unwrap();
    assert_eq!(index.len(), n);
    assert!(
        file_bytes(&whole, GRAPH_FILE) == file_bytes(&out, GRAPH_FILE),
        "the resumed graph differs from the uninterrupted one"
    );
    assert!(!out.join("graph.progress").exists());
    assert_eq!(leftovers(tmp.path(), "resumed"), vec!["whole".to_string()]);
}

/// A filter admitting half the documents, all of them far from the query (those with a negative
/// dot product with it): a walk that scores every refused node near the query scores many more
/// nodes than one that steps through the refused neighbourhood (the local rule of
/// `search_layer_filtered` above `TWO_HOP_BELOW`), one that also notices how few admitted nodes
/// it meets and steps through everywhere scores fewer still, and all find the admitted nearest.
#[test]
fn walks_step_through_a_neighbourhood_the_filter_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let dim = 16;
    let index = build_small(&dir.path().join("idx"), 4000, dim, 11);
    let mut rng = Rng(12);
    let (mut through_all, mut stepping, mut switching) = (0usize, 0usize, 0usize);
    let (mut found, mut wanted) = (0usize, 0usize);
    for _ in 0..20 {
        let q = rng.unit_vector(dim);
        let score_of = |i: u32| vectors::dot(&q, index.vector(i as usize).unwrap_or(&[]));
        let far: Vec<bool> = (0..index.len() as u32).map(|i| score_of(i) < 0.0).collect();
        let admit = |i: u32| far.get(i as usize).copied().unwrap_or(false);
        let mut exact: Vec<(f32, u32)> = (0..index.len() as u32)
            .filter(|&i| admit(i))
            .map(|i| (score_of(i), i))
            .collect();
        exact.sort_by(|a, b| b.0.total_cmp(&a.0));
        let share = exact.len() as f64 / index.len() as f64;
        for (hop_below, two_hop_below, scored) in [
            (0.0, 0.0, &mut through_all),
            (0.2, 0.0, &mut stepping),
            (0.2, 0.7 * share, &mut switching),
        ] {
            let mut count = |i: u32| {
                *scored += 1;
                score_of(i)
            };
            let walk = graph::FilteredWalk {
                hop_below,
                two_hop_below,
                budget: usize::MAX,
            };
            let hits = index
                .graph
                .search_filtered(32, &mut count, &|_| {}, &admit, walk, &[])
                .expect("no budget");
            assert!(hits.iter().all(|h| admit(h.1)));
            found += hits
                .iter()
                .take(10)
                .filter(|h| exact[..10].iter().any(|e| e.1 == h.1))
                .count();
            wanted += 10;
        }
    }
    eprintln!("scored: through all {through_all}, stepping {stepping}, switching {switching}");
    // Seeded, so deterministic: 79,494 walking through all, 57,824 stepping through, 32,446
    // switching when written.
    assert!(
        (stepping as f64) < 0.85 * through_all as f64,
        "stepping through scored {stepping} nodes, walking through all {through_all}"
    );
    assert!(
        switching < stepping,
        "switching scored {switching} nodes, stepping through locally {stepping}"
    );
    let recall = found as f64 / wanted as f64;
    assert!(recall >= 0.9, "recall {recall}");
}

/// A filter admitting the twentieth of the documents farthest from the query: a walk that
/// starts where the greedy descent ends (among refused nodes) and steps through them finds
/// few admitted nodes or none, and settles fewer than `k` (the planner then scans); one that
/// also starts from admitted seeds, spread over the admitted set as `search_admitted` picks
/// them, settles `k` and finds most of the admitted nearest.
#[test]
fn admitted_seeds_start_walks_a_filter_sends_far_from_the_query() {
    let dir = tempfile::tempdir().unwrap();
    let dim = 16;
    let index = build_small(&dir.path().join("idx"), 4000, dim, 13);
    let mut rng = Rng(14);
    let (mut short_unseeded, mut short_seeded) = (0, 0);
    let (mut found, mut wanted) = (0usize, 0usize);
    let admitted_count = index.len() / 20;
    for _ in 0..30 {
        let q = rng.unit_vector(dim);
        let score_of = |i: u32| vectors::dot(&q, index.vector(i as usize).unwrap_or(&[]));
        let mut by_score: Vec<(f32, u32)> =
            (0..index.len() as u32).map(|i| (score_of(i), i)).collect();
        by_score.sort_by(|a, b| b.0.total_cmp(&a.0));
        let far: roaring::RoaringBitmap = by_score[index.len() - admitted_count..]
            .iter()
            .map(|s| s.1)
            .collect();
        let admit = |i: u32| far.contains(i);
        let seeds: Vec<u32> = (0..8)
            .filter_map(|j| far.select((j * far.len() / 8) as u32))
            .collect();
        let walk = graph::FilteredWalk {
            hop_below: 1.0,
            two_hop_below: 0.0,
            budget: usize::MAX,
        };
        let mut score = |i: u32| score_of(i);
        let unseeded = index
            .graph
            .search_filtered(32, &mut score, &|_| {}, &admit, walk, &[])
            .expect("no budget");
        short_unseeded += usize::from(unseeded.len() < 10);
        let seeded = index
            .graph
            .search_filtered(32, &mut score, &|_| {}, &admit, walk, &seeds)
            .expect("no budget");
        short_seeded += usize::from(seeded.len() < 10);
        assert!(seeded.iter().chain(&unseeded).all(|h| admit(h.1)));
        let best: Vec<u32> = by_score[index.len() - admitted_count..]
            .iter()
            .take(10)
            .map(|s| s.1)
            .collect();
        found += seeded
            .iter()
            .take(10)
            .filter(|h| best.contains(&h.1))
            .count();
        wanted += 10;
    }
    eprintln!(
        "walks short of 10 hits: unseeded {short_unseeded}, seeded {short_seeded}; \
         seeded recall {found}/{wanted}"
    );
    assert_eq!(short_seeded, 0);
    assert!(
        short_unseeded > 0,
        "every unseeded walk found 10 admitted nodes"
    );
    let recall = found as f64 / wanted as f64;
    assert!(recall >= 0.8, "recall {recall}");
}

/// `n` random `dim`-d unit vectors with `shift` times one shared unit direction added (then
/// normalised again; as some encoders' vectors all lean one way), and `queries` such vectors.
fn leaning_vectors(
    n: usize,
    dim: usize,
    shift: f32,
    queries: usize,
    seed: u64,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    let mut rng = Rng(seed);
    let shared = rng.unit_vector(dim);
    let lean = |rng: &mut Rng| {
        let mut v: Vec<f32> = rng
            .unit_vector(dim)
            .iter()
            .zip(&shared)
            .map(|(x, s)| x + shift * s)
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    };
    let vecs = (0..n).flat_map(|_| lean(&mut rng)).collect();
    (vecs, (0..queries).map(|_| lean(&mut rng)).collect())
}

/// `n` `dim`-d unit vectors around 50 random centres (topics), and `queries` such vectors.
fn clustered_vectors(n: usize, dim: usize, queries: usize, seed: u64) -> (Vec<f32>, Vec<Vec<f32>>) {
    let mut rng = Rng(seed);
    let centres: Vec<Vec<f32>> = (0..50).map(|_| rng.unit_vector(dim)).collect();
    let near = |rng: &mut Rng| {
        let c = &centres[(rng.next_u64() % 50) as usize];
        let mut v: Vec<f32> = rng
            .unit_vector(dim)
            .iter()
            .zip(c)
            .map(|(x, c)| c + 0.6 * x)
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    };
    let vecs = (0..n).flat_map(|_| near(&mut rng)).collect();
    (vecs, (0..queries).map(|_| near(&mut rng)).collect())
}

/// A small-graph index of `vecs` (`dim`-d rows).
fn index_of(vecs: &[f32], dim: usize, seed: u64) -> (tempfile::TempDir, Index) {
    let (docs, _) = corpus(vecs.len() / dim, dim, seed);
    let dir = tempfile::tempdir().unwrap();
    let index = IndexBuilder::new(dir.path().join("idx"), fields(dim))
        .params(HnswParams {
            m: 8,
            ef_construction: 32,
            ..quick_params()
        })
        .build(docs, vecs.to_vec(), &mut |_| Ok(()))
        .expect("build");
    (dir, index)
}

/// Vectors that all share one large direction (as some encoders' do) leave the sign bits little
/// to rank by: here the codes' best 800 hold about half of a query's exact top 10. The scan of
/// the codes notices (its k-th re-score is not clear of what the fit of re-scores against the
/// codes predicts for the candidates left out) and re-scores more, or, past a quarter of the
/// admitted documents, scans them exactly: recall holds.
#[test]
fn the_scan_of_the_sign_codes_re_scores_more_where_the_codes_rank_poorly() {
    let (n, dim, k) = (10_000, 64, 10);
    let (vecs, queries) = leaning_vectors(n, dim, 2.4, 40, 41);
    let (_dir, index) = index_of(&vecs, dim, 41);
    let bits: roaring::RoaringBitmap = (0..n as u32).filter(|i| i % 10 != 0).collect();
    let admitted = Admitted::from(bits.clone());
    let (mut found, mut in_first_800) = (0usize, 0usize);
    let mut strategies = std::collections::BTreeMap::new();
    for q in &queries {
        let mut truth: Vec<(f32, u32)> = bits
            .iter()
            .map(|i| {
                let row = &vecs[i as usize * dim..(i as usize + 1) * dim];
                (vectors::dot(q, row), i)
            })
            .collect();
        truth.sort_by(|a, b| b.0.total_cmp(&a.0));
        let truth: Vec<usize> = truth.iter().take(k).map(|t| t.1 as usize).collect();
        let codes = index.sign.top(&index.sign.query(q), bits.iter(), 800);
        in_first_800 += codes.iter().filter(|h| truth.contains(&h.index)).count();
        // Scan factor and price of the codes 0: the codes are scanned whatever the filter.
        let got = index
            .search_admitted_with(q, k, 64, &admitted, 0.0, 0.0)
            .unwrap();
        *strategies.entry(got.strategy.as_str()).or_insert(0) += 1;
        assert_eq!(got.hits.len(), k);
        if got.strategy == Strategy::SignScanThenExact {
            let ids: Vec<usize> = got.hits.iter().map(|h| h.index).collect();
            assert_eq!(ids, truth, "the exact scan's answer");
        } else {
            assert_eq!(got.strategy, Strategy::SignScan);
        }
        found += got.hits.iter().filter(|h| truth.contains(&h.index)).count();
    }
    let wanted = (queries.len() * k) as f64;
    let (first, recall) = (in_first_800 as f64 / wanted, found as f64 / wanted);
    assert!(
        first < 0.85,
        "the codes rank these vectors too well to test: {first}"
    );
    assert!(
        recall >= 0.93,
        "recall {recall} (the codes' best 800: {first})"
    );
    // Most queries here need more than a quarter of the documents re-scored: scanned exactly.
    assert!(
        strategies.contains_key("sign_scan_then_exact"),
        "{strategies:?}"
    );
}

/// An index learns from its scans of the sign codes how well they rank its vectors: where its
/// vectors share one large direction the median margin falls under 3.5 and its scans start by
/// re-scoring more candidates; where they gather around topics, as real documents do, it stays
/// above and they start as before. Nothing is judged before 32 scans.
#[test]
fn an_index_whose_codes_rank_poorly_starts_its_scans_with_more_candidates() {
    let (n, dim, k) = (10_000, 64, 10);
    let admitted = Admitted::from(
        (0..n as u32)
            .filter(|i| i % 10 != 0)
            .collect::<roaring::RoaringBitmap>(),
    );
    for weak in [false, true] {
        let (vecs, queries) = if weak {
            leaning_vectors(n, dim, 2.4, 48, 43)
        } else {
            clustered_vectors(n, dim, 48, 43)
        };
        let (_dir, index) = index_of(&vecs, dim, 43);
        let before = index.sign_codes();
        assert_eq!(
            (before.scans, before.median_margin, before.candidates_factor),
            (0, None, 1)
        );
        assert_eq!(before.bytes, n * 8);
        let mut strategies = std::collections::BTreeMap::new();
        for (i, q) in queries.iter().enumerate() {
            let got = index
                .search_admitted_with(q, k, 64, &admitted, 0.0, 0.0)
                .unwrap();
            assert_eq!(got.hits.len(), k);
            if i >= 32 {
                *strategies.entry(got.strategy.as_str()).or_insert(0) += 1;
            }
            if i == 30 {
                assert_eq!(
                    index.sign_codes().median_margin,
                    None,
                    "judged before 32 scans"
                );
            }
        }
        let after = index.sign_codes();
        eprintln!("weak {weak}: {after:?} {strategies:?}");
        let median = after.median_margin.expect("judged after 32 scans");
        if weak {
            assert!(median < 3.5, "{after:?}");
            assert!(after.candidates_factor >= 2, "{after:?}");
        } else {
            assert!(median >= 3.5, "{after:?}");
            assert_eq!(after.candidates_factor, 1, "{after:?}");
            assert_eq!(strategies.get("sign_scan"), Some(&16), "{strategies:?}");
        }
    }
}

#[test]
fn visited_marks_are_cleared_by_each_reset_however_many_were_set() {
    use super::graph::Visited;
    let mut v = Visited::new();
    v.reset(1_000);
    // A few marks (cleared one word at a time) and then most nodes (cleared whole).
    for marked in [vec![3u32, 64, 999], (0..1_000).step_by(2).collect()] {
        for &i in &marked {
            assert!(v.insert(i), "{i} is new");
            assert!(!v.insert(i), "{i} was marked");
        }
        v.reset(1_000);
        for &i in &marked {
            assert!(v.insert(i), "{i} is new again after a reset");
        }
        v.reset(1_000);
    }
    // Past the nodes' range (rounded up to a word): refused; a larger graph grows the marks.
    assert!(!v.insert(1_024));
    v.reset(5_000);
    assert!(v.insert(4_999) && v.insert(1_024) && !v.insert(4_999));
}
