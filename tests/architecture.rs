//! The layout docs/architecture.md promises, checked on the source so it cannot drift: the query
//! pipeline knows no transport, and no file in `src/server/` grows past 600 lines.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("read source directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn src(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(sub)
}

#[test]
fn the_query_pipeline_imports_no_transport() {
    let files = rust_files(&src("query"));
    assert!(files.len() >= 4, "src/query/ holds the pipeline: {files:?}");
    for file in files {
        let text = fs::read_to_string(&file).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for transport in ["axum", "tonic", "crate::server"] {
                assert!(
                    !code.contains(transport),
                    "{}:{}: the query pipeline must not use {transport}: {line}",
                    file.display(),
                    n + 1
                );
            }
        }
    }
}

#[test]
fn no_server_file_is_over_600_lines() {
    for file in rust_files(&src("server")) {
        let lines = fs::read_to_string(&file)
            .expect("read source")
            .lines()
            .count();
        assert!(lines <= 600, "{} has {lines} lines", file.display());
    }
}

/// Which files of `dir` (`mod.rs` aside) name which others: `super::x::`, or `x::` through the
/// parent's glob import. Comments do not count.
fn file_imports(dir: &Path) -> std::collections::BTreeSet<(String, String)> {
    let stems: Vec<String> = rust_files(dir)
        .iter()
        .filter(|p| p.parent() == Some(dir) && p.file_name().is_some_and(|n| n != "mod.rs"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    let mut edges = std::collections::BTreeSet::new();
    for from in &stems {
        let text = fs::read_to_string(dir.join(format!("{from}.rs"))).expect("read source");
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for to in stems.iter().filter(|s| *s != from) {
                let named = code.match_indices(&format!("{to}::")).any(|(at, _)| {
                    let before = &code[..at];
                    before.ends_with("super::")
                        || !before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
                });
                if named {
                    edges.insert((from.clone(), to.clone()));
                }
            }
        }
    }
    edges
}

fn edges(list: &[(&str, &str)]) -> std::collections::BTreeSet<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The imports docs/architecture.md draws for `query/` and `server/admin/`, exactly: a new one
/// is a change of the design, made in the doc and here together.
#[test]
fn files_import_each_other_only_as_the_architecture_doc_draws() {
    let query = edges(&[
        ("compaction", "state"),
        ("documents", "compaction"),
        ("documents", "error"),
        ("documents", "stages"),
        ("documents", "state"),
        ("stages", "error"),
        ("stages", "filter"),
        ("stages", "state"),
        ("state", "compaction"),
        ("state", "metrics"),
    ]);
    assert_eq!(file_imports(&src("query")), query, "src/query/");
    let admin = edges(&[
        ("documents", "events"),
        ("handlers", "documents"),
        ("handlers", "jobs"),
        ("handlers", "registry_ops"),
        ("jobs", "events"),
        ("openapi", "documents"),
        ("openapi", "handlers"),
        ("openapi", "registry_ops"),
    ]);
    let found = file_imports(&src("server/admin"));
    assert_eq!(found, admin, "src/server/admin/");
    // No two admin files import each other.
    for (a, b) in &found {
        assert!(!found.contains(&(b.clone(), a.clone())), "{a} <-> {b}");
    }
}
