-- wrk script: POST /search with one query per request, cycling through a file of JSON bodies
-- (one per line, made by bench/serve.sh). Each wrk thread starts at its own offset.
--
--   BODIES=bench/out/bodies.jsonl HIST=out.hist wrk -t1 -c1 -d10s -s bench/search.lua http://127.0.0.1:8081/search
--
-- At the end it prints one line `JSON {...}` (requests, errors, latency percentiles in ms) and,
-- if HIST is set, writes the full latency histogram there as `microseconds count` lines.

local counter = 0
local threads = {}

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

local bodies = {}
local at = 1

function init(args)
  local path = os.getenv("BODIES") or "bench/out/bodies.jsonl"
  for line in io.lines(path) do
    if #line > 0 then bodies[#bodies + 1] = line end
  end
  assert(#bodies > 0, "no request bodies in " .. path)
  at = ((id or 0) * 997) % #bodies + 1
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local body = bodies[at]
  at = at % #bodies + 1
  return wrk.format(nil, nil, nil, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.status + e.timeout
  local secs = summary.duration / 1e6
  io.write(string.format(
    'JSON {"requests": %d, "seconds": %.3f, "requests_per_second": %.2f, "errors": %d, "non_2xx": %d, ' ..
    '"latency_ms_mean": %.3f, "latency_ms_p50": %.3f, "latency_ms_p90": %.3f, "latency_ms_p99": %.3f, "latency_ms_max": %.3f}\n',
    summary.requests, secs, summary.requests / secs, errors, e.status,
    latency.mean / 1e3, latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
    latency:percentile(99) / 1e3, latency.max / 1e3))
  local hist = os.getenv("HIST")
  if hist then
    local f = assert(io.open(hist, "w"))
    for i = 1, #latency do
      local value, count = latency(i)
      f:write(string.format("%d %d\n", value, count))
    end
    f:close()
  end
end
