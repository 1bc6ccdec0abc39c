// llm-server's web chat in headless Chromium (Debian's /usr/bin/chromium, driven over the DevTools
// protocol by puppeteer-core): load /, enter the API key, type a message, send, wait for the streamed
// answer, send a second turn, screenshot. Env as openai.test.mjs, plus LLM_SCREENSHOT (PNG path).
import assert from "node:assert/strict";
import { test } from "node:test";
import puppeteer from "puppeteer-core";

const base = process.env.LLM_SERVER_URL;
const key = process.env.LLM_API_KEY;
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";

test("the web page streams an answer, keeps the conversation and shows tokens/s", async () => {
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1000, height: 720 });
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const res = await page.goto(base + "/", { waitUntil: "load" });
    assert.equal(res.status(), 200);
    assert.equal(await page.title(), "llm-server");
    // external resources: none (the page is one file)
    const external = await page.evaluate(() =>
      [...document.querySelectorAll("script[src], link[href], img[src]")].length);
    assert.equal(external, 0);

    await page.click("#toggle-settings");
    await page.type("#api-key", key);
    await page.$eval("#max-tokens", (el) => { el.value = "48"; });
    await page.$eval("#temperature", (el) => { el.value = "0"; });

    const answerOf = (n) => page.waitForFunction((n) => {
      const done = document.querySelectorAll(".msg.assistant .meta");
      return done.length >= n && document.querySelectorAll(".msg.assistant .content")[n - 1].textContent.trim();
    }, { timeout: 30_000 }, n).then((h) => h.jsonValue());

    await page.type("#input", "Tell me a story about a cat.");
    await page.click("#send");
    const first = await answerOf(1);
    assert.ok(first.length > 0, "empty answer");

    await page.type("#input", "What happened next?");
    await page.keyboard.press("Enter");
    const second = await answerOf(2);
    assert.ok(second.length > 0);
    const stats = await page.$eval("#stats", (el) => el.textContent);
    assert.match(stats, /tokens\/s/);
    assert.match(stats, /\(\d+ cached\)/);
    const n_cached = Number(stats.match(/\((\d+) cached\)/)[1]);
    assert.ok(n_cached > 0, "the second turn did not reuse the first one's cache: " + stats);
    assert.equal(await page.$$eval(".msg.user", (els) => els.length), 2);
    assert.equal(await page.$$eval(".msg.error", (els) => els.length), 0);
    // the model name came from /v1/models with the key
    assert.equal(await page.$eval("#model", (el) => el.textContent), "stories260K");
    assert.deepEqual(errors, []);
    if (process.env.LLM_SCREENSHOT) await page.screenshot({ path: process.env.LLM_SCREENSHOT });
  } finally {
    await browser.close();
  }
});

test("the stop button aborts a running answer", async () => {
  const browser = await puppeteer.launch({ executablePath: chromium, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  try {
    const page = await browser.newPage();
    await page.goto(base + "/", { waitUntil: "load" });
    await page.evaluate((k) => { document.getElementById("api-key").value = k; }, key);
    await page.$eval("#max-tokens", (el) => { el.value = "400"; });
    // the answer trickles in at 2 KB/s (DevTools network throttling), so Stop comes in time on any machine
    await page.emulateNetworkConditions({ download: 2000, upload: 1e6, latency: 0 });
    await page.type("#input", "Tell me a long story.");
    await page.click("#send");
    await page.waitForFunction(() => document.querySelector(".msg.assistant .content")?.textContent.length > 0,
                               { timeout: 30_000 });
    await page.click("#stop");
    await page.waitForSelector(".msg.assistant .meta", { timeout: 10_000 });
    const meta = await page.$eval(".msg.assistant .meta", (el) => el.textContent);
    assert.match(meta, /stopped/);
    assert.equal(await page.$eval("#send", (el) => el.disabled), false);
  } finally {
    await browser.close();
  }
});
