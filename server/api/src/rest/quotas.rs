//! A namespace's team quota.

use axum::{
    Json,
    extract::{Path, State},
};
use serde::Serialize;
use utoipa::ToSchema;

use super::{
    AppState,
    extract::Caller,
    problem::ApiError,
    responses::{KubernetesReads, Refusals, Viewer},
};
use crate::domain::quota::QuotaLine;

/// A namespace's quota as it stands.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct QuotaView {
    /// The namespace.
    pub namespace: String,
    /// Clusters, CPUs, memory and GPUs: each limit (none: unlimited), what
    /// the namespace's clusters are charged (each its upper bound) and what
    /// remains.
    pub resources: Vec<QuotaLine>,
    /// The Kueue LocalQueue that admits the namespace's clusters, when the
    /// platform's Kueue does (docs/kueue.md): `resources` are then
    /// informational, not enforced by krayne.
    pub kueue_local_queue: Option<String>,
}

/// A namespace's quota: limits, usage and what remains.
///
/// Limits come from the team mapping; usage is every RayCluster in the
/// namespace (those made with kubectl too), each charged its upper bound:
/// the head plus each worker group at `max_replicas` when autoscaling,
/// else at `replicas`. Needs the viewer role.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/quota", tag = "identity",
    params(("namespace" = String, Path, description = "Kubernetes namespace")),
    responses(
        Refusals, KubernetesReads, Viewer,
        (status = 200, description = "The namespace's quota", body = QuotaView),
    ))]
pub(super) async fn get_quota(
    State(s): State<AppState>,
    Caller(cx): Caller,
    Path(namespace): Path<String>,
) -> Result<Json<QuotaView>, ApiError> {
    let quota = s.plane.quota(&cx, &namespace).await?;
    Ok(Json(QuotaView {
        namespace: quota.namespace,
        resources: quota.lines,
        kueue_local_queue: quota.kueue_local_queue,
    }))
}
