// Shared helpers for the k6 scripts.
const QUERIES = [
  'symptoms of vitamin d deficiency', 'how long do antibiotics take to work', 'what is the capital of australia',
  'how does bluetooth pairing work', 'best way to store fresh herbs', 'why is the sky blue',
  'how to fix a running toilet', 'what does dns do', 'is chocolate bad for dogs', 'how long is a marathon',
  'sympotms of vitamin d deficiency', 'capital of austrlia', 'how does bluetoth pairing work',
];

/** A query for this iteration (set QUERY to pin one). */
export function query() {
  return __ENV.QUERY || QUERIES[Math.floor(Math.random() * QUERIES.length)];
}

/** JSON content type, and the API key when API_KEY is set. */
export function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (__ENV.API_KEY) h.Authorization = `Bearer ${__ENV.API_KEY}`;
  return h;
}
