//! Pod IPs a client on this machine can connect to: each sandbox claims a
//! random `127.X.Y.0/24` block (Linux routes all of 127.0.0.0/8 to
//! loopback) and hands its addresses to pods in turn, so a head pod's
//! stand-ins listen on `podIP:port` as a real pod's servers do.
//!
//! A block is claimed by binding a listener on its `.1` address and a fixed
//! port, held as long as the sandbox runs: a second sandbox on the machine
//! (the test suite runs many) finds that bind taken and draws another
//! block. Where no such address can be bound (other systems route only
//! 127.0.0.1), pods get cluster-style `10.244.x.y` addresses that nothing
//! listens on, and the stand-ins are out of reach.

use std::{
    collections::BTreeSet,
    net::{Ipv4Addr, TcpListener},
};

/// The port a block's claim listens on (`127.X.Y.1`); below Linux's
/// ephemeral range, so no outgoing connection holds it by chance.
const CLAIM_PORT: u16 = 30_001;
/// Blocks tried before giving up.
const ATTEMPTS: usize = 64;
/// Host numbers per block: `.2` to `.254`.
const HOSTS: u32 = 253;

/// Where pods' IPs come from.
pub(crate) struct PodAddresses {
    block: Option<Block>,
    issued: u32,
}

struct Block {
    prefix: [u8; 3],
    /// Held, not used: the claim on the block.
    _claim: TcpListener,
}

impl PodAddresses {
    /// Claims a free loopback block, or falls back to unbindable addresses
    /// (and says so once).
    pub(crate) fn claim() -> Self {
        let mut why = String::from("every block tried was taken");
        for _ in 0..ATTEMPTS {
            let prefix = [127, fastrand::u8(1..=254), fastrand::u8(..)];
            let addr = Ipv4Addr::new(prefix[0], prefix[1], prefix[2], 1);
            match TcpListener::bind((addr, CLAIM_PORT)) {
                Ok(claim) => {
                    return Self {
                        block: Some(Block { prefix, _claim: claim }),
                        issued: 0,
                    };
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {}
                Err(e) => {
                    why = e.to_string();
                    break;
                }
            }
        }
        tracing::warn!(
            reason = %why,
            "pod IPs cannot be loopback addresses here; head pods' services are out of reach"
        );
        Self { block: None, issued: 0 }
    }

    /// The next pod's IP not in `taken` (live pods' IPs; after 253 pods
    /// the block wraps), and whether something can listen on it.
    pub(crate) fn next_free(&mut self, taken: &BTreeSet<String>) -> (String, bool) {
        let mut candidate = self.next();
        for _ in 0..HOSTS {
            if !taken.contains(&candidate.0) {
                break;
            }
            candidate = self.next();
        }
        candidate
    }

    /// The next pod's IP, and whether something can listen on it.
    fn next(&mut self) -> (String, bool) {
        let n = self.issued;
        self.issued = self.issued.wrapping_add(1);
        match &self.block {
            Some(b) => {
                let host = n % HOSTS + 2;
                (format!("{}.{}.{}.{host}", b.prefix[0], b.prefix[1], b.prefix[2]), true)
            }
            None => (format!("10.244.{}.{}", (n + 1) / 250, (n + 1) % 250 + 2), false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_claims_get_two_blocks_and_distinct_addresses() {
        let mut a = PodAddresses::claim();
        let mut b = PodAddresses::claim();
        let (first, bindable) = a.next();
        let (second, _) = a.next();
        let (other, _) = b.next();
        assert_ne!(first, second);
        if bindable {
            assert_ne!(first, other, "blocks must differ");
            assert!(first.starts_with("127.") && first.ends_with(".2"), "{first}");
            let ip: Ipv4Addr = second.parse().unwrap();
            TcpListener::bind((ip, 0)).unwrap();
        }
    }

    #[test]
    fn live_pods_keep_their_addresses_when_the_block_wraps() {
        let mut a = PodAddresses::claim();
        let (first, _) = a.next_free(&BTreeSet::new());
        for _ in 1..HOSTS {
            a.next();
        }
        let (after_wrap, _) = a.next_free(&BTreeSet::from([first.clone()]));
        assert_ne!(after_wrap, first);
    }
}
