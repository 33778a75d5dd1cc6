//! Issue 58: the chart's Grafana dashboard loads in Grafana's own schema.
//! The JSON becomes a TypeScript object literal typed as `Dashboard` from
//! `@grafana/schema` (Grafana's published schema types, pinned in
//! tests/portal), and each panel's options as its plugin's `Options`;
//! `tsc --strict` then refuses an unknown field, a wrong type or a missing
//! required one, as Grafana's schema does. That every query names a series
//! the server exports is `chart::the_dashboard_shows_only_…`.

use serde_json::Value;

use crate::portal::{node_project, project};

/// Panel plugins whose options the check types, with the module of
/// their `Options` in `@grafana/schema`.
const PANEL_OPTIONS: &[(&str, &str)] = &[(
    "timeseries",
    "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen",
)];

/// The TypeScript program: the dashboard as a `Dashboard`, and each
/// panel's options as its plugin's `Options`.
fn program(dashboard: &Value) -> String {
    // Grafana's types spell choices as TypeScript enums; JSON holds their
    // values, which `Json<T>` puts in their place (`${E}` of a string
    // enum is the union of its values).
    let mut text = String::from(
        "import type { Dashboard } from '@grafana/schema';\n\
         type Json<T> = T extends string ? `${T}` : T extends readonly (infer U)[] ? Json<U>[] \
         : T extends object ? { [K in keyof T]: Json<T[K]> } : T;\n",
    );
    for (i, (_, module)) in PANEL_OPTIONS.iter().enumerate() {
        text.push_str(&format!("import type {{ Options as Options{i} }} from '{module}';\n"));
    }
    text.push_str(&format!("export const dashboard: Dashboard = {dashboard};\n"));
    for (n, panel) in dashboard["panels"].as_array().into_iter().flatten().enumerate() {
        let kind = panel["type"].as_str().unwrap_or_default();
        let Some(i) = PANEL_OPTIONS.iter().position(|(k, _)| *k == kind) else {
            panic!(
                "panel {} is a {kind:?}: add its plugin's Options to PANEL_OPTIONS",
                panel["title"]
            );
        };
        text.push_str(&format!(
            "export const options{n}: Json<Options{i}> = {};\n",
            panel["options"]
        ));
    }
    text
}

/// Type-checks `program` as `grafana/dashboard.gen.ts`; tsc's complaints
/// when it does not fit.
async fn check(program: &str) -> Result<(), String> {
    std::fs::write(project().join("grafana/dashboard.gen.ts"), program).expect("write the program");
    let output = tokio::process::Command::new(project().join("node_modules/.bin/tsc"))
        .args(["-p", "grafana"])
        .current_dir(project())
        .output()
        .await
        .expect("run tsc");
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

#[tokio::test]
async fn the_grafana_dashboard_loads_in_grafanas_schema() {
    if node_project("the Grafana dashboard's schema check").await.is_none() {
        return;
    }
    let dashboard: Value =
        serde_json::from_str(&krayne_tests::chart::read("files/dashboard.json")).expect("the dashboard is JSON");
    if let Err(complaints) = check(&program(&dashboard)).await {
        panic!("the dashboard does not fit Grafana's schema:\n{complaints}");
    }
    // The check has teeth: a field Grafana does not know, a number
    // written as text, an option a panel plugin lacks.
    for (pointer, wrong) in [
        ("/panels/0/gridPos/colour", Value::from("red")),
        ("/schemaVersion", Value::from("39")),
        ("/panels/0/options/legend/placement", Value::from("middle")),
    ] {
        let mut broken = dashboard.clone();
        let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
        broken
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .expect("the parent exists")
            .insert(key.to_owned(), wrong);
        let refused = check(&program(&broken)).await;
        assert!(refused.is_err(), "{pointer} was not refused");
    }
    check(&program(&dashboard)).await.expect("the dashboard fits again");
}
