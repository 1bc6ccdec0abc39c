// Load test of llm-server (scripts/server-load.sh starts the server): N streaming greedy requests from C
// concurrent clients over a few prompts. Every answer must equal the prompt's sequential reference
// (so no token went to the wrong client) with the same token count (max_tokens honoured); prints
// time-to-first-token percentiles and the aggregate generation rate. Exit 1 on any mismatch.
//   LLM_SERVER_URL=... LLM_API_KEY=... N_REQUESTS=200 CONCURRENCY=64 node tests/server/load.mjs
import OpenAI from "openai";

const base = process.env.LLM_SERVER_URL;
const key = process.env.LLM_API_KEY || "none";
const nRequests = Number(process.env.N_REQUESTS || 200);
const concurrency = Number(process.env.CONCURRENCY || 64);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0, timeout: 300_000 });

const prompts = [
  "Once upon a time", "The little dog", "Lily and Tom went", "One day, a bird", "The sun was hot and",
  "Ben had a red ball", "Mom said to Sue", "In the big park", "The cat saw a", "Tim wanted to play",
];
const maxTokensOf = (i) => 16 + 8 * (i % 6);  // 16 .. 56

async function reference(i) {
  const r = await client.completions.create({ prompt: prompts[i], max_tokens: maxTokensOf(i), temperature: 0 });
  return { text: r.choices[0].text, n: r.usage.completion_tokens, finish: r.choices[0].finish_reason };
}

async function one(i) {
  const t0 = performance.now();
  let tFirst = 0, text = "", n = 0, finish = null;
  const stream = await client.completions.create({
    prompt: prompts[i], max_tokens: maxTokensOf(i), temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  for await (const ch of stream) {
    if (ch.usage) n = ch.usage.completion_tokens;
    const c = ch.choices[0];
    if (!c) continue;
    if (c.text && !tFirst) tFirst = performance.now();
    text += c.text;
    finish = c.finish_reason ?? finish;
  }
  const t1 = performance.now();
  return { i, text, n, finish, ttft: (tFirst || t1) - t0, total: t1 - t0 };
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};

const refs = [];
for (let i = 0; i < prompts.length; i++) refs.push(await reference(i));

const results = [];
const failures = [];
let next = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (next < nRequests) {
    const k = next++;
    const i = k % prompts.length;
    try {
      results.push(await one(i));
    } catch (e) {
      failures.push(`request ${k}: ${e.message}`);
    }
  }
}));
const wall = (performance.now() - t0) / 1000;

for (const r of results) {
  const ref = refs[r.i];
  if (r.text !== ref.text) failures.push(`prompt ${r.i}: text differs from the sequential one:\n  ${JSON.stringify(r.text)}\n  ${JSON.stringify(ref.text)}`);
  if (r.n !== ref.n) failures.push(`prompt ${r.i}: ${r.n} tokens, the sequential run had ${ref.n}`);
  if (r.finish !== ref.finish) failures.push(`prompt ${r.i}: finish ${r.finish}, sequential ${ref.finish}`);
  if (ref.finish === "length" && r.n !== maxTokensOf(r.i)) failures.push(`prompt ${r.i}: ${r.n} tokens, max_tokens ${maxTokensOf(r.i)}`);
}
const tokens = results.reduce((s, r) => s + r.n, 0);
const ttft = results.map((r) => r.ttft), total = results.map((r) => r.total);
const metrics = await fetch(base + "/metrics", { headers: { Authorization: "Bearer " + key } }).then((r) => r.text());
const metric = (name) => Number((metrics.match(new RegExp(`^llm_${name} (\\S+)$`, "m")) || [])[1]);

console.log(`requests: ${results.length}/${nRequests} completed, ${concurrency} concurrent clients, ${tokens} tokens generated in ${wall.toFixed(2)} s`);
console.log(`time to first token: p50 ${pct(ttft, 50).toFixed(1)} ms, p99 ${pct(ttft, 99).toFixed(1)} ms; ` +
            `request latency: p50 ${pct(total, 50).toFixed(1)} ms, p99 ${pct(total, 99).toFixed(1)} ms`);
console.log(`aggregate generation: ${(tokens / wall).toFixed(1)} tokens/s (client side); server: ` +
            `${metric("predicted_tokens_seconds").toFixed(1)} tokens/s over its generating steps, ` +
            `${metric("steps_total")} steps, ${metric("requests_processing")} processing and ${metric("requests_queued")} queued now`);
console.log(`RESULT | ${nRequests} | ${concurrency} | ${pct(ttft, 50).toFixed(1)} | ${pct(ttft, 99).toFixed(1)} | ` +
            `${pct(total, 50).toFixed(1)} | ${(tokens / wall).toFixed(1)} |`);
if (metric("requests_processing") !== 0 || metric("requests_queued") !== 0) failures.push("slots still busy after the run");
if (failures.length) {
  console.log(`${failures.length} failures:\n` + failures.slice(0, 20).join("\n"));
  process.exit(1);
}
console.log(`every answer equals its sequential reference (${prompts.length} prompts, max_tokens honoured)`);
