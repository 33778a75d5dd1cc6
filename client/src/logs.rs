//! A followed job log that survives a server ending it with `Unavailable`
//! (a replica shutting down in a rollout, an idle cut): it reopens and
//! skips what it already delivered, so nothing is missed and nothing
//! repeats. A job's log only grows, and every follow starts at its
//! beginning, so the bytes delivered so far are the place to resume.

use backon::{BackoffBuilder as _, ExponentialBackoff};
use futures::{Stream, StreamExt as _, stream::BoxStream};

use crate::{Client, ClientError, proto};

type Chunks = BoxStream<'static, Result<proto::JobLogChunk, tonic::Status>>;

struct Tail {
    client: Client,
    job: proto::JobRef,
    current: Option<Chunks>,
    /// Bytes of the log delivered so far.
    delivered: usize,
    /// Bytes of the reopened log still to skip.
    skip: usize,
    backoff: ExponentialBackoff,
    finished: bool,
}

impl Client {
    /// A job's log from its start as it grows, until the job ends
    /// (viewer): chunks of whole lines. Resumed where it was when a server
    /// ends it with `Unavailable`, as the retry policy allows; other
    /// errors end it.
    pub async fn tail_job_logs(
        &self,
        namespace: &str,
        name: &str,
        id: &str,
    ) -> Result<impl Stream<Item = Result<String, ClientError>> + Unpin + use<>, ClientError> {
        let job = crate::jobs::job_ref(namespace, name, id);
        let first = self.open_log_tail(&job).await?;
        let tail = Tail {
            client: self.clone(),
            job,
            current: Some(first),
            delivered: 0,
            skip: 0,
            backoff: self.retry.backoff().build(),
            finished: false,
        };
        Ok(futures::stream::unfold(tail, |mut tail| async move {
            let item = tail.next().await?;
            Some((item, tail))
        })
        .boxed())
    }

    async fn open_log_tail(&self, job: &proto::JobRef) -> Result<Chunks, ClientError> {
        Ok(self
            .jobs_service()
            .tail_job_logs(job.clone())
            .await?
            .into_inner()
            .boxed())
    }
}

impl Tail {
    async fn next(&mut self) -> Option<Result<String, ClientError>> {
        while !self.finished {
            let Some(current) = self.current.as_mut() else {
                match self.client.open_log_tail(&self.job).await {
                    Ok(chunks) => {
                        self.current = Some(chunks);
                        self.skip = self.delivered;
                    }
                    Err(e) if e.is_unavailable() => {
                        if let Err(e) = self.pause(e).await {
                            return self.end(e);
                        }
                    }
                    Err(e) => return self.end(e),
                }
                continue;
            };
            match current.next().await.map(|r| r.map_err(ClientError::from)) {
                Some(Ok(chunk)) => match unseen(&mut self.skip, chunk.text) {
                    Some(text) if text.is_empty() => {}
                    Some(text) => {
                        self.backoff = self.client.retry.backoff().build();
                        self.delivered += text.len();
                        return Some(Ok(text));
                    }
                    None => {
                        return self.end(ClientError::new(
                            tonic::Code::DataLoss,
                            "the job's log, followed again, differs from what was delivered",
                        ));
                    }
                },
                Some(Err(e)) if e.is_unavailable() => {
                    self.current = None;
                    if let Err(e) = self.pause(e).await {
                        return self.end(e);
                    }
                }
                Some(Err(e)) => return self.end(e),
                None => self.finished = true,
            }
        }
        None
    }

    /// Waits before reopening, or gives `e` back when retries ran out.
    async fn pause(&mut self, e: ClientError) -> Result<(), ClientError> {
        let pause = self.backoff.next().ok_or(e)?;
        tokio::time::sleep(pause).await;
        Ok(())
    }

    fn end(&mut self, e: ClientError) -> Option<Result<String, ClientError>> {
        self.finished = true;
        Some(Err(e))
    }
}

/// What of `text` was not delivered before the stream was reopened, with
/// `skip` bytes of the reopened log still to pass over; `None` when the
/// cut falls inside a character (the log is not the one delivered).
fn unseen(skip: &mut usize, text: String) -> Option<String> {
    if *skip == 0 {
        return Some(text);
    }
    let cut = (*skip).min(text.len());
    *skip -= cut;
    text.get(cut..).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::unseen;

    #[test]
    fn a_reopened_log_passes_over_what_was_delivered_however_it_is_cut() {
        // "héllo\nwörld\n" was delivered up to and including "wö".
        let mut skip = "héllo\nwö".len();
        let mut got = String::new();
        for chunk in ["hé", "llo\nw", "örld\n", "more\n"] {
            got.push_str(&unseen(&mut skip, chunk.to_owned()).unwrap());
        }
        assert_eq!(got, "rld\nmore\n");
        assert_eq!(skip, 0);
        assert_eq!(unseen(&mut 0, "as is".into()).as_deref(), Some("as is"));
        // A cut inside a character: not the log that was delivered.
        assert_eq!(unseen(&mut 2, "é!".into()), Some("!".into()));
        assert_eq!(unseen(&mut 1, "é!".into()), None);
    }
}
