//! Ray's Jobs API as krayne speaks it to a head's dashboard: the client
//! (`client`: one HTTP/1 request per connection to the head, reached as
//! services are, and the log's WebSocket) and the wire (`wire`: the
//! bodies sent, the job objects read, Ray's answers as krayne's errors;
//! pure). The use cases (`jobs`) call these and nothing else of Ray's.

mod client;
pub(crate) mod wire;

/// Ray's path of one job.
pub(crate) fn job_path(id: &str) -> String {
    format!("/api/jobs/{id}")
}
