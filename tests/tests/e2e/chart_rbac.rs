//! The chart's RBAC is exactly what the server uses: every REST operation is
//! driven against the sandbox, the sandbox's request log gives each
//! Kubernetes request's RBAC attributes, and those must equal the rules in
//! `charts/krayne/files/rbac/` — nothing missing, nothing extra.

use std::{collections::BTreeSet, time::Duration};

use krayne_server::sandbox::Access;
use krayne_tests::{Env, EnvOptions, Rest, TEAMS, chart};
use serde_json::{Value, json};

/// `group/resource[/subresource]:verb` (`core` for the core group), or
/// `nonResource:/path:verb`.
type Permission = String;

fn group_name(group: &str) -> &str {
    if group.is_empty() { "core" } else { group }
}

fn permissions_of(rules: &Value) -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    for rule in rules.as_array().expect("a list of rules") {
        let strings = |key: &str| -> Vec<String> {
            rule[key]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default()
        };
        for verb in strings("verbs") {
            assert_ne!(verb, "*", "no wildcard verbs");
            for url in strings("nonResourceURLs") {
                out.insert(format!("nonResource:{url}:{verb}"));
            }
            for group in strings("apiGroups") {
                for resource in strings("resources") {
                    assert_ne!(resource, "*", "no wildcard resources");
                    out.insert(format!("{}/{resource}:{verb}", group_name(&group)));
                }
            }
        }
    }
    out
}

fn permission(access: &Access) -> Permission {
    match access {
        Access::Resource {
            group,
            resource,
            subresource,
            verb,
            ..
        } => match subresource {
            Some(sub) => format!("{}/{resource}/{sub}:{verb}", group_name(group)),
            None => format!("{}/{resource}:{verb}", group_name(group)),
        },
        Access::NonResource { path, verb } => format!("nonResource:{path}:{verb}"),
    }
}

/// Opens a WebSocket tunnel at `path` as the admin and reads the SSH
/// stand-in's banner through it.
async fn open_tunnel(env: &Env, path: &str) {
    use futures::StreamExt as _;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let mut request = format!("ws://{}{path}", env.server.api).into_client_request().unwrap();
    let bearer = format!("Bearer {}", env.admin()).parse().unwrap();
    request.headers_mut().insert("authorization", bearer);
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("a tunnel");
    let banner = socket.next().await.expect("a frame").expect("no error");
    assert!(banner.into_data().starts_with(b"SSH-2.0-"));
}

