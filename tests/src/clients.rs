//! Clients for both transports that say what went wrong when a test's
//! expectation fails.

use krayne_proto::v1::{
    audit_service_client::AuditServiceClient, cluster_service_client::ClusterServiceClient,
    identity_service_client::IdentityServiceClient, job_service_client::JobServiceClient,
    tunnel_service_client::TunnelServiceClient,
};
use reqwest::{Method, header::HeaderMap};
use serde_json::Value;
use tonic::{
    metadata::MetadataValue,
    service::{Interceptor, interceptor::InterceptedService},
    transport::Channel,
};

/// One REST answer.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Headers.
    pub headers: HeaderMap,
    /// Body as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// Body as text.
    pub text: String,
}

impl Reply {
    /// Requires `status`, showing the body when it differs.
    #[track_caller]
    pub fn expect(self, status: u16) -> Self {
        assert_eq!(self.status, status, "unexpected status; body: {}", self.text);
        self
    }

    /// Requires a problem document with `status` and `code`.
    #[track_caller]
    pub fn problem(self, status: u16, code: &str) -> Self {
        let reply = self.expect(status);
        let content_type = reply.header("content-type").unwrap_or_default();
        assert_eq!(content_type, "application/problem+json", "{}", reply.text);
        assert_eq!(reply.body["code"], code, "{}", reply.text);
        assert_eq!(reply.body["status"], status, "{}", reply.text);
        assert!(
            reply.body["request_id"].as_str().is_some_and(|r| !r.is_empty()),
            "{}",
            reply.text
        );
        reply
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }

    /// The `name` of every cluster in a cluster list.
    pub fn names(&self) -> Vec<&str> {
        self.body["clusters"]
            .as_array()
            .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
            .unwrap_or_default()
    }

    /// The field paths of a problem's violations.
    pub fn violation_fields(&self) -> Vec<String> {
        self.body["violations"]
            .as_array()
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| v["field"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A REST client.
#[derive(Clone)]
pub struct Rest {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Rest {
    /// A client for `base` sending `token`.
    pub fn new(base: &str, token: Option<String>) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: base.to_owned(),
            token,
        }
    }

    /// Sends any request.
    pub async fn send(&self, method: Method, path: &str, content_type: Option<&str>, body: Option<Vec<u8>>) -> Reply {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let res = req.send().await.expect("request");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let text = res.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, None, None).await
    }

    /// DELETE.
    pub async fn delete(&self, path: &str) -> Reply {
        self.send(Method::DELETE, path, None, None).await
    }

    /// POST a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        let bytes = serde_json::to_vec(body).expect("json");
        self.send(Method::POST, path, Some("application/json"), Some(bytes))
            .await
    }

    /// POST a YAML body.
    pub async fn post_yaml(&self, path: &str, body: &str) -> Reply {
        self.send(
            Method::POST,
            path,
            Some("application/yaml"),
            Some(body.as_bytes().to_vec()),
        )
        .await
    }
}

/// Adds `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct Bearer(MetadataValue<tonic::metadata::Ascii>);

impl Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut().insert("authorization", self.0.clone());
        Ok(req)
    }
}

/// gRPC clients with a token.
#[derive(Clone)]
pub struct Grpc {
    /// The plain channel (for health and reflection).
    pub channel: Channel,
    /// `krayne.v1.ClusterService`.
    pub clusters: ClusterServiceClient<InterceptedService<Channel, Bearer>>,
    /// `krayne.v1.IdentityService`.
    pub identity: IdentityServiceClient<InterceptedService<Channel, Bearer>>,
    /// `krayne.v1.AuditService`.
    pub audit: AuditServiceClient<InterceptedService<Channel, Bearer>>,
    /// `krayne.v1.TunnelService`.
    pub tunnels: TunnelServiceClient<InterceptedService<Channel, Bearer>>,
    /// `krayne.v1.JobService`.
    pub jobs: JobServiceClient<InterceptedService<Channel, Bearer>>,
    /// `krayne.v1.UsageService`.
    pub usage: krayne_proto::v1::usage_service_client::UsageServiceClient<InterceptedService<Channel, Bearer>>,
}

impl Grpc {
    /// Connects to `url` and authenticates every call with `token`.
    pub async fn connect(url: &str, token: &str) -> Self {
        let channel = Channel::from_shared(url.to_owned())
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let bearer = Bearer(format!("Bearer {token}").parse().expect("ascii token"));
        Self {
            clusters: ClusterServiceClient::with_interceptor(channel.clone(), bearer.clone()),
            identity: IdentityServiceClient::with_interceptor(channel.clone(), bearer.clone()),
            audit: AuditServiceClient::with_interceptor(channel.clone(), bearer.clone()),
            tunnels: TunnelServiceClient::with_interceptor(channel.clone(), bearer.clone()),
            jobs: JobServiceClient::with_interceptor(channel.clone(), bearer.clone()),
            usage: krayne_proto::v1::usage_service_client::UsageServiceClient::with_interceptor(
                channel.clone(),
                bearer,
            ),
            channel,
        }
    }
}

/// The field paths of a gRPC status's `BadRequest` details (none when it
/// has none).
pub fn bad_request_fields(status: &tonic::Status) -> Vec<String> {
    use tonic_types::StatusExt as _;
    status
        .get_error_details()
        .bad_request()
        .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
        .unwrap_or_default()
}
