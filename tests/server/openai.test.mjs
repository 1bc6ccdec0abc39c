// llm-server through the official `openai` npm client (node --test). scripts/server-test.sh starts the
// server (stories260K, -np 4 -c 2048 --chat-template llama2 --api-key ...) and sets:
//   LLM_SERVER_URL  http://127.0.0.1:PORT     LLM_API_KEY  the server's key
//   LLM_MAIN        build/bin/main            LLM_MODEL    the model file (for main's reference output)
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import OpenAI from "openai";

const base = process.env.LLM_SERVER_URL;
const key = process.env.LLM_API_KEY;
assert.ok(base && key, "LLM_SERVER_URL and LLM_API_KEY must be set (scripts/server-test.sh does)");
const client = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0, timeout: 60_000 });
const PROMPT = "Once upon a time";

async function post(path, body) {  // raw request, for the llama.cpp-style fields the client does not type
  const res = await fetch(base + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + key },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

async function greedy(prompt, max_tokens) {
  const r = await client.completions.create({ model: "", prompt, max_tokens, temperature: 0 });
  return r.choices[0].text;
}

test("/v1/models lists the served model", async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].id, "stories260K");
  assert.equal(list.data[0].object, "model");
});

test("chat completion: message, finish_reason, usage, timings", async () => {
  const r = await client.chat.completions.create({
    model: "stories260K", messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 24, temperature: 0,
  });
  assert.equal(r.object, "chat.completion");
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, "stories260K");
  const c = r.choices[0];
  assert.equal(c.message.role, "assistant");
  assert.ok(c.message.content.length > 0, "empty answer");
  assert.ok(["stop", "length"].includes(c.finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 24);
  assert.equal(r.timings.predicted_n, r.usage.completion_tokens);
  assert.equal(r.timings.prompt_n + r.timings.cache_n, r.usage.prompt_tokens);
});

test("chat streaming: role first, then content pieces equal to the non-streaming answer, usage chunk", async () => {
  const req = { messages: [{ role: "user", content: "Where is the cat?" }], max_tokens: 20, temperature: 0 };
  const whole = (await client.chat.completions.create(req)).choices[0].message.content;
  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  assert.equal(chunks[0].object, "chat.completion.chunk");
  assert.equal(chunks[0].choices[0].delta.role, "assistant");
  const withChoice = chunks.filter((c) => c.choices.length > 0);
  assert.ok(withChoice.slice(1).every((c) => c.choices[0].delta.role === undefined), "role repeated");
  const text = withChoice.map((c) => c.choices[0].delta.content ?? "").join("");
  assert.equal(text, whole);
  assert.ok(withChoice.length >= 3, "the answer came in one piece");
  const last = withChoice[withChoice.length - 1];
  assert.ok(["stop", "length"].includes(last.choices[0].finish_reason));
  assert.ok(withChoice.slice(0, -1).every((c) => c.choices[0].finish_reason === null));
  const usage = chunks[chunks.length - 1];
  assert.equal(usage.choices.length, 0);
  assert.ok(usage.usage.completion_tokens >= 1);
});

test("completions: non-streaming equals streaming (greedy)", async () => {
  const whole = await client.completions.create({ prompt: PROMPT, max_tokens: 30, temperature: 0 });
  assert.equal(whole.object, "text_completion");
  assert.equal(whole.usage.completion_tokens, 30);
  assert.equal(whole.choices[0].finish_reason, "length");
  const stream = await client.completions.create({ prompt: PROMPT, max_tokens: 30, temperature: 0, stream: true });
  let text = "", finish = null, n = 0;
  for await (const ch of stream) {
    text += ch.choices[0].text;
    finish = ch.choices[0].finish_reason ?? finish;
    n++;
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, "length");
  assert.ok(n > 10);
});

