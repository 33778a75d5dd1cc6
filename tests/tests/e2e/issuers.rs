//! Several issuers at once: an identity provider for people, Kubernetes'
//! service-account issuer for pipelines, the development secret. Each is
//! pinned to its own keys; one that is down does not stop the others.

use krayne_tests::{Env, EnvOptions};
use serde_json::json;

use crate::{
    auth::check,
    keys::{EcKey, JwksServer, claims},
};

/// The sandbox's service-account issuer (kubeadm's and kind's).
const CLUSTER_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The server trusting the development secret, Kubernetes' issuer and the
/// issuers of `issuers_file`.
async fn env_with(issuers_file: &str) -> (Env, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("issuers.yaml");
    std::fs::write(&path, issuers_file).unwrap();
    let env = Env::start_with(EnvOptions::with_args(&[
        "--service-account-tokens",
        "--allow-hs256-with-jwks",
        "--issuers-file",
        path.to_str().unwrap(),
        "--jwks-cooldown-seconds",
        "0",
    ]))
    .await;
    (env, dir)
}

#[tokio::test]
async fn tokens_of_one_issuer_cannot_pass_as_anothers() {
    let idp = JwksServer::start().await;
    let key = EcKey::generate("idp-1");
    idp.publish(Some(&[&key]));
    let (env, _dir) = env_with(&format!(
        "- issuer: {0}\n  audience: krayne\n  algorithms: [ES256]\n",
        idp.base
    ))
    .await;

    check(
        &env,
        "the identity provider's own",
        Some(&key.sign(&claims(&idp.base, json!({})), true)),
        None,
        true,
    )
    .await;
    let pipeline = env.service_account_token("ml-team", "default", None).await;
    check(&env, "Kubernetes' own", Some(&pipeline), None, true).await;
    let me = env.rest(&pipeline).get("/v1/whoami").await.expect(200).body;
    assert_eq!(me["issuer"], CLUSTER_ISSUER);
    assert_eq!(me["subject"], "system:serviceaccount:ml-team:default");

    // The provider's key signing a token that names Kubernetes' issuer.
    let forged = claims(
        CLUSTER_ISSUER,
        json!({"sub": "system:serviceaccount:ml-team:default",
               "kubernetes.io": {"namespace": "ml-team", "serviceaccount": {"name": "default"}}}),
    );
    check(
        &env,
        "the provider's key as Kubernetes",
        Some(&key.sign(&forged, true)),
        None,
        false,
    )
    .await;
    // The development secret signing for Kubernetes' issuer.
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &forged,
        &jsonwebtoken::EncodingKey::from_secret(&std::fs::read(env.secret_file()).unwrap()),
    )
    .unwrap();
    check(&env, "the development secret as Kubernetes", Some(&hs), None, false).await;
    // The provider vouching for a ServiceAccount's name or group.
    let as_account = claims(&idp.base, json!({"sub": "system:serviceaccount:ml-team:default"}));
    check(
        &env,
        "a system: subject from the provider",
        Some(&key.sign(&as_account, true)),
        None,
        false,
    )
    .await;
    let grouped = claims(
        &idp.base,
        json!({"groups": ["system:serviceaccounts:ml-team", "ml-research"]}),
    );
    let me = env
        .rest(&key.sign(&grouped, true))
        .get("/v1/whoami")
        .await
        .expect(200)
        .body;
    assert_eq!(
        me["groups"],
        json!(["ml-research"]),
        "system: groups are Kubernetes' alone"
    );
    // An issuer nobody configured.
    let stranger = claims("https://stranger.test", json!({}));
    check(&env, "an unknown issuer", Some(&key.sign(&stranger, true)), None, false).await;
}

#[tokio::test]
async fn an_issuer_that_is_down_does_not_stop_the_others() {
    let idp = JwksServer::start().await;
    let key = EcKey::generate("idp-1");
    idp.publish(Some(&[&key]));
    // A second provider that never answers (nothing listens on port 9).
    let (mut env, _dir) = env_with(&format!(
        "- issuer: {0}\n  audience: krayne\n  algorithms: [ES256]\n\
         - issuer: http://127.0.0.1:9\n  audience: krayne\n",
        idp.base
    ))
    .await;
    let person = key.sign(&claims(&idp.base, json!({})), true);
    let pipeline = env.service_account_token("ml-team", "default", None).await;
    check(&env, "the provider, beside a dead one", Some(&person), None, true).await;
    check(&env, "Kubernetes, beside a dead provider", Some(&pipeline), None, true).await;
    let dead = key.sign(&claims("http://127.0.0.1:9", json!({})), true);
    check(&env, "the dead provider's", Some(&dead), None, false).await;

    // The provider goes down: its keys are kept, Kubernetes' still work.
    idp.publish(None);
    check(&env, "Kubernetes with the provider down", Some(&pipeline), None, true).await;
    check(&env, "the provider's, its keys kept", Some(&person), None, true).await;

    // Kubernetes' API goes away: the provider's tokens do not need it, and
    // ServiceAccount tokens verify with the keys already fetched. (whoami
    // itself reads namespaces from Kubernetes: past authentication it is
    // 503, where a refused token is 401.)
    idp.publish(Some(&[&key]));
    let within = std::time::Duration::from_secs(10);
    krayne_tests::becomes_ready(&env.ops(), within).await;
    env.sandbox.stop_api().await;
    // Until its watches break, the server answers namespaces from its
    // cache: wait until it knows Kubernetes is down.
    krayne_tests::dependency_becomes(&env.ops(), "kubernetes", "down", within).await;
    for (case, token) in [("the provider's", &person), ("Kubernetes'", &pipeline)] {
        let reply = env.rest(token).get("/v1/whoami").await;
        assert_eq!(reply.status, 503, "{case} with Kubernetes down: {}", reply.text);
    }
    env.rest(&dead).get("/v1/whoami").await.expect(401);
}
