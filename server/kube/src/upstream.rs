//! The two ways krayne reaches a head's services: dialling the pod's IP
//! (in a cluster, no load on the Kubernetes API) or through the API
//! server's `pods/portforward` (from anywhere the API is reachable). A
//! service bound to the pod's loopback has no address on the cluster
//! network: even the direct upstream reaches it through a port-forward,
//! which enters the pod's network namespace.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tokio_util::compat::TokioAsyncReadCompatExt as _;

use crate::domain::{Error, ServiceStream, ServiceTarget, ServiceUpstream};

/// How long a port-forward probe waits for the kubelet to say nothing
/// listens.
const PROBE_ERROR_WAIT: Duration = Duration::from_millis(250);

/// Dials `podIP:port`; a service on the pod's loopback through
/// `loopback`'s port-forward.
#[derive(Clone)]
pub struct DirectUpstream {
    connect_timeout: Duration,
    loopback: PortForwardUpstream,
}

impl DirectUpstream {
    /// Gives up on a connection after `connect_timeout`; reaches services
    /// on a pod's loopback through `loopback`.
    pub fn new(connect_timeout: Duration, loopback: PortForwardUpstream) -> Self {
        Self {
            connect_timeout,
            loopback,
        }
    }
}

#[async_trait::async_trait]
impl ServiceUpstream for DirectUpstream {
    async fn connect(&self, target: &ServiceTarget) -> Result<Box<dyn ServiceStream>, Error> {
        if target.on_loopback {
            return self.loopback.connect(target).await;
        }
        let Some(ip) = target.pod_ip.as_deref() else {
            return Err(Error::FailedPrecondition(format!(
                "head pod {} has no IP yet",
                target.pod
            )));
        };
        let unreachable = |why: String| {
            Error::Unavailable(format!(
                "port {} of head pod {} ({ip}) does not answer: {why}",
                target.port, target.pod
            ))
        };
        match tokio::time::timeout(self.connect_timeout, tokio::net::TcpStream::connect((ip, target.port))).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                Ok(Box::new(stream.compat()))
            }
            Ok(Err(e)) => Err(unreachable(e.to_string())),
            Err(_) => Err(unreachable(format!("no answer within {:?}", self.connect_timeout))),
        }
    }

    async fn probe(&self, target: &ServiceTarget) -> bool {
        if target.on_loopback {
            return self.loopback.probe(target).await;
        }
        match self.connect(target).await {
            Ok(mut stream) => {
                let _ = futures::AsyncWriteExt::close(&mut stream).await;
                true
            }
            Err(_) => false,
        }
    }

    fn half_close(&self, target: &ServiceTarget) -> bool {
        !target.on_loopback
    }

    fn mode(&self, target: &ServiceTarget) -> &'static str {
        if target.on_loopback { "port-forward" } else { "direct" }
    }
}

/// Opens a `pods/portforward` stream through the Kubernetes API for each
/// connection.
#[derive(Clone)]
pub struct PortForwardUpstream {
    client: kube::Client,
    connect_timeout: Duration,
}

impl PortForwardUpstream {
    /// Forwards through `client`'s API server.
    pub fn new(client: kube::Client, connect_timeout: Duration) -> Self {
        Self {
            client,
            connect_timeout,
        }
    }
}

#[async_trait::async_trait]
impl ServiceUpstream for PortForwardUpstream {
    async fn connect(&self, target: &ServiceTarget) -> Result<Box<dyn ServiceStream>, Error> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &target.namespace);
        let opened = tokio::time::timeout(self.connect_timeout, pods.portforward(&target.pod, &[target.port])).await;
        let mut forwarder = match opened {
            Ok(Ok(f)) => f,
            Ok(Err(e)) => return Err(refused(target, e)),
            Err(_) => {
                return Err(Error::Unavailable(format!(
                    "the port-forward to head pod {} did not open within {:?}",
                    target.pod, self.connect_timeout
                )));
            }
        };
        let stream = forwarder
            .take_stream(target.port)
            .ok_or_else(|| Error::Internal("the port-forward has no stream for its port".into()))?;
        // The forwarder's task ends with its stream; its error channel
        // (nothing listens on the port) is logged.
        if let Some(error) = forwarder.take_error(target.port) {
            let (pod, port) = (target.pod.clone(), target.port);
            tokio::spawn(async move {
                if let Some(message) = error.await {
                    tracing::info!(%pod, port, %message, "port-forward error from the pod");
                }
            });
        }
        Ok(Box::new(stream.compat()))
    }

    /// The forward opens before the kubelet dials the port: a port
    /// nothing listens on shows only on the error channel, so a probe
    /// waits a moment for it.
    async fn probe(&self, target: &ServiceTarget) -> bool {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &target.namespace);
        let Ok(Ok(mut forwarder)) =
            tokio::time::timeout(self.connect_timeout, pods.portforward(&target.pod, &[target.port])).await
        else {
            return false;
        };
        let stream = forwarder.take_stream(target.port);
        let answered = match forwarder.take_error(target.port) {
            Some(error) => !matches!(tokio::time::timeout(PROBE_ERROR_WAIT, error).await, Ok(Some(_))),
            None => true,
        };
        drop(stream);
        forwarder.abort();
        answered
    }

    fn half_close(&self, _: &ServiceTarget) -> bool {
        false
    }

    fn mode(&self, _: &ServiceTarget) -> &'static str {
        "port-forward"
    }
}

/// Why the API server refused a port-forward, for the caller. A 403 is
/// krayne's own Role lacking `get` or `create` on `pods/portforward`: an
/// internal error, logged for the operator.
fn refused(target: &ServiceTarget, e: kube::Error) -> Error {
    use kube::client::UpgradeConnectionError::ProtocolSwitch;
    if let kube::Error::UpgradeConnection(ProtocolSwitch(code)) = &e
        && *code == http::StatusCode::FORBIDDEN
    {
        tracing::error!(
            namespace = %target.namespace,
            "Kubernetes forbids krayne's port-forward: grant `get` and `create` on pods/portforward (the chart does, in both upstream modes: the notebook, code-server and SSH listen on the head's loopback, which only a port-forward reaches)"
        );
        return Error::Internal("Kubernetes forbids krayne to port-forward".into());
    }
    let why = match e {
        kube::Error::UpgradeConnection(ProtocolSwitch(code)) => format!("the API server answered {code}"),
        other => match crate::errors::translate(other) {
            Error::Internal(detail) => detail,
            translated => translated.to_string(),
        },
    };
    Error::Unavailable(format!(
        "cannot port-forward to head pod {} port {}: {why}",
        target.pod, target.port
    ))
}
