//! Authorization: a role × action × namespace matrix generated from random
//! team mappings, checked against an independent reference model on both
//! transports; and reloads of the mapping.

use std::{collections::BTreeMap, time::Duration};

use krayne_proto::v1::{self as pb, create_cluster_request::Source};
use krayne_tests::{Env, EnvOptions};
use proptest::{
    prelude::*,
    strategy::ValueTree as _,
    test_runner::{Config, TestRunner},
};
use serde_json::{Value, json};
use tonic::Code;

const NAMESPACES: [&str; 5] = ["ns-a", "ns-b", "team-x", "team-y", "other"];
const PATTERNS: [&str; 7] = ["ns-a", "ns-b", "team-*", "team-x", "*", "other", "absent"];
const GROUPS: [&str; 4] = ["g1", "g2", "g3", "gadmin"];
const SUBJECTS: [&str; 3] = ["u1@x", "u2@x", "u3@x"];

#[derive(Debug, Clone)]
struct Team {
    groups: Vec<&'static str>,
    subjects: Vec<&'static str>,
    grants: BTreeMap<&'static str, u8>,
}

#[derive(Debug, Clone)]
struct Model {
    admin_groups: Vec<&'static str>,
    teams: Vec<Team>,
    callers: Vec<(&'static str, Vec<&'static str>)>,
}

fn subset(pool: &'static [&'static str]) -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(pool, 0..=pool.len())
}

fn model() -> impl Strategy<Value = Model> {
    let team = (
        subset(&GROUPS[..3]),
        subset(&SUBJECTS),
        proptest::collection::btree_map(proptest::sample::select(&PATTERNS[..]), 1u8..=3, 0..4),
    )
        .prop_map(|(groups, subjects, grants)| Team {
            groups,
            subjects,
            grants,
        });
    let callers = SUBJECTS.map(|s| subset(&GROUPS).prop_map(move |g| (s, g)));
    (subset(&GROUPS[3..]), proptest::collection::vec(team, 1..4), callers).prop_map(|(admin_groups, teams, callers)| {
        Model {
            admin_groups,
            teams,
            callers: callers.to_vec(),
        }
    })
}

fn role_name(r: u8) -> &'static str {
    ["", "viewer", "editor", "admin"][usize::from(r)]
}

impl Model {
    fn yaml(&self) -> String {
        let teams: Vec<Value> = self
            .teams
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let ns: serde_json::Map<String, Value> =
                    t.grants.iter().map(|(p, r)| ((*p).to_owned(), json!(role_name(*r)))).collect();
                json!({"name": format!("t{i}"), "members": {"groups": t.groups, "subjects": t.subjects}, "namespaces": ns})
            })
            .collect();
        json!({"admins": {"groups": self.admin_groups}, "teams": teams}).to_string()
    }

    /// The reference: written apart from the server's code, on purpose.
    fn role(&self, subject: &str, groups: &[&str], namespace: &str) -> u8 {
        if groups.iter().any(|g| self.admin_groups.contains(g)) {
            return 3;
        }
        let mut best = 0;
        for team in &self.teams {
            let member = team.subjects.contains(&subject) || team.groups.iter().any(|g| groups.contains(g));
            if !member {
                continue;
            }
            for (pattern, role) in &team.grants {
                let covers = match pattern.strip_suffix('*') {
                    Some(prefix) => namespace.starts_with(prefix),
                    None => *pattern == namespace,
                };
                if covers {
                    best = best.max(*role);
                }
            }
        }
        best
    }
}

