//! Issue 56: what a new user and a Krayne user tripped over in their first
//! hour, each through the binary.

use krayne_tests::Env;

use crate::support::Krayne;

/// Item 8: the natural forms work — `jobs NAME` lists, `scale --workers`
/// scales a cluster's only group — and a guess that cannot be taken names
/// the real choices.
#[tokio::test]
async fn natural_forms_work_and_wrong_guesses_name_the_choices() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "one", "-n", "ml-team"]).await.code(0);
    let listed = k.run(&["jobs", "list", "one", "-n", "ml-team"]).await.code(0).stdout();
    let natural = k.run(&["jobs", "one", "-n", "ml-team"]).await.code(0).stdout();
    assert_eq!(natural, listed);
    let bare = k.run(&["jobs"]).await.code(2);
    assert!(
        bare.stderr().contains("`krayne jobs NAME` lists its jobs"),
        "{}",
        bare.stderr()
    );

    let scaled = k
        .run(&["scale", "one", "-n", "ml-team", "--workers", "2"])
        .await
        .code(0);
    assert!(scaled.stderr().contains("group worker scaled"), "{}", scaled.stderr());
    let got = k.run(&["get", "one", "-n", "ml-team", "-o", "json"]).await.json();
    assert_eq!(got["num_workers"], 2, "{got}");

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        "name: two\nworker_groups:\n  - {name: cpu, replicas: 1}\n  - {name: gpu, replicas: 0}\n",
    )
    .unwrap();
    let path = file.path().to_str().unwrap();
    k.run(&["create", "-f", path, "-n", "ml-team", "--no-wait"])
        .await
        .code(0);
    let unnamed = k.run(&["scale", "two", "-n", "ml-team", "-r", "2"]).await.code(2);
    assert!(
        unnamed
            .stderr()
            .contains("cluster two has 2 worker groups (cpu, gpu): name one with -g GROUP"),
        "{}",
        unnamed.stderr()
    );
    let guessed = k
        .run(&["scale", "two", "-n", "ml-team", "-g", "worker", "-r", "2"])
        .await
        .code(2);
    assert!(
        guessed
            .stderr()
            .contains("no worker group \"worker\" in this cluster: its worker groups are \"cpu\", \"gpu\""),
        "{}",
        guessed.stderr()
    );
}
