// A real Jupyter (the cluster's own postStart script ran it in the
// sandbox, on the head's loopback) in Debian's Chromium through a browser
// session: the typed client asks for a sign-in link, the browser opens it
// and lands on Jupyter's own page, which loads its scripts and talks to
// its API through krayne's proxy on the session cookie alone; a kernel
// started from the page's origin is admitted (krayne's Origin check
// stands in for Jupyter's XSRF check).
// Each step prints `ok <step>: <what it saw>`; the first surprise throws.

import createClient from "openapi-fetch";
import { check, type JsonMedia, launchChromium, ok, setting } from "./common.js";
import type { paths } from "./schema.js";

const baseUrl = setting("KRAYNE_URL");
const namespace = setting("KRAYNE_NAMESPACE");
const cluster = setting("KRAYNE_CLUSTER");
const api = createClient<paths, JsonMedia>({
  baseUrl,
  headers: { Authorization: `Bearer ${setting("KRAYNE_TOKEN")}` },
});

async function main(): Promise<void> {
  const created = await api.POST("/v1/namespaces/{namespace}/clusters/{name}/services/{service}/sessions", {
    params: { path: { namespace, name: cluster, service: "notebook" } },
  });
  check(created.data !== undefined, `a sign-in link (${created.response.status})`);
  const proxy = `/v1/namespaces/${namespace}/clusters/${cluster}/services/notebook/proxy/`;

  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const failed: string[] = [];
    let scripts = 0;
    page.on("response", (response) => {
      const url = new URL(response.url());
      if (url.pathname.startsWith(proxy) && response.status() >= 400) {
        failed.push(`${response.status()} ${url.pathname}`);
      }
      if (url.pathname.startsWith(proxy) && url.pathname.endsWith(".js") && response.status() === 200) {
        scripts += 1;
      }
    });
    const landed = await page.goto(created.data.sign_in_url, { waitUntil: "networkidle" });
    check(landed !== null && landed.status() === 200, `Jupyter answered ${landed?.status()}`);
    const path = new URL(page.url()).pathname;
    check(path.startsWith(`${proxy}tree`), `landed on ${path}`);
    ok("redeemed", `landed on Jupyter's ${path.slice(proxy.length)}`);
    const title = await page.title();
    check(scripts > 0, "Jupyter's scripts loaded through the proxy");
    check(failed.length === 0, `nothing failed: ${failed.join(", ")}`);
    ok("page", `"${title}", ${scripts} scripts through the proxy, none failed`);

    const version = await page.evaluate(
      async (base) => (await (await fetch(`${base}api`)).json()).version,
      proxy,
    );
    check(typeof version === "string", `Jupyter's API answered the page: ${version}`);
    ok("API from the page", `jupyter_server ${version}`);
    const started = await page.evaluate(
      async (base) => (await fetch(`${base}api/kernels`, { method: "POST", body: "{}" })).status,
      proxy,
    );
    check(started === 201, `a kernel started from the page: ${started}`);
    ok("kernel from the page", "201");
  } finally {
    await browser.close();
  }
  console.log("real notebook: all ok");
}

main().then(
  () => {},
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exitCode = 1;
  },
);
