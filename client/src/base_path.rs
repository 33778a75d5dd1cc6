//! The local end of a tunnel to an HTTP service that serves under a base
//! path (Jupyter's `base_url`, which is the cluster's proxy path so that
//! the same notebook answers through the server): a GET outside the base
//! is redirected into it, so `http://127.0.0.1:PORT/` opens the notebook
//! as it does through Krayne's port-forward.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

/// Most of a request read before deciding: its request line fits (a
/// longer one is passed on as it is).
const LINE_LIMIT: usize = 8 * 1024;
/// How long a connection may take to send its request line before it is
/// passed on as it is.
const LINE_WAIT: Duration = Duration::from_secs(10);

/// What became of a connection's first bytes.
pub(crate) enum FirstRequest {
    /// It was answered here with a redirect: nothing to forward.
    Redirected,
    /// These bytes were read and go to the service first.
    Forward(Vec<u8>),
}

/// Reads `local`'s request line and redirects a GET or HEAD outside `base`
/// into it; anything else is left to the service.
pub(crate) async fn first_request(local: &mut TcpStream, base: &str) -> FirstRequest {
    let mut read = Vec::new();
    let mut buf = [0u8; 2048];
    let line_end = tokio::time::timeout(LINE_WAIT, async {
        while read.len() < LINE_LIMIT {
            match local.read(&mut buf).await {
                Ok(n) if n > 0 => read.extend_from_slice(&buf[..n]),
                _ => return None,
            }
            if let Some(at) = read.windows(2).position(|w| w == b"\r\n") {
                return Some(at);
            }
        }
        None
    })
    .await
    .ok()
    .flatten();
    let location = line_end
        .and_then(|at| std::str::from_utf8(&read[..at]).ok())
        .and_then(|line| redirect_for(line, base));
    let Some(location) = location else {
        return FirstRequest::Forward(read);
    };
    let answer =
        format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let _ = local.write_all(answer.as_bytes()).await;
    let _ = local.shutdown().await;
    FirstRequest::Redirected
}

/// Where a request line (`GET /lab HTTP/1.1`) outside `base` (ending in
/// `/`) is sent: the same path under the base. `None` for one inside it,
/// other methods and anything that is not a request line.
fn redirect_for(line: &str, base: &str) -> Option<String> {
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !version.starts_with("HTTP/1.") || !matches!(method, "GET" | "HEAD") {
        return None;
    }
    if !target.starts_with('/') || target.starts_with(base) || !base.ends_with('/') {
        return None;
    }
    let rest = target.trim_start_matches('/');
    let bare = base.trim_end_matches('/');
    // The base without its slash (`…/proxy`, `…/proxy?x`) is the base.
    let rest = match target.strip_prefix(bare) {
        Some(after) if after.is_empty() || after.starts_with('?') => after,
        _ => rest,
    };
    // A location is a path: no header can be cut into it.
    if rest.chars().any(|c| c.is_control()) {
        return None;
    }
    Some(format!("{base}{rest}"))
}

#[cfg(test)]
mod tests {
    use super::redirect_for;

    const BASE: &str = "/v1/namespaces/ml-team/clusters/demo/services/notebook/proxy/";

    #[test]
    fn gets_outside_the_base_go_under_it() {
        let to = |line: &str| redirect_for(line, BASE);
        assert_eq!(to("GET / HTTP/1.1").as_deref(), Some(BASE));
        assert_eq!(to("GET /lab HTTP/1.1"), Some(format!("{BASE}lab")));
        assert_eq!(to("HEAD /tree?x=1 HTTP/1.0"), Some(format!("{BASE}tree?x=1")));
        let bare = BASE.trim_end_matches('/');
        assert_eq!(to(&format!("GET {bare} HTTP/1.1")).as_deref(), Some(BASE));
        assert_eq!(to(&format!("GET {bare}?a=b HTTP/1.1")), Some(format!("{BASE}?a=b")));
    }

    #[test]
    fn the_rest_is_left_to_the_service() {
        let to = |line: &str| redirect_for(line, BASE);
        assert_eq!(to(&format!("GET {BASE}lab HTTP/1.1")), None);
        assert_eq!(to("POST /api/kernels HTTP/1.1"), None);
        assert_eq!(to("GET http://elsewhere/ HTTP/1.1"), None);
        assert_eq!(to("SSH-2.0-OpenSSH_9.2"), None);
        assert_eq!(to("GET / HTTP/2 extra"), None);
        assert_eq!(redirect_for("GET / HTTP/1.1", "/no-slash"), None);
    }
}
