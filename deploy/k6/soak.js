// Soak: hours of mixed traffic while the registry changes underneath, with nothing failing.
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e GRPC_ADDR=127.0.0.1:50051 \
//          -e ADMIN_URL=http://127.0.0.1:8081 -e ADMIN_TOKEN=... \
//          -e ENCODERS=minilm,minilm-b -e EXTRA_BUNDLE=/models/encoders/minilm-b \
//          -e RATE=200 -e DURATION=30m -e PROTO_DIR=proto deploy/k6/soak.js
//
// Scenarios (each optional piece is skipped when its variable is unset):
//   traffic  RATE requests/s (constant arrival): /search single (45%), /search batch of 2-8
//            queries (20%), /v1/embeddings (20%), gRPC Search (10%) and a 3-message SearchStream
//            (5%) when GRPC_ADDR is set. Every one must succeed; only 429 may be answered, and
//            only with ALLOW_429=1 (deliberate overload).
//   flip     every FLIP_EVERY (10s): the alias ALIAS (default) moves to the next of ENCODERS.
//   reload   every RELOAD_EVERY (60s): EXTRA_BUNDLE is loaded as `soak-extra`, searched once and
//            unloaded.
//   job      once at the start: JOB_BODY (a JSON alignment job spec) is submitted.
//   write    every WRITE_EVERY (2s) when DOC_ENCODER is set (the index's document encoder): a new
//            document is written, and the next search for its text (on DOC_ENCODER, repair off)
//            must find it first; every third write also deletes the one written two before, which
//            the next search must not find.
//   compact  every COMPACT_EVERY (60s) when DOC_ENCODER is set: POST /admin/index/compact (202,
//            or 409 while one runs); searches and writes go on through it.
// The summary (stdout, and SUMMARY_FILE when set) holds the p99 of the first and of the last
// WINDOW (5m) of traffic and their ratio; the thresholds fail the run on any failed request or
// check (k6 exits 99).
import http from 'k6/http';
import grpc from 'k6/net/grpc';
import { check } from 'k6';
import exec from 'k6/execution';
import { Trend, Counter } from 'k6/metrics';
import { headers, query } from './lib.js';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const ADMIN = __ENV.ADMIN_URL || 'http://127.0.0.1:8081';
const ALIAS = __ENV.ALIAS || 'default';
const ENCODERS = (__ENV.ENCODERS || 'minilm,minilm-b').split(',');
const DURATION = __ENV.DURATION || '30m';
const GRPC_ADDR = __ENV.GRPC_ADDR || '';

/** Seconds in a k6 duration such as "30m", "45s", "1h30m". */
function seconds(d) {
  let total = 0;
  for (const [, n, unit] of d.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) {
    total += Number(n) * { h: 3600, m: 60, s: 1, ms: 0.001 }[unit];
  }
  return total;
}
const TOTAL_S = seconds(DURATION);
const WINDOW_S = seconds(__ENV.WINDOW || '5m');

const latencyFirst = new Trend('latency_first_window', true);
const latencyLast = new Trend('latency_last_window', true);
const refused = new Counter('refused_429');

const grpcClient = new grpc.Client();
let grpcConnected = false; // per VU: each VU runs its own copy of this module
if (GRPC_ADDR) {
  grpcClient.load([__ENV.PROTO_DIR || '../../proto'], 'capot/v1/retrieval.proto');
}

const scenarios = {
  traffic: {
    executor: 'constant-arrival-rate', exec: 'traffic',
    rate: Number(__ENV.RATE || 50), timeUnit: '1s', duration: DURATION,
    preAllocatedVUs: Number(__ENV.VUS || 32), maxVUs: Number(__ENV.MAX_VUS || 200),
  },
  flip: {
    executor: 'constant-arrival-rate', exec: 'flip',
    rate: 1, timeUnit: __ENV.FLIP_EVERY || '10s', duration: DURATION,
    preAllocatedVUs: 1, maxVUs: 2,
  },
};
if (__ENV.EXTRA_BUNDLE) {
  scenarios.reload = {
    executor: 'constant-arrival-rate', exec: 'reload',
    rate: 1, timeUnit: __ENV.RELOAD_EVERY || '60s', duration: DURATION,
    preAllocatedVUs: 1, maxVUs: 1,
  };
}
if (__ENV.DOC_ENCODER) {
  // A write that is slow (behind a compaction's switch, or on a busy machine) gets another VU
  // rather than a dropped iteration: ids carry the VU, and each VU deletes its own writes.
  scenarios.write = {
    executor: 'constant-arrival-rate', exec: 'write',
    rate: 1, timeUnit: __ENV.WRITE_EVERY || '2s', duration: DURATION,
    preAllocatedVUs: 1, maxVUs: 4,
  };
  scenarios.compact = {
    executor: 'constant-arrival-rate', exec: 'compact',
    rate: 1, timeUnit: __ENV.COMPACT_EVERY || '60s', duration: DURATION,
    preAllocatedVUs: 1, maxVUs: 1,
  };
}
if (__ENV.JOB_BODY) {
  scenarios.job = { executor: 'shared-iterations', exec: 'job', iterations: 1, vus: 1 };
}

