//! A TCP proxy a test can cut and restore, to take a dependency away
//! (and give it back) without touching the dependency itself.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use tokio::{net::TcpListener, sync::watch};

/// Forwards 127.0.0.1:`port` to `target` while up.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    up: Arc<AtomicBool>,
    cut: watch::Sender<u64>,
}

impl Proxy {
    /// Starts forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let up = Arc::new(AtomicBool::new(true));
        let (cut, _) = watch::channel(0u64);
        let (flag, cuts) = (up.clone(), cut.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !flag.load(Ordering::SeqCst) {
                    continue; // dropped: the connection closes at once
                }
                let mut cut_rx = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut_rx.changed() => {}
                    }
                });
            }
        });
        Self { addr, up, cut }
    }

    /// Refuses new connections and severs open ones.
    pub fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    /// Accepts connections again.
    pub fn up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}
