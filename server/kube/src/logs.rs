//! `pods/log`: a request for one container's log, its errors, and a
//! followed log as chunks of text.

use futures::{AsyncBufRead, StreamExt as _, stream::BoxStream};
use http::Request;
use kube::core::{Request as KubeRequest, subresource::LogParams};

use crate::domain::{Error, PodLogOptions};

/// The `GET …/pods/{pod}/log` request.
pub(super) fn request(
    namespace: &str,
    pod: &str,
    options: &PodLogOptions,
    follow: bool,
) -> Result<Request<Vec<u8>>, Error> {
    let params = LogParams {
        container: Some(options.container.clone()),
        follow,
        limit_bytes: i64::try_from(options.limit_bytes).ok(),
        previous: options.previous,
        since_seconds: options.since_seconds.map(i64::from),
        tail_lines: options.tail_lines.map(i64::from),
        ..LogParams::default()
    };
    KubeRequest::new(format!("/api/v1/namespaces/{namespace}/pods"))
        .logs(pod, &params)
        .map_err(|e| Error::Internal(format!("building a Kubernetes request: {e}")))
}

/// A `pods/log` failure: Kubernetes' 400 says why there is no log to read
/// ("container … is waiting to start: trying and failing to pull image",
/// "previous terminated container … not found"): the cluster's state, not
/// the caller's mistake.
pub(super) fn translate(e: kube::Error) -> Error {
    match e {
        kube::Error::Api(status) if status.code == 400 => Error::FailedPrecondition(status.message),
        other => super::errors::translate(other),
    }
}

/// A followed log's body as chunks of whole lines (a chunk never ends
/// inside a multi-byte character).
pub(super) fn chunks(body: impl AsyncBufRead + Send + Unpin + 'static) -> BoxStream<'static, Result<String, Error>> {
    use futures::AsyncBufReadExt as _;
    body.lines()
        .map(|line| match line {
            Ok(line) => Ok(line + "\n"),
            Err(e) => Err(Error::Unavailable(format!("the log stream from Kubernetes broke: {e}"))),
        })
        .boxed()
}
