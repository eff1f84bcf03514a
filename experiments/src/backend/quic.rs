//! The quic backend: the emulator backend's testbed, agent and flows ([`super::emu`]), with
//! the flows carried by `ccp-quic` (QUIC on s2n-quic, the agent as its congestion controller)
//! instead of `ccp-udp`. Everything else — link, queue, delay, loss, the agent, the summaries
//! read into [`RunData`] — is the emu backend's, so a recipe compares the two datapaths on the
//! same emulated link by switching `backend: emu` to `backend: quic`. The receiver writes its
//! fresh self-signed certificate to `raw/cert.pem`, which the sender trusts. Needs root.
//!
//! Both transports' summaries have one shape: `ccp-quic recv`'s `arrivals` — the stream
//! content bytes that had reached it every 10 ms, in order or beyond a hole, from when the
//! connection's first packet arrived, as `ccp-udp recv` counts from the flow's HELLO — become
//! each flow's [`FlowData::arrivals`] on the run's clock exactly as ccp-udp's do (matched by
//! flow id, their zero half the handshake's RTT before the sender's), so the metrics split a
//! flow's bytes at the warm-up on what had crossed the link by then. The sender's trace
//! counts acknowledged stream content bytes too (beyond a hole in `received_bytes`), so the
//! goodput series is in the same unit as the flows' delivered bytes.

use super::emu::{Transport, run_with};
use super::{BackendError, RunContext};
use crate::data::{FlowData, RunData};
use crate::recipe::kernel_cc;

/// Run one run through the emulator with `ccp-quic` flows.
pub fn run(ctx: &RunContext) -> Result<RunData, BackendError> {
    let raw = ctx.dir.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| BackendError::io(&raw, e))?;
    let cert = raw.join("cert.pem");
    // The reverse flows' receiver (in the sender host) makes a certificate of its own.
    let cert_rev = raw.join("cert-rev.pem");
    // A certificate left by an earlier run in the same directory must not be trusted.
    let _ = std::fs::remove_file(&cert);
    let _ = std::fs::remove_file(&cert_rev);
    let mut data = run_with(
        ctx,
        &Transport {
            bin: "ccp-quic",
            recv_name: "ccp-quic recv",
            send_name: "ccp-quic send",
            recv_args: vec!["--cert-out".into(), cert.clone().into()],
            send_args: vec!["--cert".into(), cert.into()],
            rev_recv_args: vec!["--cert-out".into(), cert_rev.clone().into()],
            rev_send_args: vec!["--cert".into(), cert_rev.into()],
        },
    )?;
    data.notes.push(
        "datapath: ccp-quic (s2n-quic); goodput counts stream bytes, the link carries QUIC packets"
            .into(),
    );
    if let Some(note) = missing_arrivals(&data.flows) {
        data.notes.push(note);
    }
    Ok(data)
}

/// A note naming the `ccp-quic` flows that delivered bytes but came without the receiver's
/// arrival records (a receiver from before it wrote them, or a flow id the receiver never
/// learnt), whose goodput after the warm-up then splits on the sender's trace instead; kernel
/// TCP flows have no such records anywhere.
fn missing_arrivals(flows: &[FlowData]) -> Option<String> {
    let missing: Vec<String> = flows
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            kernel_cc(&f.algorithm).is_none() && f.bytes_delivered > 0 && f.arrivals.is_empty()
        })
        .map(|(i, _)| i.to_string())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "flows {} came without the receiver's arrival records: their goodput after the \
             warm-up splits on the sender's trace",
            missing.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_without_arrival_records_are_named() {
        let with = FlowData {
            algorithm: "bbr".into(),
            bytes_delivered: 5000,
            arrivals: vec![(0.1, 1000), (0.2, 5000)],
            ..FlowData::default()
        };
        let without = FlowData {
            arrivals: vec![],
            ..with.clone()
        };
        let kernel = FlowData {
            algorithm: "kernel:cubic".into(),
            ..without.clone()
        };
        let idle = FlowData {
            bytes_delivered: 0,
            ..without.clone()
        };
        assert_eq!(
            missing_arrivals(&[with.clone(), kernel.clone(), idle]),
            None
        );
        let note = missing_arrivals(&[with, without.clone(), kernel, without]).unwrap();
        assert!(note.starts_with("flows 1, 3 came without"), "{note}");
    }
}
