//! krayne's core: the cluster model (Krayne's config, validated specs,
//! quantities and names), the closed error enum, the ports the use cases
//! see Kubernetes and the audit log through, and `manifest`, the one place
//! that knows KubeRay's RayCluster shape. Pure: no async runtime, no I/O.
#![forbid(unsafe_code)]

pub mod domain;
pub mod manifest;
