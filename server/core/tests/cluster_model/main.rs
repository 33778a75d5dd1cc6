//! The cluster model against Krayne 0.3.8's real outputs and KubeRay's CRD.
// Test helpers outside #[test] fns: failing loudly is their job.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod crd_schema;
mod derivations;
mod reference_configs;
mod snapshots;

use std::path::PathBuf;

/// `testdata/` at the repository root.
pub fn testdata(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
}

/// Parses a JSON file under `testdata/`.
pub fn read_json(rel: &str) -> serde_json::Value {
    let path = testdata(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}
