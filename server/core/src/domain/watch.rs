//! Live watches of clusters and of RayJobs: events as Kubernetes' watches deliver them
//! (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`), each with a version a
//! client resumes from after a disconnect.

use std::{fmt, str::FromStr, sync::Arc, time::Duration};

use serde::Serialize;

use super::{Error, RayJobInfo, Summary};

/// What an event says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WatchEventType {
    /// A cluster appeared (or is part of the initial state).
    Added,
    /// A cluster's summary changed.
    Modified,
    /// A cluster is gone; the event carries its last summary.
    Deleted,
    /// Nothing happened that the caller may see, but the stream has
    /// reached this version: resume from here.
    Bookmark,
}

impl WatchEventType {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
            Self::Bookmark => "BOOKMARK",
        }
    }
}

/// A point in one server's stream of cluster changes, written
/// `<boot>.<sequence>`: the boot tells a version of this server's run from
/// one of another replica's (or an earlier run's), which it cannot resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchVersion {
    /// Which run of which server.
    pub boot: u32,
    /// Changes that run has seen before this one.
    pub seq: u64,
}

impl fmt::Display for WatchVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x}.{}", self.boot, self.seq)
    }
}

impl FromStr for WatchVersion {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::invalid("resource_version", "is not a version this API gave out");
        let (boot, seq) = s.split_once('.').ok_or_else(bad)?;
        if boot.len() != 8 {
            return Err(bad());
        }
        Ok(Self {
            boot: u32::from_str_radix(boot, 16).map_err(|_| bad())?,
            seq: seq.parse().map_err(|_| bad())?,
        })
    }
}

/// What a watch event is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Watched {
    /// A cluster: its summary, as list gives it.
    Cluster(Arc<Summary>),
    /// A RayJob, as list gives it.
    RayJob(Arc<RayJobInfo>),
}

impl Watched {
    /// Its namespace.
    pub fn namespace(&self) -> &str {
        match self {
            Self::Cluster(c) => &c.info.namespace,
            Self::RayJob(j) => &j.namespace,
        }
    }

    /// Which kind of object it is.
    pub fn kind(&self) -> WatchedKind {
        match self {
            Self::Cluster(_) => WatchedKind::Clusters,
            Self::RayJob(_) => WatchedKind::RayJobs,
        }
    }
}

/// The kinds of object a watch follows (one per watch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchedKind {
    /// RayClusters.
    Clusters,
    /// RayJobs.
    RayJobs,
}

/// One event of a watch.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// What happened.
    pub kind: WatchEventType,
    /// Resume from here to get what follows this event.
    pub version: WatchVersion,
    /// What it is about (`None` for a bookmark).
    pub object: Option<Watched>,
}

impl WatchEvent {
    /// The cluster it is about, if it is about one.
    pub fn cluster(&self) -> Option<&Arc<Summary>> {
        match &self.object {
            Some(Watched::Cluster(c)) => Some(c),
            _ => None,
        }
    }

    /// The RayJob it is about, if it is about one.
    pub fn rayjob(&self) -> Option<&Arc<RayJobInfo>> {
        match &self.object {
            Some(Watched::RayJob(j)) => Some(j),
            _ => None,
        }
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WatchFrom {
    /// After this version (a previous event's or bookmark's); `None`:
    /// from now.
    pub version: Option<WatchVersion>,
    /// Begin with an `ADDED` for every cluster there is now.
    pub initial_events: bool,
}

impl WatchFrom {
    /// What a request says: a version to resume after (empty: none) and
    /// whether to begin with the current state; not both.
    pub fn read(version: Option<&str>, initial_events: bool) -> Result<Self, Error> {
        let version = version.filter(|v| !v.is_empty()).map(str::parse).transpose()?;
        if version.is_some() && initial_events {
            return Err(Error::invalid(
                "send_initial_events",
                "not together with resource_version: a resumed watch already has the state",
            ));
        }
        Ok(Self {
            version,
            initial_events,
        })
    }
}

/// The longest a caller may ask one watch to last: a day.
pub(crate) const MAX_WATCH_TIMEOUT_SECONDS: u64 = 86_400;

/// How long a watch lasts at most, as a request asks (`timeout_seconds`,
/// as Kubernetes' `timeoutSeconds`): it then ends cleanly after a
/// bookmark, and the client resumes from that. `0` asks for no limit.
pub fn watch_timeout(seconds: u64) -> Result<Option<Duration>, Error> {
    if seconds > MAX_WATCH_TIMEOUT_SECONDS {
        return Err(Error::invalid(
            "timeout_seconds",
            format!("at most {MAX_WATCH_TIMEOUT_SECONDS} (a day); resume from the last bookmark for longer"),
        ));
    }
    Ok((seconds > 0).then(|| Duration::from_secs(seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_and_refuse_what_was_not_given_out() {
        let v = WatchVersion {
            boot: 0x5f3a_9c1e,
            seq: 1042,
        };
        assert_eq!(v.to_string(), "5f3a9c1e.1042");
        assert_eq!("5f3a9c1e.1042".parse::<WatchVersion>().unwrap(), v);
        for bad in [
            "",
            "12",
            "5f3a9c1e",
            "5f3a9c1e.",
            "zzzzzzzz.1",
            "5f3a9c1.1",
            "5f3a9c1e.-1",
            "5f3a9c1e.1.2",
        ] {
            let e = bad.parse::<WatchVersion>().unwrap_err();
            assert_eq!(e.code(), "invalid_argument", "{bad}");
        }
    }

    #[test]
    fn a_watch_timeout_is_up_to_a_day_and_zero_means_none() {
        assert_eq!(watch_timeout(0).unwrap(), None);
        assert_eq!(watch_timeout(1).unwrap(), Some(Duration::from_secs(1)));
        assert_eq!(
            watch_timeout(MAX_WATCH_TIMEOUT_SECONDS).unwrap(),
            Some(Duration::from_secs(86_400))
        );
        let e = watch_timeout(MAX_WATCH_TIMEOUT_SECONDS + 1).unwrap_err();
        assert_eq!(e.code(), "invalid_argument");
        assert!(e.to_string().contains("timeout_seconds"), "{e}");
    }
}