async fn check(model: &Model) {
    let mut options = EnvOptions {
        teams: model.yaml(),
        ..EnvOptions::default()
    };
    options.sandbox.namespaces = NAMESPACES.map(str::to_owned).to_vec();
    let env = Env::start_with(options).await;
    for (subject, groups) in &model.callers {
        let token = env.token(subject, groups);
        let rest = env.rest(&token);
        let mut grpc = env.grpc(&token).await;
        let me = rest.get("/v1/whoami").await.expect(200);
        // whoami lists what the caller's grants reach; a global admin's
        // every namespace is in the namespaces listing (and counted).
        let listed = if me.body["global_admin"] == true {
            let all = rest.get("/v1/namespaces?page_size=1000").await.expect(200);
            assert_eq!(
                me.body["namespace_count"],
                all.body["namespaces"].as_array().unwrap().len(),
                "{}",
                me.text
            );
            all.body
        } else {
            assert_eq!(
                me.body["namespace_count"],
                me.body["namespaces"].as_array().unwrap().len()
            );
            me.body.clone()
        };
        let seen: BTreeMap<String, String> = listed["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["namespace"].as_str().unwrap().to_owned(),
                    n["role"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        for ns in NAMESPACES {
            let want = model.role(subject, groups, ns);
            let case = format!(
                "{subject} {groups:?} on {ns} (model: {})\n{}",
                role_name(want),
                model.yaml()
            );
            assert_eq!(
                seen.get(ns).map(String::as_str).unwrap_or(""),
                role_name(want),
                "whoami: {case}"
            );

            let read = rest.get(&format!("/v1/namespaces/{ns}/clusters")).await;
            assert_eq!(read.status, if want >= 1 { 200 } else { 403 }, "REST read: {case}");
            let write = rest
                .post(
                    &format!("/v1/namespaces/{ns}/clusters?dry_run=true"),
                    &json!({"name": "probe"}),
                )
                .await;
            assert_eq!(write.status, if want >= 2 { 200 } else { 403 }, "REST write: {case}");

            let list = pb::ListClustersRequest {
                namespace: ns.into(),
                page_size: 0,
                page_token: String::new(),
            };
            let code = grpc.clusters.list_clusters(list).await.err().map(|s| s.code());
            assert_eq!(
                code,
                if want >= 1 { None } else { Some(Code::PermissionDenied) },
                "gRPC read: {case}"
            );
            let yaml = format!("name: probe\nnamespace: {ns}\n");
            let create = pb::CreateClusterRequest {
                source: Some(Source::ConfigYaml(yaml)),
                dry_run: true,
                field_validation: 0,
                queue: None,
            };
            let code = grpc.clusters.create_cluster(create).await.err().map(|s| s.code());
            assert_eq!(
                code,
                if want >= 2 { None } else { Some(Code::PermissionDenied) },
                "gRPC write: {case}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_mappings_match_the_reference_model() {
    let mut runner = TestRunner::new(Config {
        cases: 6,
        ..Config::default()
    });
    let strategy = model();
    for _ in 0..6 {
        let model = strategy.new_tree(&mut runner).unwrap().current();
        check(&model).await;
    }
}

async fn eventually_status(env: &Env, token: &str, path: &str, want: u16) {
    for _ in 0..250 {
        if env.rest(token).get(path).await.status == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    panic!("{path} never answered {want}");
}

const GRANTED: &str = r#"
admins: { groups: [platform-admins] }
teams:
  - name: ml-research
    members: { groups: [ml-research] }
    namespaces: { ml-team: editor, other-team: viewer }
"#;

#[tokio::test]
async fn a_changed_mapping_applies_within_seconds_even_through_symlink_swaps() {
    let env = Env::start().await;
    let alice = env.alice();
    env.rest(&alice)
        .get("/v1/namespaces/other-team/clusters")
        .await
        .expect(403);
    // Lay the file out as a ConfigMap mount: teams.yaml -> ..data/teams.yaml.
    let file = env.teams_file();
    let dir = file.parent().unwrap().to_owned();
    let version = |n: u32, text: &str| {
        let v = dir.join(format!("..v{n}"));
        std::fs::create_dir_all(&v).unwrap();
        std::fs::write(v.join("teams.yaml"), text).unwrap();
        let tmp = dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(format!("..v{n}"), &tmp).unwrap();
        std::fs::rename(&tmp, dir.join("..data")).unwrap();
    };
    version(1, krayne_tests::TEAMS);
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink("..data/teams.yaml", &file).unwrap();
    version(2, GRANTED);
    eventually_status(&env, &alice, "/v1/namespaces/other-team/clusters", 200).await;
    let log = env.server.log.lock().unwrap().clone();
    assert!(
        log.contains("team mapping reloaded") && log.contains("sha256="),
        "{log}"
    );
}

#[tokio::test]
async fn an_invalid_mapping_keeps_the_last_good_one() {
    let env = Env::start().await;
    let alice = env.alice();
    std::fs::write(
        env.teams_file(),
        "teams:\n  - name: ml-research\n    namespaces: {ml-team: owner}\n",
    )
    .unwrap();
    for _ in 0..250 {
        if env.server.log.lock().unwrap().contains("team mapping not reloaded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert!(env.server.log.lock().unwrap().contains("keeping the last good one"));
    env.rest(&alice)
        .get("/v1/namespaces/ml-team/clusters")
        .await
        .expect(200);
    let ops = krayne_tests::Rest::new(&format!("http://{}", env.server.ops), None);
    let metrics = ops.get("/metrics").await.expect(200);
    assert!(
        metrics
            .text
            .contains("krayne_team_mapping_reloads_total{outcome=\"error\"}"),
        "{}",
        metrics.text
    );
}

#[tokio::test]
async fn sighup_reloads_the_mapping() {
    let options = EnvOptions {
        server_args: vec!["--teams-watch".into(), "false".into()],
        ..EnvOptions::default()
    };
    let env = Env::start_with(options).await;
    let alice = env.alice();
    std::fs::write(env.teams_file(), GRANTED).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    env.rest(&alice)
        .get("/v1/namespaces/other-team/clusters")
        .await
        .expect(403);
    env.server.signal("HUP");
    eventually_status(&env, &alice, "/v1/namespaces/other-team/clusters", 200).await;
}

#[tokio::test]
async fn token_mint_makes_tokens_the_server_accepts() {
    let env = Env::start().await;
    let out = std::process::Command::new(krayne_tests::server_binary())
        .args(["token", "mint", "--key"])
        .arg(env.secret_file())
        .args(["--sub", "alice@example.com", "--groups", "ml-research", "--ttl", "1h"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let me = env.rest(&token).get("/v1/whoami").await.expect(200);
    assert_eq!(me.body["teams"], json!(["ml-research"]));
}

#[tokio::test]
async fn an_invalid_mapping_at_start_up_refuses_to_start() {
    let stderr = krayne_tests::serve_refusal("teams:\n  - name: a\n    namespaces: {x: owner}\n", &[]);
    assert!(stderr.contains("--teams-file") && stderr.contains("owner"), "{stderr}");
}
