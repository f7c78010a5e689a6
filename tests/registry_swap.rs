//! Hot swap under load: while client threads search over keep-alive connections, the alias
//! `default` flips between two encoders dozens of times and a third encoder is loaded, replaced
//! and unloaded repeatedly. No request may fail, and every response must name an encoder that
//! was the alias's target at some moment between its send and its receipt.
//!
//! Prints (does not assert) the swap latencies and the p99 of `/search` with and without swaps;
//! docs/operations.md records them.

mod common;
mod registry_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Server;
use registry_common::{metric, percentile, queries, second_bundle, second_bundle_dir, Admin, Conn};

const CLIENTS: usize = 4;
const FLIPS: usize = 60;
const K: usize = 5;

/// One client request: offsets from the test's epoch, and what came back.
struct Sample {
    sent: Duration,
    received: Duration,
    outcome: Result<String, String>,
}

/// Runs `CLIENTS` search loops until `stop`; returns every sample.
fn load(
    addr: std::net::SocketAddr,
    epoch: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Vec<Sample>>> {
    let qs = Arc::new(queries());
    (0..CLIENTS)
        .map(|c| {
            let stop = stop.clone();
            let qs = qs.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::new(addr);
                let mut out = Vec::new();
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    let q = &qs[i % qs.len()];
                    i += CLIENTS;
                    let body = serde_json::json!({ "query": q, "k": K }).to_string();
                    let sent = epoch.elapsed();
                    let r = conn.request("POST", "/search", &[], &body);
                    let received = epoch.elapsed();
                    let outcome = match r {
                        Err(e) => Err(format!("transport: {e}")),
                        Ok((200, text)) => match serde_json::from_str::<serde_json::Value>(&text) {
                            Ok(v) => {
                                let n = v["results"].as_array().map_or(0, Vec::len);
                                match v["encoder"]["name"].as_str() {
                                    Some(name) if n == K => Ok(name.to_string()),
                                    _ => Err(format!("malformed: {text}")),
                                }
                            }
                            Err(e) => Err(format!("not JSON ({e}): {text}")),
                        },
                        Ok((code, text)) => Err(format!("HTTP {code}: {text}")),
                    };
                    out.push(Sample {
                        sent,
                        received,
                        outcome,
                    });
                }
                out
            })
        })
        .collect()
}

