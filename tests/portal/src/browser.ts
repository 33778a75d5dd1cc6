// A browser session to a cluster's dashboard, as the portal starts one: the
// typed client asks krayne for a sign-in link (bearer token), then a real
// browser (Debian's Chromium, driven by playwright-core) opens it. The
// dashboard's own script must reach its API (a relative fetch) and its
// WebSocket through the proxy on the session cookie alone; the cookie's
// flags and the link's single use are checked from the browser's side.
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
    params: { path: { namespace, name: cluster, service: "dashboard" } },
  });
  check(created.data !== undefined, `a sign-in link (${created.response.status})`);
  const link = created.data;
  ok("sign-in link", `valid until ${link.expires_at}, session ${link.session_seconds} s`);

  const listed = await api.GET("/v1/namespaces/{namespace}/clusters/{name}/services", {
    params: { path: { namespace, name: cluster } },
  });
  check(listed.data !== undefined, `the services (${listed.response.status})`);
  const dashboard = listed.data.services.find((s) => s.name === "dashboard");
  const proxyPath = `/v1/namespaces/${namespace}/clusters/${cluster}/services/dashboard/proxy/`;
  check(dashboard?.proxy_url === proxyPath, `the dashboard's proxy URL: ${dashboard?.proxy_url}`);
  ok("proxy URL", `${dashboard.proxy_url} (in-cluster: ${dashboard.in_cluster_url})`);

  const browser = await launchChromium();
  try {
    // A browser arriving at the proxy without a session is told how to
    // get in, not handed a problem document.
    const stranger = await (await browser.newContext()).newPage();
    const refused = await stranger.goto(new URL(dashboard.proxy_url ?? "", baseUrl).toString());
    check(refused !== null && refused.status() === 401, `without a session: ${refused?.status()}`);
    const command = await stranger.textContent("#command");
    check(
      command === `krayne open ${cluster} dashboard -n ${namespace}`,
      `the page says how to sign in: ${command}`,
    );
    ok("sign-in page", `${await stranger.title()}: ${command}`);

    const context = await browser.newContext();
    const page = await context.newPage();
    const landed = await page.goto(link.sign_in_url);
    check(landed !== null && landed.status() === 200, `the dashboard answered ${landed?.status()}`);
    check(page.url() === link.service_url, `landed on ${page.url()}`);
    check(!page.url().includes("ticket"), "the ticket is gone from the address bar");
    ok("redeemed", `landed on ${page.url()}`);

    await page.waitForFunction(() => document.getElementById("version")?.textContent !== "…");
    const version = await page.textContent("#version");
    check(version === "2.60.0", `the dashboard's relative API call saw ${version}`);
    ok("relative API call", `Ray ${version}`);
    await page.waitForFunction(() => document.getElementById("ws")?.textContent === "echo");
    ok("WebSocket", "echo");

    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === "krayne_session");
    check(session !== undefined, `a session cookie among ${cookies.map((c) => c.name).join(", ")}`);
    // One sign-in covers the cluster's services (issue 56).
    const path = `/v1/namespaces/${namespace}/clusters/${cluster}/services`;
    check(session.httpOnly, "HttpOnly");
    check(session.sameSite === "Lax", `SameSite=${session.sameSite}`);
    check(session.path === path, `Path=${session.path}`);
    check(!session.secure, "not Secure over plain http");
    const visible = await page.evaluate(() => document.cookie);
    check(!visible.includes("krayne_session"), "scripts cannot read the session");
    ok("cookie", `HttpOnly, SameSite=Lax, Path=${session.path}`);

    const again = await context.newPage();
    const replay = await again.goto(link.sign_in_url);
    check(replay !== null && replay.status() === 401, `a second use answered ${replay?.status()}`);
    ok("second use", "401");
    // A reload of the used link is a page (not problem JSON) that offers
    // the service to a browser already signed in, and how to get a new one.
    const type = replay.headers()["content-type"] ?? "";
    check(type.startsWith("text/html"), `the used link's answer is a page: ${type}`);
    const title = await again.textContent("h1");
    check(title === "This sign-in link was used", `the page says the link was used: ${title}`);
    const spentCommand = await again.textContent("#command");
    check(spentCommand === `krayne open ${cluster} dashboard -n ${namespace}`, `a new link: ${spentCommand}`);
    await again.click("#go-on");
    await again.waitForURL(link.service_url);
    await again.waitForFunction(() => document.getElementById("version")?.textContent !== "…");
    check((await again.textContent("#version")) === "2.60.0", "signed in, the dashboard works after the page");
    ok("used link page", `${title}; go on to ${again.url()}`);

    // Signed in through the dashboard, the same browser opens the
    // cluster's notebook too.
    const notebookUrl = new URL(`/v1/namespaces/${namespace}/clusters/${cluster}/services/notebook/proxy/`, baseUrl);
    const notebook = await again.goto(notebookUrl.toString());
    check(notebook !== null && notebook.status() === 200, `the notebook on the same session: ${notebook?.status()}`);
    ok("one session, the cluster's services", `notebook ${notebook.status()}`);
    const apiRoute = await again.goto(`${baseUrl}/v1/whoami`);
    check(apiRoute !== null && apiRoute.status() === 401, `the API answered the browser ${apiRoute?.status()}`);
    ok("API routes", "401 without a bearer token");
  } finally {
    await browser.close();
  }
  console.log("browser session: all ok");
}

main().then(
  () => {},
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exitCode = 1;
  },
);
