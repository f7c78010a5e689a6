//! The Ray runner against a real Ray head (started by the `ray_head` fixture): commands that
//! succeed, fail and are cancelled, with their output streamed, their working directory,
//! environment and arguments as given; and addresses it must refuse.

mod common;
mod ray_head;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capot::jobs::ray::RayRunner;
use capot::jobs::{Exit, LineSink, RunHandle, Runner, RunnerError, Work};

fn sink() -> (LineSink, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    let sink: LineSink = Arc::new(move |s: &str| {
        l.lock().unwrap().push(s.to_string());
    });
    (sink, lines)
}

fn work(stage: &str, argv: &[&str], workdir: &std::path::Path) -> Work {
    Work {
        job_id: "jobs-ray-test".into(),
        stage: stage.into(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: vec![
            ("CAPOT_TEST_VALUE".into(), "it's \"quoted\" $HOME".into()),
            ("CAPOT_TEST_PLAIN".into(), "plain 'value'".into()),
            (
                "ORT_DYLIB_PATH".into(),
                common::assets()
                    .join("onnxruntime/lib/libonnxruntime.so")
                    .display()
                    .to_string(),
            ),
        ],
        workdir: workdir.to_path_buf(),
    }
}

fn runner(head: &ray_head::RayHead) -> RayRunner {
    let mut r = RayRunner::new(&head.address(), None).expect("runner");
    r.poll_interval = Duration::from_millis(200);
    r.stop_grace = Duration::from_secs(20);
    r
}

/// Whether a process whose command line contains `marker` is still running.
fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries.flatten().any(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .map(|b| String::from_utf8_lossy(&b).contains(marker))
                    .unwrap_or(false)
            })
        })
        .unwrap_or(false)
}

