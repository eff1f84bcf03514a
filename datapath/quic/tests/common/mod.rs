//! What the loopback tests of ccp-quic share.

use ccp_quic::ReceiverConfig;
use std::time::Duration;

/// A receiver on an ephemeral loopback port that ends after `flows` flows (or 30 s idle).
pub fn loopback_receiver(flows: usize) -> ReceiverConfig {
    ReceiverConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        expect_flows: Some(flows),
        idle_timeout: Some(Duration::from_secs(30)),
        ..ReceiverConfig::default()
    }
}
