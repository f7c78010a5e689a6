// Smoke test: a few virtual users for a short while; every check must pass.
//   k6 run -e BASE_URL=http://127.0.0.1:8080 [-e API_KEY=...] deploy/k6/smoke.js
import http from 'k6/http';
import { check } from 'k6';
import { headers, query } from './lib.js';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:8080';

export const options = {
  vus: Number(__ENV.VUS || 2),
  duration: __ENV.DURATION || '10s',
  thresholds: {
    checks: ['rate==1.0'],
    http_req_failed: ['rate==0'],
  },
};

export function setup() {
  const ready = http.get(`${BASE}/ready`);
  check(ready, { 'ready is 200': (r) => r.status === 200 });
}

export default function () {
  const res = http.post(`${BASE}/search`, JSON.stringify({ query: query(), k: 10 }), { headers: headers() });
  check(res, {
    'search is 200': (r) => r.status === 200,
    'has 10 results': (r) => r.status === 200 && r.json('results').length === 10,
    'names its encoder': (r) => r.status === 200 && typeof r.json('encoder.name') === 'string',
  });
}
