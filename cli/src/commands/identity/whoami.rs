//! `krayne whoami`.

use comfy_table::Cell;
use krayne_client::json::to_json;

use crate::{
    context::Context,
    failure::Failure,
    output::{or_dash, out},
};

/// Show who the server thinks you are, your teams, and your role in each
/// namespace.
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
    Ok(())
}