/// Calls every REST operation once, in an order that makes each succeed,
/// and returns the `(method, path template)` pairs it called.
async fn drive_every_operation(env: &Env, admin: &Rest) -> BTreeSet<(String, String)> {
    let ns = "/v1/namespaces/{namespace}/clusters";
    let one = "/v1/namespaces/{namespace}/clusters/{name}";
    let concrete = |template: &str| template.replace("{namespace}", "ml-team").replace("{name}", "rbac");
    let spec = json!({"name": "rbac", "worker_groups": [{"name": "cpu", "replicas": 1, "max_replicas": 3}]});
    let mut called = BTreeSet::new();
    let mut call = |method: &str, template: &str| {
        called.insert((method.to_owned(), template.to_owned()));
        concrete(template)
    };
    admin.get(&call("get", "/v1/version")).await.expect(200);
    admin.get(&call("get", "/.well-known/krayne")).await.expect(200);
    admin.get(&call("get", "/v1/whoami")).await.expect(200);
    admin.get(&call("get", "/v1/namespaces")).await.expect(200);
    admin
        .get(&call("get", "/v1/namespaces/{namespace}/quota"))
        .await
        .expect(200);
    admin
        .get(&call("get", "/v1/namespaces/{namespace}/usage"))
        .await
        .expect(200);
    admin.get(&call("get", "/v1/usage")).await.expect(200);
    admin
        .get(&format!("{}?window=7d", call("get", "/v1/usage/allocation")))
        .await
        .expect(200);
    admin
        .post(&format!("{}?dry_run=true", concrete(ns)), &spec)
        .await
        .expect(200);
    admin.post(&call("post", ns), &spec).await.expect(201);
    // The same name again: refused, its staged token Secret deleted.
    admin.post(&concrete(ns), &spec).await.expect(409);
    admin
        .get(&format!("{}?timeout_seconds=60", call("get", &format!("{one}/wait"))))
        .await
        .expect(200);
    // A round of the companion keeper over the new cluster.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    admin.get(&call("get", one)).await.expect(200);
    admin.get(&call("get", ns)).await.expect(200);
    admin.get(&call("get", "/v1/clusters")).await.expect(200);
    admin.get(&call("get", &format!("{one}/details"))).await.expect(200);
    admin.get(&call("get", &format!("{one}/services"))).await.expect(200);
    admin
        .post(&call("post", &format!("{one}/ray-credentials")), &json!({}))
        .await
        .expect(200);
    admin.get(&call("get", &format!("{one}/logs"))).await.expect(200);
    admin.get(&call("get", &format!("{one}/ray-logs"))).await.expect(200);
    admin
        .get(&format!(
            "{}?file=raylet.out",
            call("get", &format!("{one}/ray-logs/file"))
        ))
        .await
        .expect(200);
    open_tunnel(
        env,
        &call("get", &format!("{one}/services/{{service}}/tunnel")).replace("{service}", "ssh"),
    )
    .await;
    let link = admin
        .post(
            &call("post", &format!("{one}/services/{{service}}/sessions")).replace("{service}", "dashboard"),
            &json!({}),
        )
        .await
        .expect(201);
    let url = link.body["sign_in_url"].as_str().expect("a sign-in link");
    let sign_in =
        call("get", &format!("{one}/services/{{service}}/sessions/sign-in")).replace("{service}", "dashboard");
    let query = url.split_once('?').expect("a ticket").1;
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let signed_in = browser
        .get(format!("{}{sign_in}?{query}", env.url()))
        .send()
        .await
        .expect("the sign-in answers");
    assert_eq!(signed_in.status().as_u16(), 303);
    admin
        .post(
            &call("post", &format!("{one}/scale")),
            &json!({"worker_group": "cpu", "replicas": 2}),
        )
        .await
        .expect(200);
    drive_jobs(env, admin, &mut call).await;
    drive_rayjobs(admin, &mut call).await;
    for verb in ["suspend", "resume"] {
        admin
            .post(&call("post", &format!("{one}/{verb}")), &json!({}))
            .await
            .expect(200);
    }
    // Kept where the namespace's policy allows it; else refused (409).
    let kept = admin
        .post(&call("post", &format!("{one}/keep")), &json!({"for": "10m"}))
        .await;
    assert!([200, 409].contains(&kept.status), "{}", kept.text);
    admin.get(&call("get", "/v1/audit")).await.expect(200);
    admin.delete(&call("delete", one)).await.expect(204);
    let ops = Rest::new(&format!("http://{}", env.server.ops), None);
    ops.get("/readyz").await.expect(200);
    called
}

/// other-team's quota, where [`drive_rayjobs`] makes a run wait in line.
const QUEUE_QUOTA: &str = "quotas:\n  other-team: { clusters: 1 }\n";