export const options = {
  scenarios,
  summaryTrendStats: ['avg', 'p(50)', 'p(95)', 'p(99)', 'max', 'count'],
  thresholds: {
    'checks': ['rate==1.0'],
    'http_req_failed{scenario:traffic}': [__ENV.ALLOW_429 === '1' ? 'rate<1' : 'rate==0'],
    'dropped_iterations': [`count<${__ENV.MAX_DROPPED || 1}`],
  },
};

function adminParams() {
  return {
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${__ENV.ADMIN_TOKEN || ''}` },
    tags: { name: 'admin' },
  };
}

function record(ms) {
  const t = (Date.now() - exec.scenario.startTime) / 1000;
  if (t < WINDOW_S) latencyFirst.add(ms);
  if (t > TOTAL_S - WINDOW_S) latencyLast.add(ms);
}

function httpOk(res, name) {
  if (res.status === 429 && __ENV.ALLOW_429 === '1') {
    refused.add(1);
    return;
  }
  record(res.timings.duration);
  check(res, { [`${name} is 200`]: (r) => r.status === 200 });
}

export function traffic() {
  const roll = Math.random();
  const h = { headers: headers() };
  if (roll < 0.45 || (!GRPC_ADDR && roll >= 0.85)) {
    httpOk(http.post(`${BASE}/search`, JSON.stringify({ query: query(), k: 10 }), { ...h, tags: { name: 'search' } }), 'search');
  } else if (roll < 0.65) {
    const queries = Array.from({ length: 2 + Math.floor(Math.random() * 7) }, query);
    httpOk(http.post(`${BASE}/search`, JSON.stringify({ queries, k: 5 }), { ...h, tags: { name: 'search_batch' } }), 'batch search');
  } else if (roll < 0.85) {
    httpOk(http.post(`${BASE}/v1/embeddings`, JSON.stringify({ input: [query(), query()] }), { ...h, tags: { name: 'embeddings' } }), 'embeddings');
  } else {
    if (!grpcConnected) {
      grpcClient.connect(GRPC_ADDR, { plaintext: true, timeout: '10s' });
      grpcConnected = true;
    }
    const started = Date.now();
    if (roll < 0.95) {
      const res = grpcClient.invoke('capot.v1.Retrieval/Search', { queries: [query()], k: 10 }, { timeout: '30s' });
      record(Date.now() - started);
      check(res, { 'grpc Search is OK': (r) => r && r.status === grpc.StatusOK });
    } else {
      const stream = new grpc.Stream(grpcClient, 'capot.v1.Retrieval/SearchStream', { timeout: '30s' });
      let answers = 0;
      let failed = null;
      stream.on('data', () => { answers += 1; });
      stream.on('error', (e) => { failed = e; });
      stream.on('end', () => {
        record(Date.now() - started);
        check(null, { 'grpc SearchStream answered every message': () => failed === null && answers === 3 });
      });
      for (let i = 0; i < 3; i++) stream.write({ queries: [query()], k: 5 });
      stream.end();
    }
  }
}

let flips = 0;
export function flip() {
  flips += 1;
  const target = ENCODERS[flips % ENCODERS.length];
  const res = http.put(`${ADMIN}/admin/aliases/${ALIAS}`, JSON.stringify({ encoder: target }), adminParams());
  check(res, { 'alias flip is 200': (r) => r.status === 200 });
}

export function reload() {
  const p = adminParams();
  const load = http.post(`${ADMIN}/admin/encoders`, JSON.stringify({ name: 'soak-extra', path: __ENV.EXTRA_BUNDLE }), p);
  check(load, { 'encoder load is 2xx': (r) => r.status === 200 || r.status === 201 });
  const res = http.post(`${BASE}/search`, JSON.stringify({ query: query(), k: 3, encoder: 'soak-extra' }), { headers: headers() });
  check(res, { 'search on the loaded encoder is 200': (r) => r.status === 200 });
  const unload = http.del(`${ADMIN}/admin/encoders/soak-extra`, null, p);
  check(unload, { 'encoder unload is 200': (r) => r.status === 200 });
}

/** The ids of the first hits of `text` on the document encoder, repair off. */
function hitsOf(text) {
  const body = JSON.stringify({ query: text, k: 5, encoder: __ENV.DOC_ENCODER, repair: 'off' });
  const res = http.post(`${BASE}/search`, body, { headers: headers(), tags: { name: 'write-search' } });
  check(res, { 'search after a write is 200': (r) => r.status === 200 });
  return res.status === 200 ? res.json('results').map((h) => h.id) : [];
}

let writes = 0; // this VU's writes (each VU runs its own copy of this module)
export function write() {
  writes += 1;
  const id = `soak-${exec.vu.idInTest}-${writes}`;
  const text = `soak note ${writes}: the ${id} heron counts ${writes * 7919 % 104729} pebbles`;
  const p = adminParams();
  const res = http.post(`${ADMIN}/admin/documents`, JSON.stringify({ documents: [{ id, text }] }), p);
  check(res, { 'write is 200': (r) => r.status === 200 });
  check(hitsOf(text), { 'a write is found at once': (ids) => ids[0] === id });
  if (writes % 3 === 0) {
    const gone = `soak-${exec.vu.idInTest}-${writes - 2}`;
    const del = http.del(`${ADMIN}/admin/documents/${gone}`, null, p);
    check(del, { 'delete is 200': (r) => r.status === 200 });
    const goneText = `soak note ${writes - 2}: the ${gone} heron counts ${(writes - 2) * 7919 % 104729} pebbles`;
    check(hitsOf(goneText), { 'a deleted document is gone at once': (ids) => !ids.includes(gone) });
  }
}

export function compact() {
  const res = http.post(`${ADMIN}/admin/index/compact`, null, adminParams());
  check(res, { 'compaction accepted': (r) => r.status === 202 || r.status === 409 });
}

export function job() {
  const res = http.post(`${ADMIN}/admin/jobs`, __ENV.JOB_BODY, adminParams());
  check(res, { 'job accepted': (r) => r.status === 202 });
}

export function handleSummary(data) {
  const p99 = (name) => (data.metrics[name] ? data.metrics[name].values['p(99)'] : null);
  const count = (name) => (data.metrics[name] ? data.metrics[name].values.count : 0);
  const first = p99('latency_first_window');
  const last = p99('latency_last_window');
  const out = {
    duration_s: TOTAL_S,
    window_s: WINDOW_S,
    requests: count('http_reqs'),
    grpc_requests: count('grpc_req_duration'),
    failed_http: data.metrics.http_req_failed ? data.metrics.http_req_failed.values.passes : 0,
    refused_429: count('refused_429'),
    checks_failed: data.metrics.checks ? data.metrics.checks.values.fails : 0,
    dropped_iterations: count('dropped_iterations'),
    p99_ms_first_window: first,
    p99_ms_last_window: last,
    p99_ratio_last_to_first: first && last ? last / first : null,
    p50_ms: data.metrics.http_req_duration ? data.metrics.http_req_duration.values['p(50)'] : null,
  };
  // Passes per check (how many flips, reloads, jobs and stream calls there were).
  out.checks = {};
  const walk = (group) => {
    for (const c of group.checks || []) out.checks[c.name] = (out.checks[c.name] || 0) + c.passes;
    for (const g of group.groups || []) walk(g);
  };
  walk(data.root_group);
  const text = JSON.stringify(out, null, 2);
  const files = { stdout: `${text}\n` };
  if (__ENV.SUMMARY_FILE) files[__ENV.SUMMARY_FILE] = text;
  return files;
}
