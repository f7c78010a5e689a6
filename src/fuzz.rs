//! Property tests of every parser that reads outside input: whatever the bytes, each accepts
//! them or refuses them with an error — never a panic, never a hang, never an allocation sized
//! by a number in the input rather than by the input itself. (HTTP bodies and gRPC messages are
//! fuzzed through a running server in `tests/fuzz_api.rs`; the config file in the binary's
//! `cli::serve` tests; query repair in `repair::tests`.)
//!
//! Each property runs [`CASES`] generated inputs from a fixed seed (proptest's default
//! persistence is off, so a run is repeatable); the inputs mix well-formed records, records
//! with wrong types, invalid UTF-8, control characters, very long lines and raw bytes.

use std::io::Cursor;
use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::dataset::{
    read_corpus_from, read_qrels_from, read_queries_from, CorpusStream, QueryFormat, ReadMode,
};

/// Generated inputs per property.
const CASES: u32 = 512;

/// A runner with a fixed seed and no failure persistence (tests must not write into the tree).
fn runner() -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases: CASES,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    )
}

/// One line of a BEIR-like file: a valid or broken JSON record, a TSV row, or junk.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let json_value = prop_oneof![
        Just("null".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f}")),
        ".{0,40}".prop_map(|s| serde_json::Value::String(s).to_string()),
        Just("[1, 2]".to_string()),
        Just("{\"a\": {}}".to_string()),
        Just("true".to_string()),
    ];
    let key = prop_oneof![
        Just("_id"),
        Just("title"),
        Just("text"),
        Just("query-id"),
        Just("x")
    ];
    let record = proptest::collection::vec((key, json_value), 0..5).prop_map(|fields| {
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("\"{k}\": {v}"))
            .collect();
        format!("{{{}}}", body.join(", ")).into_bytes()
    });
    prop_oneof![
        3 => record,
        2 => "[^\n]{0,60}".prop_map(String::into_bytes),
        2 => ("[a-z0-9]{0,8}", "[^\n]{0,30}", "-?[0-9]{0,12}")
            .prop_map(|(a, b, c)| format!("{a}\t{b}\t{c}").into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..80),
        1 => (any::<char>(), 1000usize..20_000).prop_map(|(c, n)| c.to_string().repeat(n).into_bytes()),
        1 => Just(b"\xEF\xBB\xBF{\"_id\": \"bom\", \"text\": \"t\"}".to_vec()),
        1 => "[\\x00-\\x1f\\x7f]{0,20}".prop_map(String::into_bytes),
    ]
}

/// A whole file of such lines, with `\n` or `\r\n` endings.
fn file() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(line(), 0..12), any::<bool>()).prop_map(|(lines, crlf)| {
        let sep: &[u8] = if crlf { b"\r\n" } else { b"\n" };
        lines.join(sep)
    })
}

#[test]
fn dataset_readers_accept_or_refuse_any_bytes() {
    let label = Path::new("fuzz");
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("corpus.jsonl");
    runner()
        .run(&file(), |bytes| {
            for mode in [ReadMode::Strict, ReadMode::Lenient] {
                let corpus = read_corpus_from(Cursor::new(&bytes), label, mode);
                let queries: Vec<_> = [QueryFormat::Auto, QueryFormat::Tsv, QueryFormat::Jsonl]
                    .into_iter()
                    .map(|f| read_queries_from(Cursor::new(&bytes), label, f, mode))
                    .collect();
                let qrels = read_qrels_from(Cursor::new(&bytes), label, mode);
                if mode == ReadMode::Lenient {
                    // Lenient readers skip what they cannot read; only I/O can fail them.
                    prop_assert!(corpus.is_ok());
                    prop_assert!(queries.iter().all(Result::is_ok));
                }
                // A line error names a line of the input.
                if let Err(e) = &corpus {
                    let lines = bytes.split(|&b| b == b'\n').count();
                    prop_assert!(e.line().is_none_or(|l| l >= 1 && l <= lines));
                }
                drop(qrels);
                // The streaming reader agrees with the whole-file one on what it accepts.
                std::fs::write(&path, &bytes).expect("write");
                let mut stream = CorpusStream::open(&path, mode).expect("open");
                let mut streamed = 0;
                let outcome = loop {
                    match stream.next_document() {
                        Ok(Some(_)) => streamed += 1,
                        Ok(None) => break Ok(()),
                        Err(e) => break Err(e),
                    }
                };
                if let (Ok((c, _)), Ok(())) = (&corpus, &outcome) {
                    // The whole-file reader also refuses duplicate ids; the stream leaves them
                    // to the index writer.
                    prop_assert!(streamed >= c.len());
                }
            }
            Ok(())
        })
        .expect("dataset readers");
}

