// The ML-platform portal's flows over krayne's REST API, typed only from
// the OpenAPI document the server serves (openapi-typescript generates
// ./schema.d.ts from it) and called with openapi-fetch. No `any`, no
// casts: if the document were vague, this would not compile under
// `tsc --strict`. Each step prints `ok <step>: <what it saw>`; the first
// surprise throws and the process exits non-zero.

import createClient from "openapi-fetch";
import { check, type JsonMedia, ok, setting } from "./common.js";
import type { components, paths } from "./schema.js";

type ClusterConfig = paths["/v1/namespaces/{namespace}/clusters"]["post"]["requestBody"]["content"]["application/json"];
type Problem = components["schemas"]["Problem"];
type ClusterStatus = components["schemas"]["ClusterStatus"];

const baseUrl = setting("KRAYNE_URL");
const namespace = setting("KRAYNE_NAMESPACE");
const api = createClient<paths, JsonMedia>({
  baseUrl,
  headers: { Authorization: `Bearer ${setting("KRAYNE_TOKEN")}` },
});
const anonymous = createClient<paths, JsonMedia>({ baseUrl });

/** A problem document as the portal shows it: code and field paths. */
function problem(p: Problem): string {
  const fields = (p.violations ?? []).map((v) => `${v.field} (${v.description})`);
  return `${p.status} ${p.code}${fields.length > 0 ? `: ${fields.join("; ")}` : ""}`;
}

function isSettled(status: ClusterStatus): boolean {
  return status === "ready" || status === "pods-failed" || status === "crash-loop";
}

const train: ClusterConfig = {
  name: "portal-train",
  head: { cpus: "2", memory: "8Gi", runs_tasks: false },
  worker_groups: [
    { name: "cpu", replicas: 1, min_replicas: 0, max_replicas: 3, cpus: 2, memory: "4Gi" },
    { name: "gpu", replicas: 0, max_replicas: 2, gpus: 1, image: "rayproject/ray:2.43.0-py312-gpu" },
  ],
  services: { notebook: true, code_server: false, ssh: true },
  autoscaler: { enabled: true, idle_timeout_seconds: 120, upscaling_mode: "Conservative", cpu: "500m" },
};

async function create(config: ClusterConfig): Promise<void> {
  const created = await api.POST("/v1/namespaces/{namespace}/clusters", {
    params: { path: { namespace } },
    body: config,
  });
  check(created.response.status === 201, `create ${config.name} answered ${created.response.status}`);
  check(created.data !== undefined, "create returned the cluster");
  check(created.data.warnings.length === 0, "a typed config draws no warnings");
}

