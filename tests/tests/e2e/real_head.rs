//! A real head's notebook through krayne (issue 38): Jupyter (PyPI
//! `notebook`, pinned; `.ci/run` installs it) started by the cluster's own
//! rendered `postStart` script, as the head runs it, in a network
//! namespace of its own — so it listens on the pod's loopback, not on any
//! address krayne could dial — and reached in both upstream modes: the
//! REST API, a kernel started by a bearer-token client (no `_xsrf`), a
//! kernel round trip over the proxied WebSocket; the notebook's page in
//! Chromium through a browser session is `portal::a_real_notebook_*`.

use std::{path::PathBuf, time::Duration};

use futures::{SinkExt as _, StreamExt as _};
use krayne_server::sandbox::RealDaemons;
use krayne_tests::{Env, EnvOptions};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest as _};

const NOTEBOOK: &str = "/v1/namespaces/ml-team/clusters/nb/services/notebook/proxy";

/// Where a pinned Jupyter is, when this machine can run it as a head's
/// (see [`krayne_tests::heads`]).
pub(crate) fn jupyter() -> Option<PathBuf> {
    krayne_tests::heads::jupyter()
}

/// A server in `mode` whose sandbox runs heads' own daemons from `bin`,
/// and cluster `nb` with the notebook on (SSH is `krayne ssh`'s test, in
/// the client's suite).
pub(crate) async fn with_a_real_notebook(bin: PathBuf, mode: &str) -> Env {
    let mut options = EnvOptions::with_args(&["--service-upstream", mode]);
    options.sandbox.real_daemons = Some(RealDaemons {
        path: vec![bin],
        image: Vec::new(),
    });
    let env = Env::start_with(options).await;
    let rest = env.rest(&env.alice());
    rest.post(
        "/v1/namespaces/ml-team/clusters",
        &json!({"name": "nb", "services": {"notebook": true, "code_server": false, "ssh": false}}),
    )
    .await
    .expect(201);
    rest.get("/v1/namespaces/ml-team/clusters/nb/wait?timeout_seconds=60")
        .await
        .expect(200);
    env
}

/// Jupyter's `/api`, once it answers (it takes seconds to start).
pub(crate) async fn jupyter_answers(env: &Env) -> Value {
    let rest = env.rest(&env.alice());
    for _ in 0..240 {
        let reply = rest.get(&format!("{NOTEBOOK}/api")).await;
        if reply.status == 200 {
            return reply.body;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("Jupyter never answered through the proxy");
}

/// A message of Jupyter's protocol on the kernel's `shell` channel.
fn execute(code: &str) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    json!({
        "header": {"msg_id": id, "username": "krayne", "session": uuid::Uuid::new_v4().to_string(),
                   "msg_type": "execute_request", "version": "5.3"},
        "parent_header": {}, "metadata": {}, "buffers": [], "channel": "shell",
        "content": {"code": code, "silent": false, "store_history": false,
                    "user_expressions": {}, "allow_stdin": false},
    })
    .to_string()
}

async fn a_real_notebook_answers_a_bearer_client(mode: &str) {
    let Some(bin) = jupyter() else {
        return;
    };
    let env = with_a_real_notebook(bin, mode).await;
    let api = jupyter_answers(&env).await;
    assert!(api["version"].as_str().unwrap().starts_with("2."), "{api}");

    // A bearer-token client (a pipeline, curl from a notebook) starts a
    // kernel: no `_xsrf` cookie, none needed.
    let rest = env.rest(&env.alice());
    let kernel = rest
        .post(&format!("{NOTEBOOK}/api/kernels"), &json!({"name": "python3"}))
        .await
        .expect(201)
        .body;
    let id = kernel["id"].as_str().unwrap().to_owned();

    // A round trip with the kernel over the proxied WebSocket.
    let url = format!("ws://{}{NOTEBOOK}/api/kernels/{id}/channels", env.server.api);
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {}", env.alice()).parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    socket.send(Message::text(execute("print(6 * 7)"))).await.unwrap();
    let printed = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(Ok(message)) = socket.next().await {
            let Message::Text(text) = message else { continue };
            let message: Value = serde_json::from_str(&text).unwrap();
            if message["msg_type"] == "stream" {
                return message["content"]["text"].as_str().unwrap().to_owned();
            }
        }
        panic!("the kernel's socket ended");
    })
    .await
    .expect("the kernel printed within a minute");
    assert_eq!(printed, "42\n");
    drop(socket);
    rest.delete(&format!("{NOTEBOOK}/api/kernels/{id}")).await.expect(204);

    // Nothing reaches it at the pod's IP: it listens on the pod's loopback.
    let services = rest
        .get("/v1/namespaces/ml-team/clusters/nb/services")
        .await
        .expect(200)
        .body;
    let notebook = services["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "notebook")
        .unwrap()
        .clone();
    assert_eq!(notebook["state"], "available", "{notebook}");
    assert!(notebook["in_cluster_url"].is_null(), "{notebook}");
    let cluster = rest.get("/v1/namespaces/ml-team/clusters/nb").await.expect(200).body;
    let ip = cluster["head_ip"].as_str().unwrap();
    assert!(
        tokio::net::TcpStream::connect((ip, 8888)).await.is_err(),
        "{ip}:8888 answered at the pod's IP"
    );
}

#[tokio::test]
async fn a_real_notebook_answers_a_bearer_client_through_port_forward() {
    a_real_notebook_answers_a_bearer_client("port-forward").await;
}

#[tokio::test]
async fn a_real_notebook_answers_a_bearer_client_direct() {
    a_real_notebook_answers_a_bearer_client("direct").await;
}
