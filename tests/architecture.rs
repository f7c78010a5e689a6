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
