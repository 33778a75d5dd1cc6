//! A watch that outlives the server it started on: when a server ends the
//! stream with `Unavailable` (a replica shutting down, a lost watch), the
//! watch is opened again with the time left, after a backoff pause.

use backon::ExponentialBackoff;
use futures::{Stream, StreamExt as _, stream::BoxStream};
use tokio::time::Instant;
use tonic::Code;

use crate::{Client, ClientError, proto::ClusterInfo};

type Updates = BoxStream<'static, Result<ClusterInfo, ClientError>>;

/// What the resuming stream keeps between items.
pub(crate) struct Resume {
    client: Client,
    namespace: String,
    name: String,
    deadline: Instant,
    current: Option<Updates>,
    finished: bool,
}

impl Resume {
    /// A watch of `namespace/name` until `deadline`, reading `first`.
    pub(crate) fn new(client: Client, namespace: &str, name: &str, deadline: Instant, first: Updates) -> Self {
        Self {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            deadline,
            current: Some(first),
            finished: false,
        }
    }

    /// The updates, resuming as `backoff` allows.
    pub(crate) fn into_stream(
        self,
        backoff: ExponentialBackoff,
    ) -> impl Stream<Item = Result<ClusterInfo, ClientError>> + use<> {
        futures::stream::unfold((self, backoff), |(mut resume, mut backoff)| async move {
            let item = resume.next(&mut backoff).await?;
            Some((item, (resume, backoff)))
        })
    }

    fn timed_out(&self) -> ClientError {
        ClientError::new(
            Code::DeadlineExceeded,
            format!(
                "cluster {}/{} not ready within the timeout (the wait was interrupted and resumed)",
                self.namespace, self.name
            ),
        )
    }

    /// The next update; `None` once the watch has ended.
    async fn next(&mut self, backoff: &mut ExponentialBackoff) -> Option<Result<ClusterInfo, ClientError>> {
        while !self.finished {
            let Some(current) = self.current.as_mut() else {
                let left = self.deadline.saturating_duration_since(Instant::now());
                let opened = if left.is_zero() {
                    Err(self.timed_out())
                } else {
                    let open = self.client.open_watch(&self.namespace, &self.name, left);
                    tokio::time::timeout_at(self.deadline, open)
                        .await
                        .unwrap_or_else(|_| Err(self.timed_out()))
                };
                match opened {
                    Ok(updates) => self.current = Some(updates),
                    Err(e) => {
                        self.finished = true;
                        return Some(Err(e));
                    }
                }
                continue;
            };
            match current.next().await {
                Some(Err(e)) if e.is_unavailable() => {
                    let left = self.deadline.saturating_duration_since(Instant::now());
                    match backoff.next() {
                        Some(pause) if !left.is_zero() => {
                            self.current = None;
                            tokio::time::sleep(pause.min(left)).await;
                        }
                        _ => {
                            self.finished = true;
                            return Some(Err(e));
                        }
                    }
                }
                Some(Err(e)) => {
                    self.finished = true;
                    return Some(Err(e));
                }
                Some(Ok(info)) => return Some(Ok(info)),
                None => self.finished = true,
            }
        }
        None
    }
}
