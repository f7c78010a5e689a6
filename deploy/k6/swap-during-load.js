// Swap during load: searches at a constant rate while an admin scenario flips an alias between
// two encoders; no request may fail and every response must name one of them.
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e ADMIN_URL=http://127.0.0.1:8081 \
//          -e ADMIN_TOKEN=... -e ALIAS=default -e ENCODERS=minilm,minilm-b deploy/k6/swap-during-load.js
import http from 'k6/http';
import { check } from 'k6';
import { headers, query } from './lib.js';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const ADMIN = __ENV.ADMIN_URL || 'http://127.0.0.1:8081';
const ALIAS = __ENV.ALIAS || 'default';
const ENCODERS = (__ENV.ENCODERS || 'minilm,minilm-b').split(',');

export const options = {
  scenarios: {
    search: {
      executor: 'constant-arrival-rate', exec: 'search',
      rate: Number(__ENV.RATE || 30), timeUnit: '1s', duration: __ENV.DURATION || '30s',
      preAllocatedVUs: 10, maxVUs: 50,
    },
    swap: {
      executor: 'constant-arrival-rate', exec: 'swap',
      rate: Number(__ENV.SWAPS_PER_SECOND || 2), timeUnit: '1s', duration: __ENV.DURATION || '30s',
      preAllocatedVUs: 1, maxVUs: 2,
    },
  },
  thresholds: {
    'http_req_failed{scenario:search}': ['rate==0'],
    'checks{scenario:search}': ['rate==1.0'],
    'checks{scenario:swap}': ['rate==1.0'],
  },
};

export function search() {
  const res = http.post(`${BASE}/search`, JSON.stringify({ query: query(), k: 10, encoder: ALIAS }), { headers: headers() });
  check(res, {
    'search is 200': (r) => r.status === 200,
    'served by a swapped encoder': (r) => r.status === 200 && ENCODERS.includes(r.json('encoder.name')),
  });
}

export function swap() {
  const target = ENCODERS[Math.floor(Math.random() * ENCODERS.length)];
  const res = http.put(`${ADMIN}/admin/aliases/${ALIAS}`, JSON.stringify({ encoder: target }), {
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${__ENV.ADMIN_TOKEN || ''}` },
  });
  check(res, { 'swap is 200': (r) => r.status === 200 });
}
