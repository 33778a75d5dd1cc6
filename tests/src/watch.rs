//! A REST watch read as a client would: NDJSON lines or Server-Sent
//! Events, one event at a time, as they arrive.

use std::time::Duration;

use serde_json::Value;

/// How the watch is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `application/x-ndjson`.
    Ndjson,
    /// `text/event-stream`.
    Sse,
}

/// One event of a watch.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The JSON object (a line, or an event's data).
    pub json: Value,
    /// SSE only: the `event:` name.
    pub event: Option<String>,
    /// SSE only: the `id:`.
    pub id: Option<String>,
}

impl Frame {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub fn kind(&self) -> &str {
        self.json["type"].as_str().unwrap_or("")
    }

    /// The event's version.
    pub fn version(&self) -> &str {
        self.json["resource_version"].as_str().unwrap_or("")
    }

    /// The cluster's name, if it carries one.
    pub fn cluster(&self) -> Option<&str> {
        self.json["cluster"]["name"].as_str()
    }
}

/// An open watch.
pub struct Watch {
    response: reqwest::Response,
    framing: Framing,
    buffer: Vec<u8>,
}

impl Watch {
    /// Opens `url` (a list route with `watch=true`) as `headers` say;
    /// a refusal comes back as its status and problem document.
    pub async fn open(url: &str, headers: &[(&str, &str)], framing: Framing) -> Result<Self, (u16, Value)> {
        let mut request = reqwest::Client::new().get(url);
        if framing == Framing::Sse {
            request = request.header("accept", "text/event-stream");
        }
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request.send().await.expect("the watch request is sent");
        let status = response.status().as_u16();
        if status != 200 {
            let body = response.json().await.unwrap_or(Value::Null);
            return Err((status, body));
        }
        let expected = match framing {
            Framing::Ndjson => "application/x-ndjson",
            Framing::Sse => "text/event-stream",
        };
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(content_type.starts_with(expected), "content-type {content_type}");
        Ok(Self {
            response,
            framing,
            buffer: Vec::new(),
        })
    }

    /// The next event within `within`; `None` when the stream ended or
    /// nothing came in time.
    pub async fn next(&mut self, within: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(frame) = self.take() {
                return Some(frame);
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buffer.extend_from_slice(&bytes),
                Ok(Ok(None) | Err(_)) | Err(_) => return None,
            }
        }
    }

    /// Every event until the server ends the stream, which must happen
    /// within `within`; `None` when it did not.
    pub async fn to_end(&mut self, within: Duration) -> Option<Vec<Frame>> {
        let deadline = tokio::time::Instant::now() + within;
        let mut frames = Vec::new();
        loop {
            while let Some(frame) = self.take() {
                frames.push(frame);
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buffer.extend_from_slice(&bytes),
                Ok(Ok(None)) => return Some(frames),
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }

    /// Events until one satisfies `done` (included), each within `within`.
    pub async fn until(&mut self, within: Duration, done: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let mut frames = Vec::new();
        loop {
            let Some(frame) = self.next(within).await else {
                panic!("the watch ended or went quiet before the awaited event; saw {frames:#?}");
            };
            let last = done(&frame);
            frames.push(frame);
            if last {
                return frames;
            }
        }
    }

    fn take(&mut self) -> Option<Frame> {
        match self.framing {
            Framing::Ndjson => {
                let end = self.buffer.iter().position(|b| *b == b'\n')?;
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let json = serde_json::from_slice(&line).expect("each line is JSON");
                Some(Frame {
                    json,
                    event: None,
                    id: None,
                })
            }
            Framing::Sse => loop {
                let end = self.buffer.windows(2).position(|w| w == b"\n\n")?;
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let text = String::from_utf8(block).expect("SSE is text");
                let (mut event, mut id, mut data) = (None, None, String::new());
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        event = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                // A comment (keep-alive) carries no data.
                if !data.is_empty() {
                    let json = serde_json::from_str(&data).expect("each event's data is JSON");
                    return Some(Frame { json, event, id });
                }
            },
        }
    }
}