fn latencies_ms(samples: &[Sample]) -> Vec<f64> {
    let mut v: Vec<f64> = samples
        .iter()
        .map(|s| (s.received - s.sent).as_secs_f64() * 1e3)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// What one swapping phase saw.
struct Phase {
    samples: Vec<Sample>,
    /// (send, receive, target) of every switch of `default`.
    switches: Vec<(Duration, Duration, String)>,
    /// Server-side switch times (ms).
    switch_ms: Vec<f64>,
    /// Round trips of the third encoder's loads (ms).
    reload_ms: Vec<f64>,
    cycles: usize,
}

/// Flips `default` between `minilm-b` and `minilm` `flips` times (ending on `minilm`) under
/// load; with `reload`, a third encoder is loaded, replaced and unloaded meanwhile.
fn swap_phase(
    addr: std::net::SocketAddr,
    admin: &Admin,
    bundle: &std::path::Path,
    flips: usize,
    reload: bool,
) -> Phase {
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let handles = load(addr, epoch, stop.clone());
    let reloads_done = Arc::new(AtomicBool::new(false));
    let reload_times: Arc<Mutex<Vec<f64>>> = Arc::default();
    let reloader = reload.then(|| {
        let admin = admin.clone();
        let done = reloads_done.clone();
        let times = reload_times.clone();
        let path = bundle.to_path_buf();
        std::thread::spawn(move || {
            let body = serde_json::json!({ "name": "extra", "path": path }).to_string();
            let mut cycles = 0;
            while !done.load(Ordering::Relaxed) || cycles < 3 {
                let t = Instant::now();
                let (code, v) = admin.call("POST", "/admin/encoders", Some(&body));
                assert_eq!(code, 201, "load extra: {v}");
                times.lock().unwrap().push(t.elapsed().as_secs_f64() * 1e3);
                let (code, v) = admin.call("POST", "/admin/encoders", Some(&body));
                assert_eq!(code, 200, "replace extra: {v}");
                assert_eq!(v["encoder"]["revision"], 2, "{v}");
                let (code, v) = admin.call("DELETE", "/admin/encoders/extra", None);
                assert_eq!(code, 200, "unload extra: {v}");
                cycles += 1;
            }
            cycles
        })
    });
    let mut switches = Vec::new();
    let mut switch_ms = Vec::new();
    let mut current = "minilm".to_string();
    for i in 0..flips {
        let target = if i % 2 == 0 { "minilm-b" } else { "minilm" };
        let body = serde_json::json!({ "encoder": target }).to_string();
        let sent = epoch.elapsed();
        let (code, v) = admin.call("PUT", "/admin/aliases/default", Some(&body));
        let received = epoch.elapsed();
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["previous"], current.as_str(), "{v}");
        switch_ms.push(v["switch_ms"].as_f64().unwrap());
        switches.push((sent, received, target.to_string()));
        current = target.to_string();
        std::thread::sleep(Duration::from_millis(120));
    }
    reloads_done.store(true, Ordering::Relaxed);
    let cycles = reloader.map_or(0, |r| r.join().expect("reloader"));
    stop.store(true, Ordering::Relaxed);
    let samples = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let mut reload_ms = reload_times.lock().unwrap().clone();
    reload_ms.sort_by(f64::total_cmp);
    switch_ms.sort_by(f64::total_cmp);
    Phase {
        samples,
        switches,
        switch_ms,
        reload_ms,
        cycles,
    }
}

/// Whether `name` was a target of `default` at some moment in [s, r]: the target set by a
/// switch is possibly current from the start of that switch until the next one returned.
fn possible(
    switches: &[(Duration, Duration, String)],
    name: &str,
    s: Duration,
    r: Duration,
) -> bool {
    let mut start = Duration::ZERO;
    let mut target = "minilm";
    for (sent, received, next) in switches {
        if target == name && s <= *received && r >= start {
            return true;
        }
        start = *sent;
        target = next;
    }
    target == name && r >= start
}

/// Every failed, malformed or misrouted response of a phase.
fn failures(
    phase: &str,
    samples: &[Sample],
    switches: &[(Duration, Duration, String)],
) -> Vec<String> {
    samples
        .iter()
        .filter_map(|s| match &s.outcome {
            Err(e) => Some(format!("{phase}: {e}")),
            Ok(name) if !possible(switches, name, s.sent, s.received) => Some(format!(
                "{phase}: served by {name} in [{:?}, {:?}], when it was not the target",
                s.sent, s.received
            )),
            Ok(_) => None,
        })
        .collect()
}