/// Every RayJob operation once: a dry run, a create, a list, a read, its
/// log asked too soon, and a delete; and a run that waits in other-team's
/// line until the admitter admits it (a patch of the RayJob).
async fn drive_rayjobs(admin: &Rest, call: &mut impl FnMut(&str, &str) -> String) {
    let other = "/v1/namespaces/other-team";
    admin
        .post(&format!("{other}/clusters"), &json!({"name": "holder"}))
        .await
        .expect(201);
    let waits = json!({"name": "waits", "entrypoint": "echo rbac", "queue": true});
    admin.post(&format!("{other}/rayjobs"), &waits).await.expect(202);
    admin.delete(&format!("{other}/clusters/holder")).await.expect(204);
    let started = std::time::Instant::now();
    while admin.get(&format!("{other}/rayjobs/waits")).await.expect(200).body["state"] == "queued" {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the run was never admitted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin.delete(&format!("{other}/rayjobs/waits")).await.expect(204);
    let ns = "/v1/namespaces/{namespace}/rayjobs";
    let one = "/v1/namespaces/{namespace}/rayjobs/{name}";
    let run = json!({"name": "rbac", "entrypoint": "echo rbac"});
    admin
        .post(&format!("{}?dry_run=true", call("post", ns)), &run)
        .await
        .expect(200);
    admin.post(&call("post", ns), &run).await.expect(201);
    admin.get(&call("get", ns)).await.expect(200);
    admin.get(&call("get", one)).await.expect(200);
    // Not started yet: krayne reads the RayJob, and says so.
    admin.get(&call("get", &format!("{one}/logs"))).await.expect(409);
    admin.delete(&call("delete", one)).await.expect(204);
}

/// Every job operation once: a package uploaded and checked, a job
/// submitted, read, listed, its log read, stopped once it has ended, and
/// deleted.
async fn drive_jobs(env: &Env, admin: &Rest, call: &mut impl FnMut(&str, &str) -> String) {
    let one = "/v1/namespaces/{namespace}/clusters/{name}";
    let package =
        call("put", &format!("{one}/packages/{{package}}")).replace("{package}", "_ray_pkg_00000000000000aa.zip");
    let uploaded = reqwest::Client::new()
        .put(format!("{}{package}", env.url()))
        .bearer_auth(env.admin())
        .body(b"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0".to_vec())
        .send()
        .await
        .expect("an upload");
    assert_eq!(uploaded.status().as_u16(), 200);
    admin
        .get(&call("get", &format!("{one}/packages/{{package}}")).replace("{package}", "_ray_pkg_00000000000000aa.zip"))
        .await
        .expect(204);
    let jobs = call("post", &format!("{one}/jobs"));
    admin
        .post(&jobs, &json!({"entrypoint": "echo rbac", "submission_id": "rbac-job"}))
        .await
        .expect(201);
    admin.get(&call("get", &format!("{one}/jobs"))).await.expect(200);
    let job = call("get", &format!("{one}/jobs/{{id}}")).replace("{id}", "rbac-job");
    for _ in 0..100 {
        if admin.get(&job).await.expect(200).body["status"] == "SUCCEEDED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin
        .get(&call("get", &format!("{one}/jobs/{{id}}/logs")).replace("{id}", "rbac-job"))
        .await
        .expect(200);
    admin
        .post(
            &call("post", &format!("{one}/jobs/{{id}}/stop")).replace("{id}", "rbac-job"),
            &json!({}),
        )
        .await
        .expect(200);
    admin
        .delete(&call("delete", &format!("{one}/jobs/{{id}}")).replace("{id}", "rbac-job"))
        .await
        .expect(204);
}

/// The RBAC attributes of every Kubernetes request a server with
/// `server_args` makes while every REST operation is called once.
async fn accesses_with(server_args: &[&str]) -> Vec<Access> {
    let reaping = server_args == LIFECYCLE;
    // The companion keeper goes round every second, so its reads are
    // among those made.
    let keeper = ["--companions-interval-seconds", "1"];
    let env = Env::start_with(EnvOptions {
        server_args: server_args.iter().chain(&keeper).map(|a| (*a).to_owned()).collect(),
        // With the reaper on, a policy that warns 5 s after a create and
        // acts only an hour later, so the drive's clusters stay.
        // other-team's quota holds one cluster: a run waits in its line.
        teams: if reaping {
            format!(
                "{TEAMS}{QUEUE_QUOTA}lifecycle:\n  ml-team: {{ max_lifetime: 1h, warn_before: 59m55s, keep_max: 1h }}\n"
            )
        } else {
            format!("{TEAMS}{QUEUE_QUOTA}")
        },
        ..EnvOptions::default()
    })
    .await;
    let admin = env.rest(&env.admin());
    let called = drive_every_operation(&env, &admin).await;
    if reaping {
        // A warning, with its Event on the RayCluster.
        admin
            .post("/v1/namespaces/ml-team/clusters", &json!({"name": "warned"}))
            .await
            .expect(201);
        let started = std::time::Instant::now();
        while admin
            .get("/v1/namespaces/ml-team/clusters/warned")
            .await
            .expect(200)
            .body["lifecycle_warned_at"]
            .is_null()
        {
            assert!(started.elapsed() < Duration::from_secs(30), "never warned");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let events = reqwest::get(format!("{}/api/v1/namespaces/ml-team/events", env.sandbox.url()))
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        let posted = events["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "LifecycleWarning" && e["involvedObject"]["name"] == "warned");
        assert!(posted, "{events}");
    }
    if server_args == SERVICE_ACCOUNT_TOKENS {
        // A pipeline's call, as its ServiceAccount.
        let token = env.service_account_token("ml-team", "default", None).await;
        env.rest(&token).get("/v1/whoami").await.expect(200);
    }
    let spec = env.anonymous().get("/openapi.json").await.expect(200).body;
    let mut operations = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            operations.insert((method.clone(), path.clone()));
        }
    }
    assert_eq!(called, operations, "the drive covers every REST operation");
    env.sandbox
        .requests()
        .iter()
        // The pipeline's own TokenRequest above is not the server's.
        .filter(|r| !r.uri.ends_with("/serviceaccounts/default/token"))
        .flat_map(|r| r.accesses())
        .collect()
}

/// ServiceAccount tokens trusted (`auth.serviceAccountTokens`), each
/// reviewed by the API server.
const SERVICE_ACCOUNT_TOKENS: &[&str] = &["--service-account-tokens", "--allow-hs256-with-jwks"];

/// The chart's default upstream, which still reaches the daemons on a
/// head's loopback through `pods/portforward`.
const DIRECT: &[&str] = &["--service-upstream", "direct"];

/// The chart's default Role mode (`rbac.namespaces`): the cache watches
/// only the namespaces the Roles are in, as the chart configures it. With
/// `rbac.clusterWide` one ClusterRole holds every rule, which the union
/// below covers.
const ROLE_MODE: &[&str] = &["--cache-namespaces", "default,ml-team,shared-data,other-team"];
/// The lifecycle reaper on (`server.lifecycle.mode`), electing its leader
/// through a Lease in the release's namespace, as the chart configures it.
const LIFECYCLE: &[&str] = &[
    "--lifecycle-policy-settle",
    "0s",
    "--lifecycle",
    "act",
    "--lifecycle-interval-seconds",
    "1",
    "--lifecycle-lease-namespace",
    "default",
];

#[tokio::test]
async fn chart_rbac_is_exactly_what_the_server_calls() {
    let namespaced = permissions_of(&chart::yaml("files/rbac/namespaced.yaml"));
    let cluster = permissions_of(&chart::yaml("files/rbac/cluster.yaml"));
    // Granted in both upstream modes: the notebook, code-server and sshd
    // listen on a head's loopback, which only a port-forward reaches.
    let port_forward = permissions_of(&chart::yaml("files/rbac/portforward.yaml"));
    // The Lease: granted whenever usage accounting is on (the default) or
    // the reaper is.
    let lease = permissions_of(&chart::yaml("files/rbac/lifecycle.yaml"));
    let events = permissions_of(&chart::yaml("files/rbac/lifecycle-events.yaml"));
    let lifecycle: BTreeSet<Permission> = lease.union(&events).cloned().collect();
    let token_review = permissions_of(&chart::yaml("files/rbac/token-review.yaml"));
    // Kubernetes binds its issuer's discovery documents to every
    // ServiceAccount (`system:service-account-issuer-discovery`).
    let issuer_discovery: BTreeSet<Permission> = [
        "nonResource:/.well-known/openid-configuration:get",
        "nonResource:/openid/v1/jwks:get",
    ]
    .map(str::to_owned)
    .into();
    // Events are granted whatever the mode (chart 0.17.0): the admitter
    // posts them as the reaper does.
    let base: BTreeSet<Permission> = namespaced
        .union(&cluster)
        .chain(&lease)
        .chain(&events)
        .cloned()
        .collect();
    let with_port_forward: BTreeSet<Permission> = base.union(&port_forward).cloned().collect();
    let with_token_review: BTreeSet<Permission> = with_port_forward
        .union(&token_review)
        .chain(&issuer_discovery)
        .cloned()
        .collect();

    let mut used = BTreeSet::new();
    for (mode, args) in [
        ("cached", &[][..]),
        ("read-through", &["--cache", "false"][..]),
        ("role mode", ROLE_MODE),
        ("direct upstream", DIRECT),
        ("lifecycle", LIFECYCLE),
        ("service-account tokens", SERVICE_ACCOUNT_TOKENS),
    ] {
        let granted = if args == SERVICE_ACCOUNT_TOKENS {
            &with_token_review
        } else {
            &with_port_forward
        };
        let accesses = accesses_with(args).await;
        let here: BTreeSet<Permission> = accesses.iter().map(permission).collect();
        let missing: Vec<_> = here.difference(granted).collect();
        assert!(missing.is_empty(), "{mode}: used but not granted: {missing:?}");
        if args == ROLE_MODE {
            // Namespaced rules live in Roles there: the server must use
            // them only inside a namespace, and the cluster rules never.
            for access in &accesses {
                let p = permission(access);
                let in_namespace = matches!(access, Access::Resource { namespace: Some(_), .. });
                if namespaced.contains(&p) || port_forward.contains(&p) || lifecycle.contains(&p) {
                    assert!(in_namespace, "{p} is in a Role but was used cluster-wide: {access:?}");
                } else {
                    assert!(
                        !in_namespace,
                        "{p} is in the ClusterRole only but was used in a namespace"
                    );
                }
            }
        }
        used.extend(here);
    }
    let every_grant: BTreeSet<Permission> = with_port_forward.union(&token_review).cloned().collect();
    let unused: Vec<_> = every_grant.difference(&used).collect();
    assert!(unused.is_empty(), "granted but never used: {unused:?}");

    let rbac = chart::read("templates/rbac.yaml");
    for file in [
        "files/rbac/namespaced.yaml",
        "files/rbac/cluster.yaml",
        "files/rbac/portforward.yaml",
        "files/rbac/lifecycle.yaml",
        "files/rbac/lifecycle-events.yaml",
        "files/rbac/token-review.yaml",
        "files/rbac/kueue.yaml",
    ] {
        assert!(
            rbac.contains(&format!(".Files.Get \"{file}\"")),
            "rbac.yaml uses {file}"
        );
    }
    // The Lease's Role comes with usage accounting (on by default) as with
    // the reaper, and the server is told which it runs.
    assert!(
        rbac.contains(r#"{{- if or (ne .Values.server.lifecycle.mode "off") .Values.server.usageAccounting }}"#),
        "the Lease must be granted whenever usage accounting is on"
    );
    assert_eq!(chart::yaml("values.yaml")["server"]["usageAccounting"], true);
    assert!(
        chart::read("templates/configmap.yaml")
            .contains("KRAYNE_USAGE_ACCOUNTING: {{ .Values.server.usageAccounting | quote }}")
    );
    // Role mode limits the cache to the Roles' namespaces: a file of a
    // ConfigMap of their own (outside the pods' checksum), one a line.
    let settings = chart::read("templates/configmap.yaml");
    assert!(
        settings.contains("{{- if include \"krayne.namespacesOn\" . }}")
            && settings.contains("KRAYNE_CACHE_NAMESPACES_FILE: /etc/krayne/namespaces/namespaces"),
        "Role mode must limit the cache to the Roles' namespaces"
    );
    let namespaces = chart::read("templates/namespaces-configmap.yaml");
    assert!(namespaces.contains(r#"namespaces: {{ printf "%s\n" (join "\n" .Values.rbac.namespaces) | quote }}"#));
    let helpers = chart::read("templates/_helpers.tpl");
    assert!(helpers.contains("{{- if and (not .Values.rbac.clusterWide) .Values.rbac.namespaces }}true{{ end }}"));
}

/// Issue 54, item 1: the reaper under exactly the chart's default RBAC —
/// its Roles in the namespaces they name, the lifecycle's Role in the
/// release's namespace, the ClusterRole for the rest — enforced by the
/// sandbox as kube-apiserver enforces a ServiceAccount's bindings. A
/// cluster past its lifetime is warned, then suspended; nothing was asked
/// cluster-wide that only a Role grants.
#[tokio::test]
async fn the_reaper_acts_with_the_charts_namespaced_roles_alone() {
    let namespaced: BTreeSet<Permission> = permissions_of(&chart::yaml("files/rbac/namespaced.yaml"))
        .union(&permissions_of(&chart::yaml("files/rbac/portforward.yaml")))
        .chain(&permissions_of(&chart::yaml("files/rbac/lifecycle-events.yaml")))
        .cloned()
        .collect();
    let cluster = permissions_of(&chart::yaml("files/rbac/cluster.yaml"));
    let lease = permissions_of(&chart::yaml("files/rbac/lifecycle.yaml"));
    let role_namespaces: BTreeSet<String> = ["default", "ml-team", "shared-data", "other-team"]
        .map(str::to_owned)
        .into();
    let grants = krayne_server::sandbox::Grants::new(move |access| {
        let p = permission(access);
        match access {
            Access::Resource {
                namespace: Some(ns), ..
            } => (role_namespaces.contains(ns) && namespaced.contains(&p)) || (ns == "default" && lease.contains(&p)),
            Access::Resource { namespace: None, .. } | Access::NonResource { .. } => cluster.contains(&p),
        }
    });
    let mut options = EnvOptions {
        server_args: ROLE_MODE.iter().chain(LIFECYCLE).map(|a| (*a).to_owned()).collect(),
        teams: format!("{TEAMS}lifecycle:\n  ml-team: {{ max_lifetime: 8s, warn_before: 4s }}\n"),
        ..EnvOptions::default()
    };
    options.sandbox.grants = Some(grants.clone());
    let env = Env::start_with(options).await;
    let alice = env.rest(&env.alice());
    alice
        .post("/v1/namespaces/ml-team/clusters", &json!({"name": "short"}))
        .await
        .expect(201);
    let started = std::time::Instant::now();
    let mut warned = false;
    loop {
        let got = alice
            .get("/v1/namespaces/ml-team/clusters/short")
            .await
            .expect(200)
            .body;
        warned |= got["lifecycle_warned_at"].is_string();
        if got["suspended"] == true {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "never suspended: {got}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(warned, "warned before it was suspended");
    let refused: Vec<_> = env
        .sandbox
        .requests()
        .iter()
        .filter(|r| r.accesses().iter().any(|a| !grants.allows(a)))
        .map(|r| format!("{} {}", r.method, r.uri))
        .collect();
    assert!(refused.is_empty(), "refused by the chart's RBAC: {refused:?}");
    let ready = env.ops().get("/readyz").await.expect(200).body;
    assert!(ready["problems"].is_null(), "no RBAC problem reported: {ready}");
}
