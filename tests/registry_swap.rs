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
use registry_common::{metric, percentile, queries, second_bundle, Admin, Conn};

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

    // Phase 2: flips of `default` and reloads of a third encoder, under the same load.
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let handles = load(server.addr, epoch, stop.clone());
    let reloads_done = Arc::new(AtomicBool::new(false));
    let reload_times: Arc<Mutex<Vec<f64>>> = Arc::default();
    let reloader = {
        let admin = admin.clone();
        let done = reloads_done.clone();
        let times = reload_times.clone();
        let path = a.to_path_buf();
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
    };
    // (send, receive, target) of every switch; the target before the first is `minilm`.
    let mut switches: Vec<(Duration, Duration, String)> = Vec::new();
    let mut switch_ms = Vec::new();
    let mut current = "minilm".to_string();
    for i in 0..FLIPS {
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
    let cycles = reloader.join().expect("reloader");
    stop.store(true, Ordering::Relaxed);
    let swapping: Vec<Sample> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();

    // Which encoder may have served a request sent at `s` and answered at `r`: target j is
    // possibly current from the start of its switch until the next switch has returned.
    let possible = |name: &str, s: Duration, r: Duration| -> bool {
        let mut start = Duration::ZERO;
        let mut target = "minilm";
        for (sent, received, next) in &switches {
            // `target` is possibly current from the start of its own switch until this one returned.
            if target == name && s <= *received && r >= start {
                return true;
            }
            start = *sent;
            target = next;
        }
        target == name && r >= start
    };
    let mut failures = Vec::new();
    for (phase, samples) in [("calm", &calm), ("swapping", &swapping)] {
        for s in samples.iter() {
            match &s.outcome {
                Err(e) => failures.push(format!("{phase}: {e}")),
                Ok(name) if phase == "calm" && name != "minilm" => {
                    failures.push(format!("calm: served by {name}"))
                }
                Ok(name) if phase == "swapping" && !possible(name, s.sent, s.received) => failures
                    .push(format!(
                        "served by {name} in [{:?}, {:?}], when it was not the target",
                        s.sent, s.received
                    )),
                Ok(_) => {}
            }
        }
    }
    let served_b = swapping
        .iter()
        .filter(|s| s.outcome.as_deref() == Ok("minilm-b"))
        .count();
    assert!(
        failures.is_empty(),
        "{} of {} requests failed or were misrouted, e.g. {:?}",
        failures.len(),
        calm.len() + swapping.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(
        calm.len() > 50 && swapping.len() > 100,
        "too few requests: {} and {}",
        calm.len(),
        swapping.len()
    );
    assert!(
        served_b > 0 && served_b < swapping.len(),
        "both encoders should have served"
    );
    assert!(cycles >= 3);

    let metrics = common::http_get(server.addr, "/metrics").unwrap().1;
    let ok = metric(&metrics, "capot_encoder_swaps_total{result=\"ok\"}").unwrap_or(0.0);
    assert!(ok >= (1 + FLIPS + 3 * cycles) as f64, "swaps ok = {ok}");
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

    let calm_ms = latencies_ms(&calm);
    let swap_lat = latencies_ms(&swapping);
    let mut reload = reload_times.lock().unwrap().clone();
    reload.sort_by(f64::total_cmp);
    switch_ms.sort_by(f64::total_cmp);
    let switch_rt: Vec<f64> = {
        let mut v: Vec<f64> = switches
            .iter()
            .map(|(s, r, _)| (*r - *s).as_secs_f64() * 1e3)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    println!("hot swap, {CLIENTS} client threads, k={K}, {FLIPS} flips of `default`, {cycles} load/replace/unload cycles of a third encoder");
    println!("  load + warm-up of MiniLM via POST /admin/encoders: {load_ms:.0} ms round trip (server: {:.0} ms); under load: median {:.0} ms, max {:.0} ms", server_load_s * 1e3, percentile(&reload, 50.0), percentile(&reload, 100.0));
    println!("  alias switch: server {:.2} ms median, {:.2} ms max; PUT round trip (curl) {:.1} ms median, {:.1} ms max", percentile(&switch_ms, 50.0), percentile(&switch_ms, 100.0), percentile(&switch_rt, 50.0), percentile(&switch_rt, 100.0));
    println!(
        "  /search without swaps: {} requests, p50 {:.1} ms, p99 {:.1} ms",
        calm_ms.len(),
        percentile(&calm_ms, 50.0),
        percentile(&calm_ms, 99.0)
    );
    println!("  /search during swaps:  {} requests, p50 {:.1} ms, p99 {:.1} ms (served by minilm-b: {served_b})", swap_lat.len(), percentile(&swap_lat, 50.0), percentile(&swap_lat, 99.0));
    println!("  failed or misrouted: 0");
    server.terminate();
}