#[test]
fn commands_run_fail_and_stop_on_a_real_ray_head() {
    let t = Instant::now();
    let head = ray_head::RayHead::start();
    eprintln!("Ray head up in {:.1?}", t.elapsed());
    let runner = runner(&head);
    let workdir = tempfile::tempdir().expect("workdir");

    // (a) Output lines come through, in order; working directory, environment (values with
    // and without `$`) and awkward arguments arrive as given.
    let t = Instant::now();
    let (lines_sink, lines) = sink();
    let script = r#"echo one; pwd; echo "$CAPOT_TEST_VALUE"; echo "$CAPOT_TEST_PLAIN"; printf '<%s>\n' "$@"; echo err >&2; printf 'no newline'"#;
    let handle = runner
        .start(
            work(
                "shell",
                &["/bin/sh", "-c", script, "sh", "a b", "it's", "$(id)", ""],
                workdir.path(),
            ),
            lines_sink,
        )
        .expect("start");
    assert!(handle.reference().starts_with("capot-jobs-ray-test-shell-"));
    assert_eq!(handle.wait(), Exit::Succeeded);
    let got = lines.lock().unwrap().clone();
    let workdir_real = workdir.path().canonicalize().unwrap();
    let expected = [
        "one".to_string(),
        workdir_real.display().to_string(),
        "it's \"quoted\" $HOME".into(),
        "plain 'value'".into(),
        "<a b>".into(),
        "<it's>".into(),
        "<$(id)>".into(),
        "<>".into(),
        "err".into(),
    ];
    let ours: Vec<&String> = got
        .iter()
        // Ray's own first line ("Runtime env is setting up.").
        .filter(|l| !l.contains("job_manager.py"))
        .collect();
    let mut want: Vec<&String> = expected.iter().collect();
    let last = "no newline".to_string();
    want.push(&last);
    assert_eq!(ours, want, "all lines: {got:#?}");
    eprintln!("(a) shell command in {:.1?}", t.elapsed());

    // A real capot invocation, with the binary path given to the runner.
    let t = Instant::now();
    let capot = PathBuf::from(env!("CARGO_BIN_EXE_capot"));
    let mut with_binary = RayRunner::new(&head.address(), Some(capot)).expect("runner");
    with_binary.poll_interval = Duration::from_millis(200);
    let (lines_sink, lines) = sink();
    let handle = with_binary
        .start(
            work("version", &["capot", "--version"], workdir.path()),
            lines_sink,
        )
        .expect("start capot");
    assert_eq!(handle.wait(), Exit::Succeeded);
    let got = lines.lock().unwrap().clone();
    assert!(
        got.iter()
            .any(|l| l == &format!("capot {}", env!("CARGO_PKG_VERSION"))),
        "{got:#?}"
    );
    eprintln!("(a) capot --version in {:.1?}", t.elapsed());

    // (b) A failing command: failed, with its exit code.
    let t = Instant::now();
    let (lines_sink, lines) = sink();
    let handle = runner
        .start(
            work(
                "fail",
                &["/bin/sh", "-c", "echo about to fail; exit 3"],
                workdir.path(),
            ),
            lines_sink,
        )
        .expect("start");
    match handle.wait() {
        Exit::Failed(reason) => assert!(reason.contains("exit code 3"), "{reason}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(lines.lock().unwrap().iter().any(|l| l == "about to fail"));
    // A missing working directory fails the same way, saying why.
    let (lines_sink, lines) = sink();
    let handle = runner
        .start(
            work("nodir", &["/bin/true"], &workdir.path().join("missing")),
            lines_sink,
        )
        .expect("start");
    assert!(matches!(handle.wait(), Exit::Failed(_)));
    assert!(
        lines.lock().unwrap().iter().any(|l| l.contains("can't cd")),
        "{:#?}",
        lines.lock().unwrap()
    );
    eprintln!("(b) failures in {:.1?}", t.elapsed());

    // (c) A long command, cancelled: it gets SIGTERM and the grace period to finish (longer
    // than Ray's own 3 s), then `wait` says cancelled and nothing of it is left.
    let t = Instant::now();
    let marker = format!("capot-ray-cancel-{}", std::process::id());
    let (lines_sink, lines) = sink();
    let script = "trap 'echo got SIGTERM; sleep 4; echo checkpointed; exit 130' TERM; \
                  echo started; while :; do sleep 0.2; done";
    let handle: Arc<dyn RunHandle> = Arc::from(
        runner
            .start(
                work(
                    "cancel",
                    &["/bin/sh", "-c", script, &marker],
                    workdir.path(),
                ),
                lines_sink,
            )
            .expect("start"),
    );
    let waiter = {
        let h = handle.clone();
        std::thread::spawn(move || h.wait())
    };
    let started = Instant::now();
    while !lines.lock().unwrap().iter().any(|l| l == "started") {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the command did not start: {:#?}",
            lines.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(running(&marker));
    let cancel_at = Instant::now();
    handle.cancel();
    assert!(
        cancel_at.elapsed() < Duration::from_millis(500),
        "cancel blocks"
    );
    assert_eq!(waiter.join().expect("wait thread"), Exit::Cancelled);
    let stop_took = cancel_at.elapsed();
    assert!(
        stop_took < Duration::from_secs(20),
        "stopping took {stop_took:?}"
    );
    let got = lines.lock().unwrap().clone();
    assert!(
        got.iter().any(|l| l == "got SIGTERM") && got.iter().any(|l| l == "checkpointed"),
        "SIGTERM then the grace period: {got:#?}"
    );
    let gone = Instant::now();
    while running(&marker) {
        assert!(
            gone.elapsed() < Duration::from_secs(10),
            "the cancelled command still runs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Stopping what is already stopped (or unknown) is harmless.
    runner.stop_orphan(&handle.reference());
    runner.stop_orphan("capot-no-such-job");
    eprintln!(
        "(c) cancelled after {stop_took:.1?} (command took 4 s to checkpoint), total {:.1?}",
        t.elapsed()
    );

    let t = Instant::now();
    drop(head);
    eprintln!("Ray head stopped in {:.1?}", t.elapsed());
}

#[test]
fn bad_and_unreachable_addresses_are_refused() {
    for bad in [
        "127.0.0.1:8265",
        "https://127.0.0.1:8265",
        "ray://127.0.0.1:10001",
        "",
    ] {
        assert!(
            matches!(RayRunner::new(bad, None), Err(RunnerError::Start { .. })),
            "{bad:?} accepted"
        );
    }
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let runner = RayRunner::new(&address, None).expect("runner");
    let workdir = tempfile::tempdir().expect("workdir");
    let (lines_sink, _) = sink();
    let t = Instant::now();
    match runner.start(work("align", &["/bin/true"], workdir.path()), lines_sink) {
        Err(RunnerError::Start { stage, message }) => {
            assert_eq!(stage, "align");
            assert!(message.contains(&address), "{message}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(h) => panic!("started {} on a closed port", h.reference()),
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
}
