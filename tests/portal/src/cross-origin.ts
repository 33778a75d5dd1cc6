// A browser session cannot be used by another origin of the same site
// (the second outside review's finding 2). Alice signs in to a cluster's
// notebook in Debian's Chromium; the notebook's own page opens its kernel
// WebSocket and starts a kernel (a POST). Then a page served from another
// port of the same host — same site, so the SameSite=Lax cookie goes
// along, but another origin — tries the same: its WebSocket must not
// open and its POST must start nothing (counted with a bearer token).
// Each step prints `ok <step>: <what it saw>`; the first surprise throws.

import { createServer } from "node:http";
import createClient from "openapi-fetch";
import { check, type JsonMedia, launchChromium, ok, setting } from "./common.js";
import type { paths } from "./schema.js";

declare global {
  interface Window {
    attempt?: { ws?: string; post?: string };
  }
}

const baseUrl = setting("KRAYNE_URL");
const token = setting("KRAYNE_TOKEN");
const namespace = setting("KRAYNE_NAMESPACE");
const cluster = setting("KRAYNE_CLUSTER");
const otherPort = Number(setting("OTHER_PORT"));
const api = createClient<paths, JsonMedia>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
const notebook = `${baseUrl}/v1/namespaces/${namespace}/clusters/${cluster}/services/notebook/proxy`;

/** The kernels the notebook has, asked with the bearer token. */
async function kernels(): Promise<number> {
  const response = await fetch(`${notebook}/api/kernels`, { headers: { Authorization: `Bearer ${token}` } });
  check(response.status === 200, `listing kernels answered ${response.status}`);
  const listed: unknown = await response.json();
  check(Array.isArray(listed), "a list of kernels");
  return listed.length;
}

// The other origin's page: the notebook's kernel channel and a kernel
// start, with whatever cookies the browser sends along.
const evil = `<!doctype html><title>not the notebook</title><script>
  window.attempt = {};
  const ws = new WebSocket(${JSON.stringify(notebook.replace(/^http/, "ws") + "/api/kernels/stolen/channels")});
  ws.onopen = () => ws.send("stolen");
  ws.onmessage = (e) => { window.attempt.ws = "read " + e.data; };
  ws.onclose = () => { window.attempt.ws = window.attempt.ws ?? "refused"; };
  fetch(${JSON.stringify(`${notebook}/api/kernels`)}, { method: "POST", mode: "no-cors", credentials: "include" })
    .then(() => { window.attempt.post = "sent"; }, () => { window.attempt.post = "failed"; });
</script>`;

async function main(): Promise<void> {
  const created = await api.POST("/v1/namespaces/{namespace}/clusters/{name}/services/{service}/sessions", {
    params: { path: { namespace, name: cluster, service: "notebook" } },
  });
  check(created.data !== undefined, `a sign-in link (${created.response.status})`);
  const before = await kernels();

  const server = createServer((_, response) => {
    response.writeHead(200, { "content-type": "text/html" });
    response.end(evil);
  });
  await new Promise<void>((resolve) => server.listen(otherPort, "127.0.0.1", resolve));
  const browser = await launchChromium();
  try {
    const context = await browser.newContext();
    const page = await context.newPage();
    const landed = await page.goto(created.data.sign_in_url);
    check(landed !== null && landed.status() === 200, `the notebook answered ${landed?.status()}`);
    await page.waitForFunction(() => document.getElementById("kernel")?.textContent === "kernel");
    ok("own page's WebSocket", "the kernel channel echoes");
    const answered = await page.evaluate(async () => (await fetch("api/kernels", { method: "POST" })).status);
    check(answered === 201, `the own page's POST answered ${answered}`);
    check((await kernels()) === before + 1, "the own page started a kernel");
    ok("own page's POST", "201, a kernel started");

    const other = await context.newPage();
    const origin = `http://127.0.0.1:${otherPort}`;
    await other.goto(`${origin}/`);
    await other.waitForFunction(() => window.attempt?.ws !== undefined && window.attempt.post !== undefined, undefined, {
      timeout: 15_000,
    });
    const attempt = await other.evaluate(() => window.attempt);
    const started = (await kernels()) - (before + 1);
    console.log(`the page at ${origin}: WebSocket ${attempt?.ws}, POST ${attempt?.post}, kernels started ${started}`);
    check(attempt?.ws === "refused", `the other origin's WebSocket: ${attempt?.ws}`);
    ok("other origin's WebSocket", `refused (page at ${origin})`);
    check(started === 0, `the other origin's POST started ${started} kernels`);
    ok("other origin's POST", `${attempt?.post}, no kernel started`);
  } finally {
    await browser.close();
    server.close();
  }
  console.log("cross-origin: all ok");
}

main().then(
  () => {},
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exitCode = 1;
  },
);