async function main(): Promise<void> {
  const unauthenticated = await anonymous.GET("/v1/whoami");
  check(unauthenticated.error !== undefined, "whoami without a token is refused");
  check(unauthenticated.error.code === "unauthenticated", problem(unauthenticated.error));
  ok("401 without a token", problem(unauthenticated.error));

  const version = await anonymous.GET("/v1/version");
  check(version.data !== undefined, "the version needs no token");
  ok("version", `${version.data.server_version} (api ${version.data.api_version})`);

  const me = await api.GET("/v1/whoami");
  check(me.data !== undefined, `whoami answered ${me.response.status}`);
  ok("whoami", `${me.data.subject}, teams ${me.data.teams.join(", ")}`);

  const namespaces = await api.GET("/v1/namespaces", { params: { query: { page_size: 100 } } });
  check(namespaces.data !== undefined, "namespaces");
  const access = namespaces.data.namespaces.find((n) => n.namespace === namespace);
  check(access !== undefined, `${namespace} is listed`);
  check(access.role === "editor" || access.role === "admin", `may create in ${namespace} (role ${access.role})`);
  ok("namespaces", namespaces.data.namespaces.map((n) => `${n.namespace}=${n.role}`).join(", "));

  const dry = await api.POST("/v1/namespaces/{namespace}/clusters", {
    params: { path: { namespace }, query: { dry_run: true, field_validation: "strict" } },
    body: train,
  });
  check(dry.data !== undefined && dry.response.status === 200, `dry run answered ${dry.response.status}`);
  const kind = dry.data.manifest["kind"];
  check(kind === "RayCluster", `the manifest is a RayCluster, not ${String(kind)}`);
  check(dry.data.warnings.length === 0 && dry.response.headers.get("warning") === null, "no warnings");
  ok("dry run (strict)", `${dry.data.cluster.name} would be ${dry.data.cluster.status}`);

  const invalid = await api.POST("/v1/namespaces/{namespace}/clusters", {
    params: { path: { namespace } },
    body: {
      name: "Portal_Bad",
      worker_groups: [{ name: "cpu", replicas: 1, min_replicas: 2 }],
      head: { memory: "lots" },
    },
  });
  check(invalid.error !== undefined, "an invalid config is refused");
  const fields = (invalid.error.violations ?? []).map((v) => v.field).sort();
  check(invalid.error.code === "invalid_argument", problem(invalid.error));
  check(
    fields.join(",") === "head.memory,name,worker_groups[0].min_replicas",
    `every violation at its path: ${fields.join(",")}`,
  );
  ok("invalid config", problem(invalid.error));

  await create(train);
  await create({ name: "portal-a" });
  await create({ name: "portal-b", worker_groups: [] });
  ok("create", "portal-train, portal-a, portal-b");

  const duplicate = await api.POST("/v1/namespaces/{namespace}/clusters", {
    params: { path: { namespace } },
    body: { name: "portal-a" },
  });
  check(duplicate.error !== undefined && duplicate.error.code === "already_exists", "a second portal-a conflicts");
  ok("duplicate", problem(duplicate.error));

  const names: string[] = [];
  let pageToken: string | undefined;
  let pages = 0;
  do {
    const page = await api.GET("/v1/namespaces/{namespace}/clusters", {
      params: { path: { namespace }, query: pageToken === undefined ? { page_size: 2 } : { page_size: 2, page_token: pageToken } },
    });
    check(page.data !== undefined, `list page ${pages + 1}`);
    check(page.data.clusters.length <= 2, "pages hold at most page_size clusters");
    names.push(...page.data.clusters.map((c) => c.name));
    pageToken = page.data.next_page_token ?? undefined;
    pages += 1;
  } while (pageToken !== undefined && pages < 10);
  check(pages === 2, `three clusters in two pages of two, not ${pages}`);
  check(names.join(",") === "portal-a,portal-b,portal-train", `listed ${names.join(",")}`);
  ok("list (paged)", `${names.join(", ")} in ${pages} pages`);

  const cluster = { namespace, name: "portal-train" };
  const got = await api.GET("/v1/namespaces/{namespace}/clusters/{name}", { params: { path: cluster } });
  check(got.data !== undefined, "get");
  check(got.data.autoscaling_enabled, "autoscaling is on");
  ok("get", `${got.data.name}: ${got.data.status}, ${got.data.num_workers} workers`);

  const waited = await api.GET("/v1/namespaces/{namespace}/clusters/{name}/wait", {
    params: { path: cluster, query: { timeout_seconds: 120 } },
  });
  check(waited.data !== undefined, `wait answered ${waited.response.status}`);
  check(isSettled(waited.data.status) && waited.data.status === "ready", `ready, not ${waited.data.status}`);
  ok("wait", `${waited.data.name} is ${waited.data.status}`);

  const details = await api.GET("/v1/namespaces/{namespace}/clusters/{name}/details", { params: { path: cluster } });
  check(details.data !== undefined, "describe");
  const groups = details.data.worker_groups.map((g) => `${g.name}(${g.replicas}, ${g.cpus} CPU, ${g.gpus} GPU)`);
  check(details.data.services.includes("notebook") && !details.data.services.includes("code-server"), "services");
  check(details.data.head.cpus === "2", `head cpus ${details.data.head.cpus}`);
  ok("describe", `head ${details.data.head.cpus} CPU/${details.data.head.memory}; ${groups.join(", ")}; services ${details.data.services.join(", ")}`);

  const scaled = await api.POST("/v1/namespaces/{namespace}/clusters/{name}/scale", {
    params: { path: cluster },
    body: { worker_group: "cpu", replicas: 2 },
  });
  check(scaled.data !== undefined, `scale answered ${scaled.response.status}`);
  check(scaled.data.num_workers === 2, `two workers wanted, not ${scaled.data.num_workers}`);
  ok("scale", `cpu group to ${scaled.data.num_workers}`);

  const tooMany = await api.POST("/v1/namespaces/{namespace}/clusters/{name}/scale", {
    params: { path: cluster },
    body: { worker_group: "cpu", replicas: 1, min_replicas: 2 },
  });
  check(tooMany.error !== undefined && tooMany.error.code === "invalid_argument", "min above replicas is refused");
  check((tooMany.error.violations ?? []).some((v) => v.field.endsWith("min_replicas")), problem(tooMany.error));
  ok("scale refused", problem(tooMany.error));

  // Cost control: park the cluster and bring it back; keeping it needs a
  // lifecycle policy, which this namespace has none of (409, said why).
  const suspended = await api.POST("/v1/namespaces/{namespace}/clusters/{name}/suspend", { params: { path: cluster } });
  check(suspended.data !== undefined, `suspend answered ${suspended.response.status}`);
  check(suspended.data.suspended && ["suspending", "suspended"].includes(suspended.data.status), `suspend: ${suspended.data.status}`);
  const resumed = await api.POST("/v1/namespaces/{namespace}/clusters/{name}/resume", { params: { path: cluster } });
  check(resumed.data !== undefined && !resumed.data.suspended, `resume answered ${resumed.response.status}`);
  ok("suspend and resume", `${suspended.data.status}, then running again`);
  const kept = await api.POST("/v1/namespaces/{namespace}/clusters/{name}/keep", {
    params: { path: cluster },
    body: { for: "4h" },
  });
  check(kept.error !== undefined && kept.error.code === "failed_precondition", `keep answered ${kept.response.status}`);
  ok("keep without a policy", problem(kept.error));

  for (const name of ["portal-train", "portal-a", "portal-b"]) {
    const deleted = await api.DELETE("/v1/namespaces/{namespace}/clusters/{name}", {
      params: { path: { namespace, name } },
    });
    check(deleted.response.status === 204, `delete ${name} answered ${deleted.response.status}`);
  }
  ok("delete", "portal-train, portal-a, portal-b");

  const missing = await api.GET("/v1/namespaces/{namespace}/clusters/{name}", {
    params: { path: { namespace, name: "portal-never" } },
  });
  check(missing.error !== undefined && missing.error.code === "not_found", "an unknown cluster is 404");
  ok("not found", problem(missing.error));
}

main().then(
  () => console.log("portal flows: all ok"),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : String(e));
    process.exitCode = 1;
  },
);
