//! OpenAPI schemas the derives cannot say: quantities, the open status
//! set, and the fixed word lists of strings the views carry as they come
//! from Kubernetes or the audit log. Each list comes from the type that
//! owns the words, so the schema cannot drift from the code.

use utoipa::{
    PartialSchema, ToSchema,
    openapi::{
        RefOr,
        schema::{AdditionalProperties, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type},
    },
};

use super::{
    AutoscalerSpec, ClusterStatus, HeadSpec, Quantity, ServicesSpec, WorkerGroupSpec,
    audit::{AuditAction, Outcome, Transport},
    limits,
};

/// Kubernetes' quantity grammar (`resource.MustParse`), as its OpenAPI
/// document spells it.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A string that is one of `values`.
fn words<'a>(values: impl IntoIterator<Item = &'a str>) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.into_iter().map(str::to_owned)))
}

impl PartialSchema for Quantity {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(QUANTITY_PATTERN))
                    .examples(["500m", "2", "4Gi"]),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Number)
                    .exclusive_minimum(Some(0)),
            )
            .description(Some(
                "A Kubernetes quantity (`500m`, `2`, `4Gi`); a number is read as its decimal text, as Krayne does.",
            ))
            .into()
    }
}

impl ToSchema for Quantity {}

impl PartialSchema for ClusterStatus {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(words(ClusterStatus::KNOWN.iter().map(ClusterStatus::as_str)))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^[a-z][-a-z0-9]*$"))
                    .description(Some("KubeRay's `status.state`, lower-cased, when none of the above")),
            )
            .description(Some(
                "Krayne 0.3.8's pod-aware status: pod problems first, then KubeRay's state, then conditions and pod phases.",
            ))
            .into()
    }
}

impl ToSchema for ClusterStatus {}

// The create body's sections, inlined (see `ClusterSpec`). Through
// `schema_with` rather than `inline`: utoipa wraps an inlined field with a
// description in `allOf [section, {type: object, description}]`, which
// generators read as "also an object with no properties" (TypeScript:
// `& Record<string, never>`), so no section could be written.

/// `head`, inline.
pub(super) fn head_config() -> RefOr<Schema> {
    HeadSpec::schema()
}

/// `services`, inline.
pub(super) fn services_config() -> RefOr<Schema> {
    ServicesSpec::schema()
}

/// `autoscaler`, inline.
pub(super) fn autoscaler_config() -> RefOr<Schema> {
    AutoscalerSpec::schema()
}

/// `worker_groups`: inline items, at most 32, absent meaning one default group.
pub(super) fn worker_groups_config() -> ArrayBuilder {
    let default = serde_json::json!([{
        "name": "worker", "replicas": 0, "min_replicas": 0, "max_replicas": 1, "cpus": "1", "memory": "2Gi", "gpus": 0,
    }]);
    ArrayBuilder::new()
        .items(WorkerGroupSpec::schema())
        .max_items(Some(limits::MAX_WORKER_GROUPS))
        .default(Some(default))
        .description(Some(
            "Worker groups with unique names; may be empty. Absent: one group `worker` with Krayne's defaults.",
        ))
}

/// A JSON object whose keys krayne does not define (a manifest of
/// KubeRay's CRD, an audit summary): any properties, each any value.
pub fn free_form_object() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(true)))
}

/// `rest` or `grpc`.
pub(super) fn transport() -> ObjectBuilder {
    words(Transport::ALL.map(Transport::as_str)).description(Some(
        "`rest`, `grpc`, or `system` for krayne's own actions (the lifecycle reaper).",
    ))
}

/// The audit actions.
pub(super) fn audit_action() -> ObjectBuilder {
    words(AuditAction::ALL.map(AuditAction::as_str)).description(Some("What the request did."))
}

/// The audit outcomes.
pub(super) fn outcome() -> ObjectBuilder {
    words(Outcome::ALL.map(Outcome::as_str)).description(Some("How the request ended."))
}

/// The services `describe` detects on the head.
pub(super) fn service_names() -> ArrayBuilder {
    ArrayBuilder::new()
        .items(words(crate::manifest::SERVICE_NAMES))
        .description(Some("Services on the head, in Krayne's order."))
}

/// Kubernetes' pod phases.
pub(super) fn pod_phase() -> ObjectBuilder {
    words(["Pending", "Running", "Succeeded", "Failed", "Unknown"]).description(Some("Kubernetes' pod phase."))
}

/// A condition's status.
pub(super) fn condition_status() -> ObjectBuilder {
    words(["True", "False", "Unknown"]).description(Some("`True`, `False` or `Unknown`."))
}

/// A Kubernetes event's type.
pub(super) fn event_type() -> ObjectBuilder {
    words(["Normal", "Warning"]).description(Some("`Normal` or `Warning`."))
}
