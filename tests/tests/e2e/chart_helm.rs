//! The chart linted and rendered by Helm's own engine (Helm v4's Go SDK
//! through the PyPI package `helm-python-sdk`, no `helm` binary), every
//! rendered object validated against the Kubernetes schemas, and the
//! chart's version moving with its content. Both run Python scripts of
//! `charts/krayne/ci`.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use krayne_tests::chart;

/// The venv `.ci/run` installs `helm-python-sdk` and `kubernetes-validate`
/// into: `${XDG_CACHE_HOME:-$HOME/.cache}/krayne/helm-venv`.
fn helm_venv_python() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(cache.join("krayne/helm-venv/bin/python"))
}

/// Whether that Python has both packages.
fn has_helm_packages(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import helm_python, kubernetes_validate"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        // No __pycache__ left in the chart's ci/.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(chart::chart_dir().join("../.."))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Issue 55: `helm lint --strict` (Kubernetes 1.25 and 1.37) and a render
/// of every values set — the chart's defaults (which must refuse, saying
/// what to set), `ci/*-values.yaml`, and every values example of the
/// README and docs/operations.md — by Helm's own engine; every object
/// valid for the Kubernetes 1.25 and 1.37 schemas (strict), renders
/// deterministic, two releases named `krayne` in two namespaces sharing
/// no object (cluster-scoped ones included), and an added namespace
/// leaving the pods' template as it was.
#[test]
fn helms_own_engine_lints_and_renders_every_values_set() {
    let python = helm_venv_python().filter(|p| has_helm_packages(p));
    let Some(python) = python else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs helm-python-sdk and kubernetes-validate in the helm venv (.ci/run installs them)"
        );
        eprintln!(
            "SKIPPED: no ${{XDG_CACHE_HOME:-$HOME/.cache}}/krayne/helm-venv with helm-python-sdk and \
             kubernetes-validate; the chart was not rendered by Helm's engine"
        );
        return;
    };
    let script = chart::chart_dir().join("ci/helm_check.py").display().to_string();
    let output = run(&python, &[script.as_str()]);
    let report = text(&output);
    eprintln!("{report}");
    assert!(output.status.success(), "helm_check.py failed:\n{report}");
    // The values sets the issue names are among those checked.
    for set in [
        "defaults",
        "all-features",
        "production",
        "readme",
        "onboarding",
        "extra-ingress",
    ] {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with("ok") && l.split_whitespace().nth(1) == Some(set)),
            "values set {set} was not checked:\n{report}"
        );
    }
    assert!(report.contains("render refused, as it must"), "{report}");
    // Issue 55, item 5: onboarding a namespace rolls no pod.
    assert!(
        report.contains("ok   adding a namespace to rbac.namespaces leaves the pods' template"),
        "{report}"
    );
    assert!(
        report.contains("two releases 'krayne' in krayne-staging and krayne-production (production)")
            && report.contains("none shared"),
        "{report}"
    );
}

/// Issue 55, item 4: a change to what the chart installs without a version
/// bump fails, printing the lock line to paste; the CHANGELOG has a
/// section for the version. Standard-library Python, so it runs
/// everywhere the suite does.
#[test]
fn the_chart_version_moves_with_its_content() {
    let Some(python) = krayne_tests::which("python3") else {
        assert!(std::env::var_os("CI").is_none(), "CI needs python3");
        eprintln!("SKIPPED: no python3; the chart's version lock was not checked");
        return;
    };
    let check = run(&python, &["charts/krayne/ci/version_lock.py"]);
    assert!(check.status.success(), "{}", text(&check));
    let unit = run(
        &python,
        &[
            "-m",
            "unittest",
            "discover",
            "-s",
            "charts/krayne/ci",
            "-p",
            "test_version_lock.py",
        ],
    );
    assert!(unit.status.success(), "{}", text(&unit));
    let chart_yaml = chart::yaml("Chart.yaml");
    let version = chart_yaml["version"].as_str().expect("a version");
    assert_ne!(version, "0.1.0", "the version moved on from the first chart's");
    let lock = chart::read("ci/version.lock");
    assert!(
        lock.lines().any(|l| l.starts_with(&format!("{version} sha256:"))),
        "{lock}"
    );
    assert!(
        chart::read("CHANGELOG.md").contains(&format!("\n## {version}\n")),
        "CHANGELOG.md has a section for {version}"
    );
}
