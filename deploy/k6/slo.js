// SLO test: constant arrival rate; fails when p95/p99 latency or the error rate break the SLO.
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e RATE=50 -e P95_MS=50 -e P99_MS=100 deploy/k6/slo.js
import http from 'k6/http';
import { check } from 'k6';
import { headers, query } from './lib.js';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:8080';

export const options = {
  scenarios: {
    slo: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 50),
      timeUnit: '1s',
      duration: __ENV.DURATION || '60s',
      preAllocatedVUs: Number(__ENV.VUS || 20),
      maxVUs: Number(__ENV.MAX_VUS || 100),
    },
  },
  thresholds: {
    http_req_failed: [`rate<${__ENV.MAX_ERROR_RATE || 0.001}`],
    'http_req_duration{name:search}': [
      `p(95)<${__ENV.P95_MS || 50}`,
      `p(99)<${__ENV.P99_MS || 100}`,
    ],
    dropped_iterations: [`count<${__ENV.MAX_DROPPED || 1}`],
  },
};

export default function () {
  const res = http.post(`${BASE}/search`, JSON.stringify({ query: query(), k: 10 }), {
    headers: headers(),
    tags: { name: 'search' },
  });
  check(res, { 'search is 200': (r) => r.status === 200 });
}
