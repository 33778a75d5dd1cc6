//! Every error comes back as a Kubernetes `Status` with the right reason.

use kube::api::{ListParams, PostParams};
use serde_json::json;

use crate::{api_error, raw, raycluster, rayclusters, start};

#[tokio::test]
async fn not_found_and_already_exists() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    let (reason, code, status) = api_error(rc.get("nope").await.unwrap_err());
    assert_eq!((reason.as_str(), code), ("NotFound", 404));
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.group.as_str(), details.kind.as_str()),
        ("nope", "ray.io", "rayclusters")
    );
    assert_eq!(status.message, "rayclusters.ray.io \"nope\" not found");

    rc.create(&PostParams::default(), &raycluster("name: twice\nnamespace: ml\n"))
        .await
        .unwrap();
    let (reason, code, _) = api_error(
        rc.create(&PostParams::default(), &raycluster("name: twice\nnamespace: ml\n"))
            .await
            .unwrap_err(),
    );
    assert_eq!((reason.as_str(), code), ("AlreadyExists", 409));
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_not_found_for_the_namespace() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ghost");
    let (reason, code, status) = api_error(
        rc.create(&PostParams::default(), &raycluster("name: c\nnamespace: ghost\n"))
            .await
            .unwrap_err(),
    );
    assert_eq!((reason.as_str(), code), ("NotFound", 404));
    let details = status.details.unwrap();
    assert_eq!((details.kind.as_str(), details.name.as_str()), ("namespaces", "ghost"));
}

#[tokio::test]
async fn invalid_objects_name_each_field() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    let long = "a".repeat(54);
    let mut too_long = raycluster("name: x\nnamespace: ml\n");
    too_long.metadata.name = Some(long.clone());
    let (reason, code, status) = api_error(rc.create(&PostParams::default(), &too_long).await.unwrap_err());
    assert_eq!((reason.as_str(), code), ("Invalid", 422));
    let causes = status.details.unwrap().causes;
    assert_eq!(causes[0].field, "metadata.name");
    assert!(causes[0].message.contains("no more than 53"), "{}", causes[0].message);

    let body = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "typed"},
        "spec": {"workerGroupSpecs": [{"groupName": "w", "replicas": "two", "template": {}}]}});
    let (reason, _, status) = api_error(
        raw(
            &client,
            "POST",
            "/apis/ray.io/v1/namespaces/ml/rayclusters",
            "application/json",
            &body.to_string(),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(reason, "Invalid");
    let fields: Vec<String> = status.details.unwrap().causes.into_iter().map(|c| c.field).collect();
    assert!(
        fields.contains(&"spec.workerGroupSpecs[0].replicas".to_owned()),
        "wrong type: {fields:?}"
    );
    assert!(
        fields.contains(&"spec".to_owned()),
        "headGroupSpec is required: {fields:?}"
    );

    let (reason, _, status) = api_error(
        raw(
            &client,
            "POST",
            "/apis/ray.io/v1/namespaces/ml/rayclusters",
            "application/json",
            r#"{"metadata": {}}"#,
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(reason, "Invalid");
    assert_eq!(status.details.unwrap().causes[0].field, "metadata.name");
}

#[tokio::test]
async fn malformed_bodies_and_unsupported_requests() {
    let (_sb, client) = start().await;
    let collection = "/apis/ray.io/v1/namespaces/ml/rayclusters";
    let (reason, code, _) = api_error(
        raw(&client, "POST", collection, "application/json", "{not json")
            .await
            .unwrap_err(),
    );
    assert_eq!((reason.as_str(), code), ("BadRequest", 400));

    rayclusters(&client, "ml")
        .create(&PostParams::default(), &raycluster("name: p\nnamespace: ml\n"))
        .await
        .unwrap();
    let item = format!("{collection}/p");
    for content_type in [
        "application/apply-patch+yaml",
        "application/strategic-merge-patch+json",
        "text/plain",
    ] {
        let (reason, code, _) = api_error(raw(&client, "PATCH", &item, content_type, "{}").await.unwrap_err());
        assert_eq!((reason.as_str(), code), ("UnsupportedMediaType", 415), "{content_type}");
    }
    let (reason, code, _) = api_error(raw(&client, "POST", &item, "application/json", "{}").await.unwrap_err());
    assert_eq!((reason.as_str(), code), ("MethodNotAllowed", 405));
    let (reason, code, _) = api_error(
        raw(&client, "DELETE", "/apis/ray.io/v1/rayclusters", "application/json", "")
            .await
            .unwrap_err(),
    );
    assert_eq!((reason.as_str(), code), ("MethodNotAllowed", 405));
    let (reason, code, _) = api_error(
        raw(&client, "GET", "/apis/ray.io/v1/widgets", "application/json", "")
            .await
            .unwrap_err(),
    );
    assert_eq!((reason.as_str(), code), ("NotFound", 404));
    let bad_selector = ListParams::default().labels("a in b");
    let (reason, code, _) = api_error(rayclusters(&client, "ml").list(&bad_selector).await.unwrap_err());
    assert_eq!((reason.as_str(), code), ("BadRequest", 400));
}