#[test]
fn npy_headers_of_any_shape_are_refused_before_allocating() {
    use crate::index::npy::{read_f32_matrix, NpyRows};
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("v.npy");
    let header = prop_oneof![
        // Plausible headers with any shape, dtype and order.
        (
            prop_oneof![
                Just("'<f4'"),
                Just("'<f8'"),
                Just("'>f4'"),
                Just("'float32'"),
                Just("1")
            ],
            any::<bool>(),
            proptest::collection::vec(0u64..u64::MAX, 0..4),
        )
            .prop_map(|(descr, fortran, shape)| {
                let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
                format!(
                    "{{'descr': {descr}, 'fortran_order': {}, 'shape': ({}), }}",
                    if fortran { "True" } else { "False" },
                    dims.join(", ")
                )
            }),
        "[^\n]{0,120}",
    ];
    let file = (
        1u8..5,
        header,
        proptest::collection::vec(any::<u8>(), 0..256),
        any::<bool>(),
    )
        .prop_map(|(version, header, data, lie_about_length)| {
            let mut out = b"\x93NUMPY".to_vec();
            out.extend([version, 0]);
            let len = if lie_about_length {
                u32::MAX
            } else {
                header.len() as u32
            };
            if version == 1 {
                out.extend((len as u16).to_le_bytes());
            } else {
                out.extend(len.to_le_bytes());
            }
            out.extend(header.as_bytes());
            out.extend(data);
            out
        });
    // Well-formed files too, so the accepting paths run.
    let valid = (0usize..4, 1usize..8).prop_flat_map(|(rows, cols)| {
        proptest::collection::vec(any::<u8>(), rows * cols * 4).prop_map(move |data| {
            let header =
                format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
            let mut out = b"\x93NUMPY\x01\x00".to_vec();
            out.extend((header.len() as u16).to_le_bytes());
            out.extend(header.as_bytes());
            out.extend(data);
            out
        })
    });
    let file = prop_oneof![3 => file, 1 => valid];
    runner()
        .run(&file, |bytes| {
            std::fs::write(&path, &bytes).expect("write");
            // A shape that does not match the file's size is an error, so nothing is
            // allocated for a claimed 10¹⁸ rows.
            if let Ok(m) = read_f32_matrix(&path) {
                prop_assert!(m.data.len() * 4 <= bytes.len());
            }
            if let Ok(rows) = NpyRows::open(&path) {
                prop_assert!(rows.rows() * rows.cols() * 4 <= bytes.len());
                let mut row = vec![0f32; rows.cols()];
                for i in 0..rows.rows().min(4) {
                    prop_assert!(rows.row(i, &mut row));
                }
                prop_assert!(!rows.row(rows.rows(), &mut row));
            }
            Ok(())
        })
        .expect("npy reader");
}

