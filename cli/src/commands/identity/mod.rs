//! Who the caller is and where they may act.

mod command;
pub(crate) mod namespaces;
pub(crate) mod quota;
pub(crate) mod whoami;

pub(crate) use command::Command;

use comfy_table::Cell;
use krayne_client::proto::{NamespaceAccess, Role};

use crate::{context::Context, failure::Failure};

/// `ROLE_EDITOR` → `editor`.
pub(crate) fn role(value: i32) -> &'static str {
    match Role::try_from(value) {
        Ok(Role::Viewer) => "viewer",
        Ok(Role::Editor) => "editor",
        Ok(Role::Admin) => "admin",
        Ok(Role::Unspecified) | Err(_) => "-",
    }
}

/// Namespaces with the caller's role in each.
pub(crate) fn print_access(ctx: &Context, namespaces: &[NamespaceAccess]) -> Result<(), Failure> {
    let rows = namespaces
        .iter()
        .map(|n| {
            vec![
                Cell::new(&n.namespace),
                Cell::new(role(n.role)),
                Cell::new(n.via_teams.join(",")),
            ]
        })
        .collect();
    ctx.printer.table(&["NAMESPACE", "ROLE", "VIA TEAMS"], rows)
}
