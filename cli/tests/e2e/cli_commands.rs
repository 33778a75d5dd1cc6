//! Every command, as a table and as JSON.

use krayne_tests::Env;

use crate::support::{Krayne, words};

#[tokio::test]
async fn the_cluster_lifecycle_in_tables_and_json() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());

    let run = k
        .run(&[
            "create",
            "demo",
            "-n",
            "ml-team",
            "--workers",
            "2",
            "--wait",
            "--timeout",
            "60",
        ])
        .await;
    let lines = run.code(0).stdout().lines().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(words(&lines[0]), ["NAME", "NAMESPACE", "STATUS", "WORKERS", "AGE"]);
    assert_eq!(words(&lines[1])[..4], ["demo", "ml-team", "ready", "2/2"]);
    let created = k
        .run(&["create", "--no-wait", "json", "-n", "ml-team", "-o", "json"])
        .await
        .json();
    assert_eq!(created["name"], "json");
    assert_eq!(created["created_by"], "alice@example.com");

    let table = k.run(&["get", "-n", "ml-team"]).await.lines();
    let names: Vec<_> = table[1..].iter().map(|l| words(l)[0].to_owned()).collect();
    assert_eq!(names, ["demo", "json"]);
    let wide = k.run(&["get", "-n", "ml-team", "-o", "wide"]).await.lines();
    assert!(words(&wide[0]).contains(&"DASHBOARD"), "{wide:?}");
    let one = k.run(&["-o", "json", "get", "demo", "-n", "ml-team"]).await.json();
    assert_eq!(one["status"], "ready");
    assert_eq!(one["num_workers"], 2);
    let list = k.run(&["get", "-n", "ml-team", "--output", "json"]).await.json();
    assert_eq!(list.as_array().unwrap().len(), 2);
    let yaml = k
        .run(&["get", "demo", "-n", "ml-team", "-o", "yaml"])
        .await
        .code(0)
        .stdout();
    assert!(
        yaml.contains("name: demo\n") && yaml.contains("status: ready\n"),
        "{yaml}"
    );

    let describe = k.run(&["describe", "demo", "-n", "ml-team"]).await.code(0).stdout();
    for expected in [
        "Status:",
        "ready",
        "Worker groups:",
        "Pods:",
        "demo-head-",
        "Events:",
        "Dashboard:",
        "/v1/namespaces/ml-team/clusters/demo/services/dashboard/proxy/",
        "krayne ssh demo -n ml-team",
        "In-cluster:",
    ] {
        assert!(describe.contains(expected), "{expected} missing:\n{describe}");
    }
    let details = k.run(&["describe", "demo", "-n", "ml-team", "-o", "json"]).await.json();
    assert_eq!(details["pods"].as_array().unwrap().len(), 3);
    assert_eq!(details["worker_groups"][0]["name"], "worker");

    let scaled = k
        .run(&["scale", "demo", "-n", "ml-team", "-g", "worker", "-r", "3"])
        .await
        .lines();
    assert_eq!(words(&scaled[1])[3], "2/3");
    let scaled = k
        .run(&[
            "scale", "demo", "-n", "ml-team", "--min", "1", "--max", "5", "-o", "json",
        ])
        .await
        .json();
    assert_eq!(scaled["num_workers"], 3);
    let group = &k.run(&["describe", "demo", "-n", "ml-team", "-o", "json"]).await.json()["worker_groups"][0];
    assert_eq!(
        (group["min_replicas"].as_u64(), group["max_replicas"].as_u64()),
        (Some(1), Some(5))
    );

    let waited = k.run(&["wait", "demo", "-n", "ml-team", "--timeout", "60"]).await;
    let waited = waited.code(0);
    assert!(waited.stderr().contains("is ready"), "{}", waited.stderr());
    assert_eq!(words(waited.stdout().lines().nth(1).unwrap())[3], "3/3");
    let waited = k.run(&["wait", "demo", "-n", "ml-team", "-o", "json"]).await.json();
    assert_eq!(waited["ready_workers"], 3);

    // Suspend, then resume and wait: the same cluster, ready again.
    let suspended = k.run(&["suspend", "demo", "-n", "ml-team", "-o", "json"]).await;
    assert!(
        suspended.stderr().contains("krayne resume demo"),
        "{}",
        suspended.stderr()
    );
    let status = suspended.json()["status"].as_str().unwrap_or_default().to_owned();
    assert!(["suspending", "suspended"].contains(&status.as_str()), "{status}");
    let resumed = k
        .run(&["resume", "demo", "-n", "ml-team", "--wait", "--timeout", "60"])
        .await
        .code(0);
    assert!(resumed.stderr().contains("resumed"), "{}", resumed.stderr());
    assert_eq!(words(resumed.stdout().lines().nth(1).unwrap())[2..4], ["ready", "3/3"]);
    let refused = k
        .run(&["resume", "demo", "-n", "ml-team", "--timeout", "60"])
        .await
        .code(2);
    assert!(refused.stderr().contains("--wait"), "{}", refused.stderr());

    let deleted = k.run(&["delete", "demo", "-n", "ml-team", "--yes"]).await.code(0);
    assert!(deleted.stdout().is_empty());
    assert!(deleted.stderr().contains("deleted"));
    let deleted = k
        .run(&["delete", "json", "-n", "ml-team", "-y", "-o", "json"])
        .await
        .json();
    assert_eq!(deleted["deleted"], true);
    let empty = k.run(&["get", "-n", "ml-team"]).await.code(0);
    assert!(empty.stdout().is_empty());
    assert!(empty.stderr().contains("No clusters in namespace ml-team"));
    assert_eq!(
        k.run(&["get", "-n", "ml-team", "-o", "json"]).await.json(),
        serde_json::json!([])
    );
}

