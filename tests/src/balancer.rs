//! What a Kubernetes Service does for krayne's replicas, small: new
//! connections go round-robin to the replicas whose `/readyz` answers 200
//! (polled, as the kubelet's readiness probe feeds endpoints); open
//! connections stay where they are until either side closes them. For
//! rollouts: a replica that drains leaves the rotation but keeps its
//! connections.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::net::{TcpListener, TcpStream};

use crate::ServerProcess;

struct Endpoint {
    api: SocketAddr,
    ready: Arc<AtomicBool>,
}

/// A load balancer over replicas that come and go.
pub struct Balancer {
    /// Where clients connect.
    pub addr: SocketAddr,
    endpoints: Arc<Mutex<Vec<Endpoint>>>,
}

impl Balancer {
    /// Listens on a free port of 127.0.0.1, with no replica yet.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind balancer");
        let addr = listener.local_addr().expect("balancer addr");
        let endpoints: Arc<Mutex<Vec<Endpoint>>> = Arc::default();
        let (chosen, next) = (endpoints.clone(), Arc::new(AtomicUsize::new(0)));
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let ready: Vec<SocketAddr> = chosen
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|e| e.ready.load(Ordering::SeqCst))
                    .map(|e| e.api)
                    .collect();
                if ready.is_empty() {
                    continue; // no endpoint: refused
                }
                let api = ready[next.fetch_add(1, Ordering::Relaxed) % ready.len()];
                tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(api).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Self { addr, endpoints }
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Puts `server` behind the balancer; it gets connections while its
    /// `/readyz` answers 200 (checked every 100 ms, until it stops
    /// answering for good).
    pub fn add(&self, server: &ServerProcess) {
        let ready = Arc::new(AtomicBool::new(false));
        self.endpoints.lock().unwrap().push(Endpoint {
            api: server.api,
            ready: ready.clone(),
        });
        let url = format!("http://{}/readyz", server.ops);
        tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(1))
                .build()
                .expect("http client");
            let mut failures = 0;
            while failures < 50 {
                let answer = http.get(&url).send().await;
                failures = if answer.is_ok() { 0 } else { failures + 1 };
                let ok = answer.is_ok_and(|r| r.status().is_success());
                ready.store(ok, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }

    /// Whether `server` is in the rotation now.
    pub fn is_ready(&self, server: &ServerProcess) -> bool {
        self.endpoints
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.api == server.api && e.ready.load(Ordering::SeqCst))
    }
}