test("greedy completion equals main's output for the same prompt", () => {
  const out = execFileSync(process.env.LLM_MAIN, ["-m", process.env.LLM_MODEL, "-p", PROMPT, "--temp", "0", "-n", "40"],
                           { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  return greedy(PROMPT, 40).then((text) => {
    assert.ok(text.length > 40, "short answer: " + text);
    assert.equal((PROMPT + text).trim(), out.trim());
  });
});

test("max_tokens gives exactly that many completion tokens", async () => {
  for (const n of [1, 7, 33]) {
    const r = await client.completions.create({ prompt: PROMPT, max_tokens: n, temperature: 0.9, seed: n });
    assert.equal(r.usage.completion_tokens, n);
    assert.equal(r.choices[0].finish_reason, "length");
  }
  const r = await post("/v1/completions", { prompt: PROMPT, n_predict: 5, temperature: 0 });
  assert.equal(r.json.usage.completion_tokens, 5);
});

test("stop strings end the text before them, streaming included", async () => {
  const full = await greedy(PROMPT, 40);
  // a stop string from the middle of the greedy text: "She loved" -> the text ends before it
  const at = full.indexOf(" She");
  assert.ok(at > 0, "unexpected greedy text: " + full);
  const stop = full.slice(at, at + 8);
  const want = full.slice(0, at);
  const r = await client.completions.create({ prompt: PROMPT, max_tokens: 40, temperature: 0, stop: [stop, "zzzz"] });
  assert.equal(r.choices[0].text, want);
  assert.equal(r.choices[0].finish_reason, "stop");
  const stream = await client.completions.create({ prompt: PROMPT, max_tokens: 40, temperature: 0, stop, stream: true });
  const pieces = [];
  let finish = null;
  for await (const ch of stream) {
    pieces.push(ch.choices[0].text);
    finish = ch.choices[0].finish_reason ?? finish;
  }
  // no piece of the stop string was sent before it turned out to be one
  assert.equal(pieces.join(""), want);
  assert.equal(finish, "stop");
  // a stop string that never occurs changes nothing
  const same = await client.completions.create({ prompt: PROMPT, max_tokens: 40, temperature: 0, stop: "@@" });
  assert.equal(same.choices[0].text, full);
});

test("a two-turn chat reuses the first turn's cached prefix", async () => {
  const turn1 = [{ role: "system", content: "You tell short stories." }, { role: "user", content: "Tell me about a dog." }];
  const r1 = await client.chat.completions.create({ messages: turn1, max_tokens: 16, temperature: 0 });
  const turn2 = [...turn1, { role: "assistant", content: r1.choices[0].message.content },
                 { role: "user", content: "What did the dog eat?" }];
  const r2 = await client.chat.completions.create({ messages: turn2, max_tokens: 16, temperature: 0 });
  assert.ok(r2.timings.cache_n >= r1.usage.prompt_tokens,
            `cache_n ${r2.timings.cache_n} < the first prompt's ${r1.usage.prompt_tokens} tokens`);
  assert.ok(r2.timings.prompt_n < r2.usage.prompt_tokens);
  assert.equal(r2.timings.prompt_n + r2.timings.cache_n, r2.usage.prompt_tokens);
  // the cache changes nothing: a fresh evaluation of the same prompt gives the same answer
  const again = await client.chat.completions.create({ messages: turn2, max_tokens: 16, temperature: 0 });
  assert.equal(again.choices[0].message.content, r2.choices[0].message.content);
});

test("chat logprobs: top_logprobs per token, the greedy pick first", async () => {
  const r = await client.chat.completions.create({
    messages: [{ role: "user", content: "Hello" }], max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens - (r.choices[0].finish_reason === "stop" ? 1 : 0));
  assert.equal(lp.map((t) => t.token).join(""), r.choices[0].message.content);
  let total = 0;
  for (const t of lp) {
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    for (let i = 1; i < 3; i++) assert.ok(t.top_logprobs[i].logprob <= t.top_logprobs[i - 1].logprob);
    assert.deepEqual(t.bytes, [...Buffer.from(t.token)]);
    total += Math.exp(t.top_logprobs.reduce((m, a) => Math.max(m, a.logprob), -Infinity));
  }
  assert.ok(total > 0);
});

test("completion logprobs and n_probs (OpenAI's legacy format)", async () => {
  const r = await client.completions.create({ prompt: PROMPT, max_tokens: 8, temperature: 0, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 8);
  assert.equal(lp.tokens.join(""), r.choices[0].text);
  assert.equal(lp.token_logprobs.length, 8);
  assert.equal(lp.top_logprobs.length, 8);
  assert.ok(lp.top_logprobs.every((o) => Object.keys(o).length >= 1 && Object.keys(o).length <= 2));
  assert.deepEqual(lp.text_offset.slice(0, 2), [0, lp.tokens[0].length]);
  const p = Math.exp(lp.token_logprobs[0]);
  assert.ok(p > 0 && p <= 1);
  const raw = await post("/v1/completions", { prompt: PROMPT, max_tokens: 4, temperature: 0, n_probs: 5 });
  assert.equal(raw.status, 200);
  assert.ok(raw.json.choices[0].logprobs.top_logprobs.every((o) => Object.keys(o).length >= 4));
  // streaming carries them chunk by chunk
  const stream = await client.completions.create({ prompt: PROMPT, max_tokens: 8, temperature: 0, logprobs: 1, stream: true });
  let n = 0;
  for await (const ch of stream) n += ch.choices[0].logprobs?.tokens?.length ?? 0;
  assert.equal(n, 8);
});

test("the same seed and temperature give the same text; other seeds differ", async () => {
  const ask = (seed) => client.completions.create({ prompt: "One day", max_tokens: 40, temperature: 1.0, top_k: 0, top_p: 1, seed })
                              .then((r) => r.choices[0].text);
  const a = await ask(1234), b = await ask(1234);
  assert.equal(a, b);
  const others = new Set([a, await ask(1), await ask(2), await ask(3)]);
  assert.ok(others.size >= 3, "different seeds gave the same text");
});

test("concurrent greedy requests get the same text as sequential ones", async () => {
  const prompts = ["Once upon a time", "The little dog", "Lily and Tom", "One day, a bird", "The sun was", "Ben had a"];
  const seq = [];
  for (const p of prompts) seq.push(await greedy(p, 24 + seq.length));
  const par = await Promise.all(prompts.map((p, i) => greedy(p, 24 + i)));
  assert.deepEqual(par, seq);
});

test("tokenize and detokenize round trip", async () => {
  const t = await post("/tokenize", { content: PROMPT, add_special: true });
  assert.deepEqual(t.json.tokens, [1, 403, 407, 261, 378]);
  const d = await post("/detokenize", { tokens: t.json.tokens.slice(1) });
  assert.equal(d.json.content.trim(), PROMPT);
  const p = await post("/tokenize", { content: "Once", with_pieces: true });
  assert.deepEqual(p.json.tokens, [{ id: 403, piece: " Once" }]);
});