#[tokio::test]
async fn get_all_namespaces_shows_only_what_the_caller_may_see() {
    let env = Env::start().await;
    let admin = Krayne::new(&env, &env.admin());
    for (ns, name) in [("ml-team", "a"), ("other-team", "b"), ("shared-data", "c")] {
        admin.run(&["create", "--no-wait", name, "-n", ns]).await.code(0);
    }
    let all = admin.run(&["get", "-A"]).await.lines();
    let rows: Vec<_> = all[1..].iter().map(|l| words(l)[..2].join("/")).collect();
    assert_eq!(rows, ["a/ml-team", "b/other-team", "c/shared-data"]);
    let alice = Krayne::new(&env, &env.alice());
    let seen = alice.run(&["get", "--all-namespaces", "-o", "json"]).await.json();
    let seen: Vec<_> = seen
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(seen, ["a", "c"]);
    alice.run(&["get", "-A", "-n", "ml-team"]).await.code(2);
}

#[tokio::test]
async fn identity_and_audit_commands() {
    let env = Env::start().await;
    let alice = Krayne::new(&env, &env.alice());
    let whoami = alice.run(&["whoami"]).await.code(0).stdout();
    assert!(
        whoami.contains("Subject:") && whoami.contains("alice@example.com"),
        "{whoami}"
    );
    assert!(whoami.contains("ml-team") && whoami.contains("editor"), "{whoami}");
    let me = alice.run(&["whoami", "-o", "json"]).await.json();
    assert_eq!(me["subject"], "alice@example.com");
    assert_eq!(me["namespaces"][0]["role"], "editor", "as the docs and REST name it");

    let namespaces = alice.run(&["namespaces"]).await.lines();
    assert_eq!(
        words(&namespaces[0]),
        ["NAMESPACE", "ROLE", "VIA", "TEAMS", "QUOTA", "USED"]
    );
    assert_eq!(words(&namespaces[1]), ["ml-team", "editor", "ml-research", "-"]);
    assert_eq!(words(&namespaces[2]), ["shared-data", "viewer", "ml-research", "-"]);
    let namespaces = alice.run(&["namespaces", "-o", "json"]).await.json();
    assert_eq!(namespaces.as_array().unwrap().len(), 2);

    alice
        .run(&["create", "--no-wait", "audited", "-n", "ml-team"])
        .await
        .code(0);
    alice
        .run(&["delete", "audited", "-n", "ml-team", "--yes"])
        .await
        .code(0);
    let admin = Krayne::new(&env, &env.admin());
    let table = admin.run(&["audit", "-n", "ml-team", "--since", "1h"]).await.lines();
    assert_eq!(
        words(&table[0]),
        ["TIME", "ACTOR", "ACTION", "NAMESPACE", "CLUSTER", "OUTCOME"]
    );
    let actions: Vec<_> = table[1..].iter().map(|l| words(l)[2].to_owned()).collect();
    assert_eq!(actions, ["cluster.delete", "cluster.create"]);
    let events = admin
        .run(&[
            "audit",
            "--action",
            "cluster.create",
            "--actor",
            "alice@example.com",
            "-o",
            "json",
        ])
        .await
        .json();
    assert_eq!(events.as_array().unwrap().len(), 1);
    assert_eq!(events[0]["cluster"], "audited");
    assert_eq!(events[0]["outcome"], "succeeded");
    let limited = admin.run(&["audit", "--limit", "1", "-o", "json"]).await.json();
    assert_eq!(limited.as_array().unwrap().len(), 1);
    let wide = admin
        .run(&["audit", "-o", "wide", "--outcome", "succeeded"])
        .await
        .lines();
    assert!(words(&wide[0]).contains(&"REQUEST-ID"));
    let none = admin.run(&["audit", "--cluster", "never-existed"]).await.code(0);
    assert!(none.stderr().contains("No audit events match"));
}
