//! The shipped k6 scripts run against a live service with the real k6 binary (from the test
//! virtualenv), so they cannot rot.

mod common;

use common::*;

fn k6() -> std::path::PathBuf {
    let k6 = python().with_file_name("k6");
    assert!(
        k6.is_file(),
        "{} is missing: run `scripts/test` (tests/requirements.txt has k6)",
        k6.display()
    );
    k6
}

#[test]
fn smoke_and_slo_scripts_pass_against_the_default_service() {
    let server = Server::start(&[
        "--index",
        default_index().to_str().unwrap(),
        "--encoder",
        minilm_bundle().to_str().unwrap(),
        "--api-key",
        "k6-secret",
    ]);
    let scripts = root().join("deploy/k6");
    let run = |script: &str, env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(k6());
        cmd.args([
            "run",
            "--quiet",
            "--no-usage-report",
            "-e",
            &format!("BASE_URL={}", server.base),
            "-e",
            "API_KEY=k6-secret",
        ]);
        for (k, v) in env {
            cmd.args(["-e", &format!("{k}={v}")]);
        }
        cmd.arg(scripts.join(script));
        let o = cmd.output().expect("run k6");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
        )
    };
    let (code, out) = run("smoke.js", &[("DURATION", "3s")]);
    assert_eq!(code, Some(0), "{out}");
    // Generous SLO at a low rate: the script's thresholds pass on a healthy service...
    let (code, out) = run(
        "slo.js",
        &[
            ("DURATION", "4s"),
            ("RATE", "5"),
            ("P95_MS", "2000"),
            ("P99_MS", "4000"),
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    // ...and fail when the SLO cannot be met (k6 exits 99 when thresholds are crossed).
    let (code, out) = run(
        "slo.js",
        &[
            ("DURATION", "3s"),
            ("RATE", "5"),
            ("P95_MS", "0.001"),
            ("P99_MS", "0.001"),
        ],
    );
    assert_eq!(code, Some(99), "{out}");
    // A wrong API key makes the smoke test fail.
    let mut cmd = std::process::Command::new(k6());
    let o = cmd
        .args([
            "run",
            "--quiet",
            "--no-usage-report",
            "-e",
            &format!("BASE_URL={}", server.base),
            "-e",
            "API_KEY=wrong",
            "-e",
            "DURATION=2s",
        ])
        .arg(scripts.join("smoke.js"))
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
}
