//! The quic backend: the emulator backend's testbed, agent and flows ([`super::emu`]), with
//! the flows carried by `ccp-quic` (QUIC on s2n-quic, the agent as its congestion controller)
//! instead of `ccp-udp`. Everything else — link, queue, delay, loss, the agent, the summaries
//! read into [`RunData`] — is the emu backend's, so a recipe compares the two datapaths on the
//! same emulated link by switching `backend: emu` to `backend: quic`. The receiver writes its
//! fresh self-signed certificate to `raw/cert.pem`, which the sender trusts. Needs root.

use super::emu::{Transport, run_with};
use super::{BackendError, RunContext};
use crate::data::RunData;

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
    Ok(data)
}
