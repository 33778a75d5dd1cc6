// The portal's live cluster list: a page served from the portal's own
// origin opens an EventSource on krayne's watch route (cross-origin, so
// through CORS; its token in the query, as EventSource sends no headers)
// in Debian's Chromium, while the typed client creates, scales and deletes
// a cluster. The page must see ADDED, a MODIFIED with the new worker count,
// and DELETED, in that order, each with its version as the event id.
// Each step prints `ok <step>: <what it saw>`; the first surprise throws.

import { createServer } from "node:http";
import createClient from "openapi-fetch";
import { check, type JsonMedia, launchChromium, ok, setting } from "./common.js";
import type { components, paths } from "./schema.js";

type WatchEvent = components["schemas"]["ClusterWatchEvent"];

/** What the page keeps of each event it received. */
interface Seen {
  event: string;
  id: string;
  data: WatchEvent;
}

declare global {
  interface Window {
    seen: Seen[];
    opened?: boolean;
  }
}

const baseUrl = setting("KRAYNE_URL");
const token = setting("KRAYNE_TOKEN");
const namespace = setting("KRAYNE_NAMESPACE");
const port = Number(setting("PORTAL_PORT"));
const api = createClient<paths, JsonMedia>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });

// The page: every event's type, id and cluster, as the portal would keep them.
const page = `<!doctype html><title>clusters</title><ul id="events"></ul><script>
  window.seen = [];
  const url = ${JSON.stringify(`${baseUrl}/v1/namespaces/${namespace}/clusters?watch=true&access_token=`)}
    + encodeURIComponent(${JSON.stringify(token)});
  const source = new EventSource(url);
  for (const type of ["added", "modified", "deleted", "bookmark", "error"]) {
    source.addEventListener(type, (e) => {
      const data = JSON.parse(e.data);
      window.seen.push({ event: type, id: e.lastEventId, data });
    });
  }
  source.onopen = () => { window.opened = true; };
</script>`;

async function main(): Promise<void> {
  const server = createServer((_, response) => {
    response.writeHead(200, { "content-type": "text/html" });
    response.end(page);
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${port}`;
  const browser = await launchChromium();
  try {
    const tab = await browser.newPage();
    await tab.goto(`${origin}/`);
    await tab.waitForFunction(() => window.opened === true);
    ok("EventSource open", `from ${origin} to ${baseUrl}`);

    const name = "watched";
    const created = await api.POST("/v1/namespaces/{namespace}/clusters", {
      params: { path: { namespace } },
      body: { name, worker_groups: [{ name: "cpu", replicas: 1 }] },
    });
    check(created.response.status === 201, `create answered ${created.response.status}`);
    const waited = await api.GET("/v1/namespaces/{namespace}/clusters/{name}/wait", {
      params: { path: { namespace, name }, query: { timeout_seconds: 60 } },
    });
    check(waited.response.status === 200, `wait answered ${waited.response.status}`);
    const scaled = await api.POST("/v1/namespaces/{namespace}/clusters/{name}/scale", {
      params: { path: { namespace, name } },
      body: { worker_group: "cpu", replicas: 2 },
    });
    check(scaled.response.status === 200, `scale answered ${scaled.response.status}`);
    const deleted = await api.DELETE("/v1/namespaces/{namespace}/clusters/{name}", {
      params: { path: { namespace, name } },
    });
    check(deleted.response.status === 204, `delete answered ${deleted.response.status}`);

    await tab.waitForFunction(
      () => window.seen.some((s) => s.event === "deleted"),
      undefined,
      { timeout: 30_000 },
    );
    const seen = await tab.evaluate(() => window.seen);
    const mine = seen.filter((s) => s.data.cluster?.name === name);
    const first = mine[0];
    const last = mine[mine.length - 1];
    check(first !== undefined && first.event === "added", `first ${first?.event}`);
    ok("create", `added (${first.data.cluster?.status}), id ${first.id}`);
    const scale = mine.find((s) => s.event === "modified" && s.data.cluster?.num_workers === 2);
    check(scale !== undefined, "a modified event with 2 workers");
    ok("scale", `modified to ${scale.data.cluster?.num_workers} workers, id ${scale.id}`);
    check(last !== undefined && last.event === "deleted", `last ${last?.event}`);
    ok("delete", `deleted, id ${last.id}`);
    check(
      mine.every((s) => s.id === s.data.resource_version),
      "every event's id is its resource_version",
    );
    const order = mine.map((s) => Number(s.id.split(".")[1]));
    check(
      order.every((v, i) => i === 0 || v > (order[i - 1] ?? 0)),
      `versions in order: ${order.join(",")}`,
    );
    ok("order", `${mine.length} events, versions increasing`);
  } finally {
    await browser.close();
    server.close();
  }
  console.log("live watch: all ok");
}

main().then(
  () => {},
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exitCode = 1;
  },
);
