//! krayne's gRPC contract, generated from `proto/krayne/v1/*.proto`.
//!
//! Messages are always available; the tonic stubs come with the `client`
//! (`*_client` modules) and `server` (`*_server` modules) features; the
//! `config` feature adds Krayne's config-file format ([`config`]).
#![forbid(unsafe_code)]

#[cfg(feature = "config")]
pub mod config;
pub mod defaults;

/// Package `krayne.v1`.
pub mod v1 {
    #![allow(missing_docs, unreachable_pub, unused_qualifications, clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/krayne.v1.rs"));
}

/// Encoded `FileDescriptorSet` of every krayne proto, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/krayne_descriptor.bin"));

#[cfg(test)]
mod tests {
    use prost::Message as _;
    use prost_types::FileDescriptorSet;

    use super::FILE_DESCRIPTOR_SET;

    #[test]
    fn descriptor_set_names_every_service() {
        let fds = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
        let services: Vec<String> = fds
            .file
            .iter()
            .filter(|f| f.package() == "krayne.v1")
            .flat_map(|f| f.service.iter().map(|s| s.name().to_owned()))
            .collect();
        assert_eq!(
            services,
            [
                "ClusterService",
                "IdentityService",
                "AuditService",
                "VersionService",
                "TunnelService",
                "JobService",
                "RayJobService",
                "UsageService"
            ]
        );
    }

    #[test]
    fn every_message_and_field_is_documented() {
        let fds = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
        let mut undocumented = Vec::new();
        for file in fds.file.iter().filter(|f| f.package() == "krayne.v1") {
            let info = file.source_code_info.clone().unwrap_or_default();
            let documented: std::collections::HashSet<Vec<i32>> = info
                .location
                .iter()
                .filter(|l| !l.leading_comments().trim().is_empty())
                .map(|l| l.path.clone())
                .collect();
            // 4 = message_type, 2 = field, 6 = service, 2 = method, 5 = enum_type.
            for (m, msg) in file.message_type.iter().enumerate() {
                let m = i32::try_from(m).unwrap();
                if !documented.contains(&vec![4, m]) {
                    undocumented.push(msg.name().to_owned());
                }
                for (f, field) in msg.field.iter().enumerate() {
                    let f = i32::try_from(f).unwrap();
                    if !documented.contains(&vec![4, m, 2, f]) {
                        undocumented.push(format!("{}.{}", msg.name(), field.name()));
                    }
                }
            }
            for (s, svc) in file.service.iter().enumerate() {
                let s = i32::try_from(s).unwrap();
                for (r, rpc) in svc.method.iter().enumerate() {
                    let r = i32::try_from(r).unwrap();
                    if !documented.contains(&vec![6, s, 2, r]) {
                        undocumented.push(format!("{}.{}", svc.name(), rpc.name()));
                    }
                }
            }
        }
        assert!(undocumented.is_empty(), "undocumented: {undocumented:?}");
    }
}
