//! Whether a cluster's head is stuck in a state it does not leave without
//! someone changing the cluster (or the platform): what lets a wait stop
//! early instead of running out its timeout.

use super::{LABEL_NODE_TYPE, ObservedPod};
use crate::domain::Atom;

/// Restarts after which a crash-looping head counts as stuck: Kubernetes
/// backs off 10 s, 20 s, 40 s… between them, so three take about a minute.
pub const CRASH_LOOP_RESTARTS: i64 = 3;

/// Longest kubelet or scheduler message quoted.
const MESSAGE_LIMIT: usize = 300;

/// Why a cluster's head does not get ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadStuck {
    /// Its image could not be pulled and the kubelet backs off
    /// (`ImagePullBackOff`): the kubelet's message, which names the image.
    ImagePull(String),
    /// It crashed at least [`CRASH_LOOP_RESTARTS`] times and the kubelet
    /// backs off before the next start.
    CrashLoop {
        /// Restarts so far.
        restarts: i64,
    },
    /// No node has room for it: the scheduler's message. Stuck only once
    /// it lasts (a delete elsewhere, or a node autoscaler, may free room).
    Unschedulable(String),
}

impl HeadStuck {
    /// What to tell the person waiting.
    pub fn describe(&self) -> String {
        match self {
            Self::ImagePull(m) => format!("its head's image cannot be pulled ({m})"),
            Self::CrashLoop { restarts } => {
                format!("its head keeps crashing ({restarts} restarts; the head's log says why)")
            }
            Self::Unschedulable(m) => format!("its head fits on no node ({m})"),
        }
    }
}

/// Whether the head pod among `pods` is stuck, and how. Workers do not
/// count: one waiting for capacity while the autoscaler works is normal.
pub fn head_stuck(pods: &[&ObservedPod]) -> Option<HeadStuck> {
    let head = pods
        .iter()
        .find(|p| p.metadata.labels.get(LABEL_NODE_TYPE).map(Atom::as_str) == Some("head"))?;
    let status = &head.status;
    if status.phase.as_deref() == Some("Pending")
        && let Some(u) = status.conditions.unscheduled.as_ref()
        && u.reason.as_deref() == Some("Unschedulable")
    {
        return Some(HeadStuck::Unschedulable(bounded(u.message.as_deref())));
    }
    status.container_statuses.iter().find_map(|cs| {
        let waiting = cs.state.waiting.as_ref()?;
        match waiting.reason.as_deref()? {
            "ImagePullBackOff" => Some(HeadStuck::ImagePull(bounded(waiting.message.as_deref()))),
            "CrashLoopBackOff" => {
                let restarts = cs.restart_count.unwrap_or(0);
                (restarts >= CRASH_LOOP_RESTARTS).then_some(HeadStuck::CrashLoop { restarts })
            }
            _ => None,
        }
    })
}

/// A message from Kubernetes, printable and cut to [`MESSAGE_LIMIT`]
/// bytes: it ends up on terminals.
fn bounded(message: Option<&str>) -> String {
    let mut out = String::new();
    for c in message.unwrap_or("no message").trim().chars() {
        if out.len() + c.len_utf8() > MESSAGE_LIMIT {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn pod(node_type: &str, status: Value) -> ObservedPod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"ray.io/node-type": node_type}},
            "status": status,
        }))
        .unwrap()
    }

    fn waiting(reason: &str, message: &str, restarts: i64) -> Value {
        json!({"phase": "Pending", "containerStatuses": [
            {"restartCount": restarts, "state": {"waiting": {"reason": reason, "message": message}}}
        ]})
    }

    #[test]
    fn a_head_backing_off_its_image_pull_is_stuck_and_names_the_image() {
        let head = pod(
            "head",
            waiting("ImagePullBackOff", "Back-off pulling image \"ray:nope\"", 0),
        );
        let stuck = head_stuck(&[&head]).unwrap();
        assert_eq!(
            stuck,
            HeadStuck::ImagePull("Back-off pulling image \"ray:nope\"".into())
        );
        assert!(stuck.describe().contains("\"ray:nope\""), "{}", stuck.describe());
        // The first failure is retried: not stuck yet.
        let first = pod("head", waiting("ErrImagePull", "not found", 0));
        assert_eq!(head_stuck(&[&first]), None);
    }

    #[test]
    fn a_crash_loop_counts_from_the_third_restart() {
        let early = pod("head", waiting("CrashLoopBackOff", "back-off", 2));
        assert_eq!(head_stuck(&[&early]), None);
        let late = pod("head", waiting("CrashLoopBackOff", "back-off", 3));
        assert_eq!(head_stuck(&[&late]), Some(HeadStuck::CrashLoop { restarts: 3 }));
    }

    #[test]
    fn workers_do_not_count_and_an_unscheduled_head_does() {
        let worker = pod("worker", waiting("ImagePullBackOff", "x", 0));
        assert_eq!(head_stuck(&[&worker]), None);
        let head = pod(
            "head",
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": "0/4 nodes are available:\n4 Insufficient cpu."}]}),
        );
        assert_eq!(
            head_stuck(&[&worker, &head]),
            Some(HeadStuck::Unschedulable(
                "0/4 nodes are available: 4 Insufficient cpu.".into()
            ))
        );
    }

    #[test]
    fn messages_are_cut_and_printable() {
        let long = "\u{1b}[2J".to_owned() + &"x".repeat(1000);
        let said = bounded(Some(&long));
        assert!(said.len() <= MESSAGE_LIMIT + '…'.len_utf8());
        assert!(!said.chars().any(char::is_control));
    }
}
