//! [`IntervalKey`]: an open interval's key, in the bytes it needs.

use std::fmt;

use crate::domain::Uid;

/// An interval's key as the ledger writes it: `pod/<uid>`,
/// `cluster/<uid>` or `suspended/<uid>/<millis>`. A pod's or a cluster's
/// with a Kubernetes uid (a UUID) is held as the kind and the uid's 16
/// bytes: the recorder keeps one for each of 200 000 pods, and as a boxed
/// string each cost 64 bytes where this costs 24. Any other is kept as
/// written, so a key always reads back exactly.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) enum IntervalKey {
    /// `pod/<uuid>`.
    Pod(uuid::Uuid),
    /// `cluster/<uuid>`.
    Cluster(uuid::Uuid),
    /// Any other key, as written.
    Text(Box<str>),
}

const POD: &str = "pod/";
const CLUSTER: &str = "cluster/";
const SUSPENDED: &str = "suspended/";

impl IntervalKey {
    /// The key of the pod `uid`'s running life.
    pub(super) fn pod(uid: &Uid) -> Self {
        match uid {
            Uid::Uuid(uuid) => Self::Pod(*uuid),
            Uid::Text(text) => Self::Text(format!("{POD}{text}").into()),
        }
    }

    /// The key of the cluster `uid`'s existence.
    pub(super) fn cluster(uid: &Uid) -> Self {
        match uid {
            Uid::Uuid(uuid) => Self::Cluster(*uuid),
            Uid::Text(text) => Self::Text(format!("{CLUSTER}{text}").into()),
        }
    }

    /// The key of the cluster `uid`'s suspension that began at `millis`.
    pub(super) fn suspension(uid: &Uid, millis: i64) -> Self {
        Self::Text(format!("{SUSPENDED}{uid}/{millis}").into())
    }

    /// The key written `text`.
    pub(super) fn parse(text: &str) -> Self {
        let typed = |prefix: &str| match text.strip_prefix(prefix).map(Uid::new) {
            Some(Uid::Uuid(uuid)) => Some(uuid),
            _ => None,
        };
        if let Some(uuid) = typed(POD) {
            Self::Pod(uuid)
        } else if let Some(uuid) = typed(CLUSTER) {
            Self::Cluster(uuid)
        } else {
            Self::Text(text.into())
        }
    }

    /// For a suspension's key, the uid of the cluster suspended.
    pub(super) fn suspended_cluster(&self) -> Option<&str> {
        match self {
            Self::Text(text) => text.strip_prefix(SUSPENDED)?.split('/').next(),
            Self::Pod(_) | Self::Cluster(_) => None,
        }
    }
}

impl fmt::Display for IntervalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pod(uuid) => write!(f, "{POD}{}", uuid.hyphenated()),
            Self::Cluster(uuid) => write!(f, "{CLUSTER}{}", uuid.hyphenated()),
            Self::Text(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for IntervalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_as_written() {
        let uuid = "0d9c4f5e-6a7b-4c8d-9e0f-123456789abc";
        let uid = Uid::new(uuid);
        let odd = Uid::new("ml-head");
        let keys = [
            (IntervalKey::pod(&uid), format!("pod/{uuid}")),
            (IntervalKey::cluster(&uid), format!("cluster/{uuid}")),
            (
                IntervalKey::suspension(&uid, 1_700_000_000_000),
                format!("suspended/{uuid}/1700000000000"),
            ),
            (IntervalKey::pod(&odd), "pod/ml-head".to_owned()),
            (IntervalKey::cluster(&odd), "cluster/ml-head".to_owned()),
        ];
        for (key, text) in keys {
            assert_eq!(key.to_string(), text);
            assert_eq!(IntervalKey::parse(&text), key, "{text}");
        }
        assert!(matches!(IntervalKey::pod(&uid), IntervalKey::Pod(_)));
        for text in ["pod/0D9C4F5E-6A7B-4C8D-9E0F-123456789ABC", "node/x", ""] {
            assert_eq!(IntervalKey::parse(text).to_string(), text);
        }
        assert_eq!(IntervalKey::suspension(&uid, 5).suspended_cluster(), Some(uuid));
        assert_eq!(IntervalKey::pod(&uid).suspended_cluster(), None);
        assert_eq!(size_of::<IntervalKey>(), 24);
    }
}
