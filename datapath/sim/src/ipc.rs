//! The simulator's side of the agent IPC: [`SimIpc`] implements `portus::ipc::Ipc`, so the real
//! portus runtime with the real agent runs in the simulator's thread and its receive loop drives
//! virtual time.
//!
//! `recv` advances the simulation until the next datapath-to-agent message is due and returns it
//! (one message per call); `send` schedules an agent message for the engine one IPC delay later.
//! When the scenario ends, `recv` clears the stop flag given to `RunBuilder::with_stop_handle`
//! and fails, which ends portus's loop.

use crate::sim::World;
use portus::ipc::Ipc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A portus IPC whose peer is the simulated datapath.
pub struct SimIpc {
    world: Arc<Mutex<World>>,
    stop: Arc<AtomicBool>,
}

impl SimIpc {
    /// An IPC to `world`; `stop` is the flag portus keeps running while it is true.
    pub fn new(world: Arc<Mutex<World>>, stop: Arc<AtomicBool>) -> SimIpc {
        SimIpc { world, stop }
    }
}

fn poisoned() -> portus::Error {
    portus::Error("the simulation panicked".into())
}

impl Ipc for SimIpc {
    /// The datapath's id (one datapath engine per simulation: always 0).
    type Addr = u32;

    fn name() -> String {
        "sim".into()
    }

    fn send(&self, msg: &[u8], _to: &u32) -> portus::Result<()> {
        self.world.lock().map_err(|_| poisoned())?.agent_send(msg);
        Ok(())
    }

    fn recv(&self, buf: &mut [u8]) -> portus::Result<(usize, u32)> {
        let mut w = match self.world.lock() {
            Ok(w) => w,
            Err(_) => {
                self.stop.store(false, Ordering::SeqCst);
                return Err(poisoned());
            }
        };
        loop {
            match w.next_agent_message() {
                Some(m) if m.len() <= buf.len() => {
                    buf[..m.len()].copy_from_slice(&m);
                    return Ok((m.len(), 0));
                }
                // portus receives at most 1024 bytes; no libccp message is that long, but never
                // hand over a truncated one.
                Some(_) => continue,
                None => {
                    self.stop.store(false, Ordering::SeqCst);
                    return Err(portus::Error("simulation finished".into()));
                }
            }
        }
    }

    fn close(&mut self) -> portus::Result<()> {
        Ok(())
    }
}
