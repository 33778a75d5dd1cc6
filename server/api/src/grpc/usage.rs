//! `krayne.v1.UsageService` over the control plane.

use krayne_proto::v1::{self as pb, usage_service_server};
use tonic::{Request, Response, Status};

use super::{
    convert,
    handler::{Grpc, page},
    status::to_status,
};
use crate::{
    control::UsageQuery,
    domain::{Error, UsageBy, UsageFigures},
};

/// A window's end, if one is given; one that is no time is refused.
fn time(field: &str, t: Option<&prost_types::Timestamp>) -> Result<Option<jiff::Timestamp>, Status> {
    t.map(|t| {
        convert::rfc3339(t)
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| to_status(Error::invalid(field, "is not a valid time")))
    })
    .transpose()
}

fn figures(f: UsageFigures) -> pb::UsageFigures {
    pb::UsageFigures {
        cpu_hours: f.cpu_hours,
        memory_gib_hours: f.memory_gib_hours,
        gpu_hours: f.gpu_hours,
        cluster_hours: f.cluster_hours,
        suspended_hours: f.suspended_hours,
    }
}

#[tonic::async_trait]
impl usage_service_server::UsageService for Grpc {
    async fn get_usage(&self, req: Request<pb::GetUsageRequest>) -> Result<Response<pb::UsageReport>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let by =
            r.by.iter()
                .map(|b| UsageBy::parse(b))
                .collect::<Result<Vec<_>, _>>()
                .map_err(to_status)?;
        let query = UsageQuery {
            from: time("from", r.from.as_ref())?,
            to: time("to", r.to.as_ref())?,
            by,
            page: page(r.page_size, &r.page_token)?,
        };
        let report = if r.namespace.is_empty() {
            self.plane.usage(&cx, query).await
        } else {
            self.plane.namespace_usage(&cx, &r.namespace, query).await
        }
        .map_err(to_status)?;
        Ok(Response::new(pb::UsageReport {
            from: convert::timestamp(Some(&report.from.to_string())),
            to: convert::timestamp(Some(&report.to.to_string())),
            totals: Some(figures(report.totals)),
            rows: report
                .rows
                .into_iter()
                .map(|row| pb::UsageRow {
                    cluster: row.cluster.unwrap_or_default(),
                    namespace: row.namespace.unwrap_or_default(),
                    creator: row.creator.unwrap_or_default(),
                    team: row.team.unwrap_or_default(),
                    worker_group: row.worker_group.unwrap_or_default(),
                    day: row.day.unwrap_or_default(),
                    figures: Some(figures(row.figures)),
                    estimated: row.estimated,
                })
                .collect(),
            next_page_token: report.next_page_token.unwrap_or_default(),
        }))
    }
}
