//! The fleet as one [`ServiceUpstream`]: a head's services are reached
//! through its own site's Kubernetes and network.

use super::Fleet;
use crate::domain::{Error, ServiceStream, ServiceTarget, ServiceUpstream};

#[async_trait::async_trait]
impl ServiceUpstream for Fleet {
    async fn connect(&self, target: &ServiceTarget) -> Result<Box<dyn ServiceStream>, Error> {
        let m = self.member(&target.site)?;
        m.answering()?;
        m.upstream.connect(target).await
    }

    async fn probe(&self, target: &ServiceTarget) -> bool {
        match self.member(&target.site) {
            Ok(m) if m.down().is_none() => m.upstream.probe(target).await,
            _ => false,
        }
    }

    fn half_close(&self, target: &ServiceTarget) -> bool {
        self.member(&target.site).is_ok_and(|m| m.upstream.half_close(target))
    }

    fn mode(&self, target: &ServiceTarget) -> &'static str {
        self.member(&target.site).map_or("none", |m| m.upstream.mode(target))
    }
}