#[test]
fn state_files_of_any_text_parse_or_are_refused() {
    use crate::registry::state_file::StateFile;
    let names = prop_oneof![
        Just("default".to_string()),
        Just("typo".to_string()),
        "[a-z]{1,6}",
        ".{0,10}",
        Just("".to_string())
    ];
    let entry = prop_oneof![
        ".{0,20}".prop_map(|p| format!("{{\"path\": {}}}", serde_json::Value::String(p))),
        Just("{\"path\": 3}".to_string()),
        Just("{\"path\": \"/a\", \"allow_incompatible\": \"yes\"}".to_string()),
        Just("[]".to_string()),
    ];
    let text = prop_oneof![
        (
            proptest::collection::btree_map(names.clone(), entry, 0..4),
            proptest::collection::btree_map(names.clone(), names.clone(), 0..4),
            proptest::collection::btree_map(names, Just("{\"repair\": \"on\"}"), 0..2),
        )
            .prop_map(|(encoders, aliases, pipelines)| {
                let obj = |m: Vec<(String, String)>| {
                    let body: Vec<String> = m
                        .into_iter()
                        .map(|(k, v)| format!("{}: {v}", serde_json::Value::String(k)))
                        .collect();
                    format!("{{{}}}", body.join(", "))
                };
                format!(
                    "{{\"encoders\": {}, \"aliases\": {}, \"pipelines\": {}}}",
                    obj(encoders.into_iter().collect()),
                    obj(aliases
                        .into_iter()
                        .map(|(k, v)| (k, serde_json::Value::String(v).to_string()))
                        .collect()),
                    obj(pipelines
                        .into_iter()
                        .map(|(k, v)| (k, v.to_string()))
                        .collect()),
                )
            }),
        ".{0,200}",
        (1usize..200_000).prop_map(|depth| "[".repeat(depth)),
    ];
    runner()
        .run(&text, |text| {
            let _ = StateFile::parse(&text, Path::new("/fuzz/state.json"));
            Ok(())
        })
        .expect("state file parser");
}

/// A real ONNX graph (a tiny BERT written by capot's own writer), to mutate.
fn tiny_onnx() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        use crate::model::{BertConfig, BertWeights};
        let config = BertConfig::tiny();
        let weights = BertWeights::random(&config, 3);
        crate::model::onnx_writer::write_bert_onnx(&config, &weights).expect("tiny ONNX")
    })
}

#[test]
fn onnx_reader_survives_random_and_mutated_graphs() {
    use crate::model::onnx_reader::{decode_model, inspect_signature};
    let real = tiny_onnx();
    let mutated = (
        proptest::collection::vec((0..real.len(), any::<u8>()), 1..16),
        0..=real.len(),
    )
        .prop_map(move |(flips, cut)| {
            let mut b = real.to_vec();
            for (at, v) in flips {
                b[at] = v;
            }
            b.truncate(cut.max(1));
            b
        });
    let input = prop_oneof![
        3 => mutated,
        1 => proptest::collection::vec(any::<u8>(), 0..512),
    ];
    runner()
        .run(&input, |bytes| {
            if let Ok(model) = decode_model(&bytes) {
                let _ = inspect_signature(&model);
            }
            Ok(())
        })
        .expect("ONNX reader");
}

#[test]
fn tokenizer_takes_any_text_and_stays_within_the_max_length() {
    use crate::encoder::tokenize::TextTokenizer;
    let path = crate::test_assets::minilm_hf_dir().join("tokenizer.json");
    let tok = TextTokenizer::from_file(&path, 64, None).expect("tokenizer");
    let text = prop_oneof![
        ".{0,200}",
        "[\\x00-\\x1f\\x7f\u{200b}\u{feff}\u{fffd}]{0,50}",
        (any::<char>(), 1usize..1_000_000).prop_map(|(c, n)| c.to_string().repeat(n)),
        "\\PC{0,300}",
    ];
    let mut runner = TestRunner::new_with_rng(
        Config {
            // A megabyte of text takes a moment to tokenize: fewer cases here.
            cases: CASES / 4,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    runner
        .run(&proptest::collection::vec(text, 1..4), |texts| {
            let batch = tok.encode_batch(&texts).expect("tokenize");
            prop_assert_eq!(batch.batch, texts.len());
            prop_assert!(batch.sequence <= 64);
            prop_assert_eq!(batch.input_ids.len(), batch.batch * batch.sequence);
            Ok(())
        })
        .expect("tokenizer");
}
