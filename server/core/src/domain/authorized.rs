//! [`Authorized`]: a value that proves its target passed the
//! authorization check for an action.

use std::ops::Deref;

use super::Action;

/// `T` (a cluster's address) together with the action the caller was
/// found allowed to take on it. The store's write methods take one, so a
/// write cannot be reached with an address no check has seen (as Nexus's
/// `lookup_for(authz::Action)`).
///
/// Only the use cases' authorization check makes one
/// ([`Authorized::vouched`]; `server/tests/layering.rs` keeps it so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized<T> {
    target: T,
    action: Action,
}

impl<T> Authorized<T> {
    /// `target`, found allowed for `action`. Called by the authorization
    /// check alone.
    pub fn vouched(target: T, action: Action) -> Self {
        Self { target, action }
    }

    /// What was allowed.
    pub fn action(&self) -> Action {
        self.action
    }

    /// The target itself.
    pub fn target(&self) -> &T {
        &self.target
    }
}

impl<T> Deref for Authorized<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.target
    }
}

impl<T: std::fmt::Display> std::fmt::Display for Authorized<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.target.fmt(f)
    }
}
