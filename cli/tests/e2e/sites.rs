//! Sites from the CLI and the SDK (issue 62, docs/sites.md): `krayne
//! create --gpu-type`/`--site` say where the cluster went and why, a dry
//! run where it would go, `krayne get` grows a SITE column, `krayne
//! quota` a site's cap, and a tunnel reaches a head in the second site.

use std::time::Duration;

use krayne_client::Client;
use krayne_tests::sites::two_sites;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::Krayne;

#[tokio::test]
async fn create_says_where_get_shows_the_site_and_a_tunnel_reaches_the_other_site() {
    let (env, _second, _dir) = two_sites(Some("{ gpus: 8, sites: { us-2: { gpus: 4 } } }"), None, &[]).await;
    let krayne = Krayne::new(&env, &env.alice());

    let dry = krayne
        .run(&["create", "maybe", "-n", "ml-team", "--gpu-type", "h100", "--dry-run"])
        .await
        .code(0);
    assert!(
        dry.stderr().contains(
            "would be created in site us-2 (the first site by weight (50) that takes it; eu-1: offers no h100 GPUs"
        ),
        "{}",
        dry.stderr()
    );
    let gpu = krayne
        .run(&[
            "create",
            "gpu",
            "-n",
            "ml-team",
            "--gpu-type",
            "h100",
            "--timeout",
            "60s",
        ])
        .await
        .code(0);
    assert!(
        gpu.stderr().contains("cluster ml-team/gpu created in site us-2"),
        "{}",
        gpu.stderr()
    );
    let here = krayne
        .run(&["create", "here", "-n", "ml-team", "--site", "eu-1", "--no-wait"])
        .await
        .code(0);
    assert!(
        here.stderr().contains("created in site eu-1 (the site asked for)"),
        "{}",
        here.stderr()
    );
    let nowhere = krayne
        .run(&["create", "far", "-n", "ml-team", "--site", "mars", "--no-wait"])
        .await;
    assert_ne!(nowhere.0.status.code(), Some(0));
    assert!(nowhere.stderr().contains("no site \"mars\""), "{}", nowhere.stderr());

    let table = krayne.run(&["get", "-n", "ml-team"]).await.code(0).lines();
    assert!(table[0].contains("SITE"), "{table:#?}");
    let row = |name: &str| table.iter().find(|l| l.starts_with(name)).cloned().unwrap_or_default();
    assert!(
        row("gpu ").contains("us-2") && row("here ").contains("eu-1"),
        "{table:#?}"
    );
    let json = krayne.run(&["get", "gpu", "-n", "ml-team", "-o", "json"]).await.json();
    assert_eq!(json["site"], "us-2", "{json}");
    // `krayne quota` shows the total, then us-2's cap.
    let quota = krayne.run(&["quota", "-n", "ml-team"]).await.code(0).lines();
    let capped = quota.iter().find(|l| l.contains("gpus in site us-2")).cloned();
    assert!(capped.is_some_and(|l| l.contains("/4 gpus")), "{quota:#?}");

    // The head is in us-2: a tunnel gets there through us-2's Kubernetes.
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let mut ray = client.open_tunnel("ml-team", "gpu", "client").await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), ray.read(&mut buf))
        .await
        .expect("the head's greeting within 10 s")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("ray client"));
    ray.write_all(b"hello").await.unwrap();
    let n = ray.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"hello");
}
