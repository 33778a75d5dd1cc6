//! `krayne whoami`.

use comfy_table::Cell;
use krayne_client::json::to_json;

use crate::{
    context::Context,
    failure::Failure,
    output::{or_dash, out},
};

/// Show who the server thinks you are (and which issuer vouched for you,
/// until when), your teams, and your role in each namespace.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) async fn run(ctx: &Context, _: Args) -> Result<(), Failure> {
    let me = ctx.client()?.whoami().await?;
    if ctx.printer.structured() {
        return ctx.printer.data(&to_json(&me)?);
    }
    let p = &ctx.printer;
    p.fields(&[
        ("Subject", me.subject.clone()),
        ("Email", or_dash(me.email.as_deref())),
        ("Groups", or_dash(Some(&me.groups.join(", ")))),
        ("Teams", or_dash(Some(&me.teams.join(", ")))),
        ("Global admin", if me.global_admin { "yes" } else { "no" }.to_owned()),
        ("Issuer", or_dash(me.issuer.as_deref())),
        ("Expires", expires(me.expires_at.as_ref())),
    ])?;
    if !me.grants.is_empty() {
        out("\nGrants:\n")?;
        let rows = me
            .grants
            .iter()
            .map(|g| {
                vec![
                    Cell::new(&g.team),
                    Cell::new(&g.pattern),
                    Cell::new(super::role(g.role)),
                ]
            })
            .collect();
        p.table(&["TEAM", "NAMESPACES", "ROLE"], rows)?;
    }
    if !me.namespaces.is_empty() {
        out("\nNamespaces:\n")?;
        super::print_access(ctx, &me.namespaces)?;
    }
    if me.global_admin {
        out(&format!(
            "\nAs a global admin you may use all {} namespaces (`krayne namespaces` lists them).\n",
            me.namespace_count
        ))?;
    }
    Ok(())
}

/// When the credential expires, and in how long.
fn expires(at: Option<&prost_types::Timestamp>) -> String {
    let Some(t) = at else {
        return "-".to_owned();
    };
    let now = jiff::Timestamp::now();
    let shown = jiff::Timestamp::new(t.seconds, 0).map_or_else(|_| t.seconds.to_string(), |a| a.to_string());
    if t.seconds <= now.as_second() {
        return format!("{shown} (expired)");
    }
    format!("{shown} ({})", crate::output::countdown(t, now))
}
