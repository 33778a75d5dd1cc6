//! Counts every request krayne makes to Kubernetes — its own calls and the
//! cache's lists and watches — by verb and resource, as a tower layer on
//! the kube client.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use http::{Request, Response};
use tower::{Layer, Service};

/// The layer.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Metered;

impl<S> Layer<S> for Metered {
    type Service = MeteredService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        MeteredService { inner }
    }
}

/// The service the layer wraps around kube's.
#[derive(Debug, Clone)]
pub(super) struct MeteredService<S> {
    inner: S,
}

impl<S, B, R> Service<Request<B>> for MeteredService<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (verb, resource) = labels(request.method().as_str(), request.uri().path(), request.uri().query());
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let outcome = match &result {
                Ok(r) if r.status().is_success() => "ok".to_owned(),
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "unreachable".to_owned(),
            };
            let labels = [("verb", verb), ("resource", resource)];
            metrics::histogram!("krayne_kube_request_duration_seconds", &labels)
                .record(started.elapsed().as_secs_f64());
            let [verb, resource] = labels;
            metrics::counter!("krayne_kube_requests_total", &[verb, resource, ("outcome", outcome)]).increment(1);
            result
        })
    }
}

/// The RBAC verb and the resource of a request, for metric labels.
fn labels(method: &str, path: &str, query: Option<&str>) -> (String, String) {
    const KNOWN: [&str; 4] = [krayne_core::manifest::RAYCLUSTERS, "pods", "events", "namespaces"];
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some((at, resource)) = segments.iter().enumerate().rev().find(|(_, s)| KNOWN.contains(s)) else {
        return (method.to_ascii_lowercase(), "other".to_owned());
    };
    // `namespaces/<ns>/pods`: the resource is `pods`, not the namespace.
    let named = segments.len() > at + 1;
    let watching = query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = match method {
        "GET" if watching => "watch",
        "GET" if named => "get",
        "GET" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        other => return (other.to_ascii_lowercase(), (*resource).to_owned()),
    };
    (verb.to_owned(), (*resource).to_owned())
}

#[cfg(test)]
mod tests {
    use super::labels;

    #[test]
    fn verbs_and_resources() {
        let l = |m, p, q| labels(m, p, q);
        let pair = |v: &str, r: &str| (v.to_owned(), r.to_owned());
        assert_eq!(l("GET", "/api/v1/namespaces", None), pair("list", "namespaces"));
        assert_eq!(
            l("GET", "/api/v1/namespaces/ml/pods", Some("labelSelector=x")),
            pair("list", "pods")
        );
        assert_eq!(
            l(
                "GET",
                "/apis/ray.io/v1/rayclusters",
                Some("watch=true&resourceVersion=5")
            ),
            pair("watch", "rayclusters")
        );
        assert_eq!(
            l("GET", "/apis/ray.io/v1/namespaces/ml/rayclusters/a", None),
            pair("get", "rayclusters")
        );
        assert_eq!(
            l("PATCH", "/apis/ray.io/v1/namespaces/ml/rayclusters/a", None),
            pair("patch", "rayclusters")
        );
        assert_eq!(l("GET", "/version", None), pair("get", "other"));
    }
}