#[test]
fn alias_flips_and_reloads_under_load_fail_no_request() {
    let index = common::default_index();
    let a = common::minilm_bundle();
    let b = second_bundle();
    let data = tempfile::tempdir().unwrap();
    let mut server = Server::start(&[
        "--index",
        index.to_str().unwrap(),
        "--encoder",
        a.to_str().unwrap(),
        "--data-dir",
        data.path().to_str().unwrap(),
        "--admin-addr",
        "127.0.0.1:0",
        "--models-dir",
        &second_bundle_dir(),
    ]);
    let admin = Admin::of(&server, data.path());

    // Load + warm-up of MiniLM through the admin API, as the client sees it and as the server
    // measured it.
    let started = Instant::now();
    let body = serde_json::json!({ "name": "minilm-b", "path": b }).to_string();
    let (code, v) = admin.call("POST", "/admin/encoders", Some(&body));
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(code, 201, "{v}");
    let server_load_s = v["encoder"]["load_seconds"].as_f64().unwrap();

    // Phase 1: the same load, no swaps.
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let handles = load(server.addr, epoch, stop.clone());
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::Relaxed);
    let calm: Vec<Sample> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();

    // Phase 2: flips only. Phase 3: flips while a third encoder is loaded, replaced and
    // unloaded over and over.
    let flips_only = swap_phase(server.addr, &admin, a, FLIPS / 2, false);
    let swapping = swap_phase(server.addr, &admin, a, FLIPS, true);

    let mut bad = failures("calm", &calm, &[]);
    bad.extend(failures("flips", &flips_only.samples, &flips_only.switches));
    bad.extend(failures(
        "flips+reloads",
        &swapping.samples,
        &swapping.switches,
    ));
    let total = calm.len() + flips_only.samples.len() + swapping.samples.len();
    assert!(
        bad.is_empty(),
        "{} of {total} requests failed or were misrouted, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
    for (name, n) in [
        ("calm", calm.len()),
        ("flips", flips_only.samples.len()),
        ("flips+reloads", swapping.samples.len()),
    ] {
        assert!(n > 50, "too few requests in {name}: {n}");
    }
    let served_b = swapping
        .samples
        .iter()
        .filter(|s| s.outcome.as_deref() == Ok("minilm-b"))
        .count();
    assert!(
        served_b > 0 && served_b < swapping.samples.len(),
        "both encoders should have served"
    );
    assert!(swapping.cycles >= 3);

    let metrics = common::http_get(server.addr, "/metrics").unwrap().1;
    let ok = metric(&metrics, "capot_encoder_swaps_total{result=\"ok\"}").unwrap_or(0.0);
    assert!(
        ok >= (1 + FLIPS / 2 + FLIPS + 3 * swapping.cycles) as f64,
        "swaps ok = {ok}"
    );
    assert_eq!(
        metric(&metrics, "capot_encoder_swaps_total{result=\"failed\"}"),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &metrics,
            "capot_alias_target{alias=\"default\",encoder=\"minilm\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &metrics,
            "capot_alias_target{alias=\"default\",encoder=\"minilm-b\"}"
        ),
        Some(0.0)
    );

    let rt = |p: &Phase| -> Vec<f64> {
        let mut v: Vec<f64> = p
            .switches
            .iter()
            .map(|(s, r, _)| (*r - *s).as_secs_f64() * 1e3)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (fo_rt, sw_rt) = (rt(&flips_only), rt(&swapping));
    let report = |name: &str, samples: &[Sample]| {
        let l = latencies_ms(samples);
        println!(
            "  /search {name}: {} requests, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            l.len(),
            percentile(&l, 50.0),
            percentile(&l, 99.0),
            percentile(&l, 100.0)
        );
    };
    println!("hot swap, {CLIENTS} client threads, k={K}; {} flips of `default` alone, then {FLIPS} flips with {} load/replace/unload cycles of a third encoder", FLIPS / 2, swapping.cycles);
    println!("  load + warm-up of MiniLM (POST /admin/encoders): {load_ms:.0} ms round trip, {:.0} ms in the server; under load: median {:.0} ms, max {:.0} ms", server_load_s * 1e3, percentile(&swapping.reload_ms, 50.0), percentile(&swapping.reload_ms, 100.0));
    println!("  alias switch in the server (state file write + publish): median {:.2} ms, max {:.2} ms (flips alone); median {:.2} ms, max {:.2} ms (with reloads)", percentile(&flips_only.switch_ms, 50.0), percentile(&flips_only.switch_ms, 100.0), percentile(&swapping.switch_ms, 50.0), percentile(&swapping.switch_ms, 100.0));
    println!("  alias switch round trip (curl): median {:.1} ms, max {:.1} ms (flips alone); median {:.1} ms, max {:.1} ms (with reloads)", percentile(&fo_rt, 50.0), percentile(&fo_rt, 100.0), percentile(&sw_rt, 50.0), percentile(&sw_rt, 100.0));
    report("without swaps", &calm);
    report("during flips", &flips_only.samples);
    report("during flips + reloads", &swapping.samples);
    println!("  failed or misrouted: 0 of {total}");
    server.terminate();
}
