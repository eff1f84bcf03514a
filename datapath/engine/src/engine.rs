//! The datapath engine: libccp's `ccp_datapath` and `ccp_connection` state and
//! entry points.
//!
//! This module owns the connection table (socket id = slot + 1, lowest free
//! slot first, slots reused, no upper bound), the program table (append-only
//! slots, cleared when an agent installs `program_uid == 1`), the fallback
//! timer, handling of agent messages ([`Engine::read_msg`]), CREATE
//! (re)transmission, close messages, the per-ACK machine
//! ([`Engine::invoke`]) and the VERSION handshake. See the crate
//! documentation for the deliberate deviations from libccp.

use crate::program::{Machine, Program, Registers, since_us};
use crate::wire::{self, FromAgent, Header, UpdateField, implicit, reg};
use crate::{Clock, DatapathOps, EngineConfig, Error, ExtPrimitives, FlowInfo, Primitives};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tracing::{debug, warn};

/// libccp's `CREATE_TIMEOUT_US`: least time between two CREATE attempts.
const CREATE_TIMEOUT_US: u64 = 100_000;

/// Register updates staged by UPDATE_FIELDS / CHANGE_PROG, applied at the next
/// invoke.
#[derive(Clone, Debug, Default)]
struct Pending {
    /// Control register updates in staging order (a later one for the same
    /// register wins, as libccp's per-register slot does).
    control: Vec<(u8, u64)>,
    cwnd: Option<u64>,
    rate: Option<u64>,
}

impl Pending {
    fn clear(&mut self) {
        self.control.clear();
        self.cwnd = None;
        self.rate = None;
    }

    /// libccp's `stage_update`.
    fn stage(&mut self, u: &UpdateField) -> Result<(), Error> {
        match u.reg_type {
            reg::NONVOLATILE_CONTROL | reg::VOLATILE_CONTROL => {
                let index = u8::try_from(u.reg_index)
                    .ok()
                    .filter(|&i| usize::from(i) < wire::MAX_CONTROL_REG)
                    .ok_or(Error::UpdateInvalidRegIndex { index: u.reg_index })?;
                self.control.push((index, u.value));
                Ok(())
            }
            reg::IMPLICIT => {
                match u.reg_index {
                    implicit::CWND => self.cwnd = Some(u.value),
                    implicit::RATE => self.rate = Some(u.value),
                    _ => {}
                }
                Ok(())
            }
            reg_type => Err(Error::UpdateInvalidRegType {
                reg_type,
                index: u.reg_index,
            }),
        }
    }

    fn stage_all(&mut self, updates: &[UpdateField]) -> Result<(), Error> {
        updates.iter().try_for_each(|u| self.stage(u))
    }
}

/// One live connection (libccp's `ccp_connection` plus `ccp_priv_state`).
#[derive(Clone, Debug)]
struct Conn {
    info: FlowInfo,
    sent_create: bool,
    /// Time of the last CREATE attempt (0: never).
    last_create_sent: u64,
    implicit_time_zero: u64,
    /// Program table slot (libccp's `program_index - 1`).
    program: Option<usize>,
    staged_program: Option<usize>,
    regs: Registers,
    pending: Pending,
}

/// A libccp-compatible datapath with an injected clock.
///
/// Typical use: [`Engine::new`], [`Engine::init`] (sends READY), then for each
/// flow [`Engine::connection_start`], [`Engine::invoke`] per ACK and
/// [`Engine::connection_free`]; hand every message from the agent to
/// [`Engine::read_msg`].
#[derive(Debug)]
pub struct Engine<C: Clock> {
    clock: C,
    config: EngineConfig,
    time_zero: u64,
    last_msg_sent: u64,
    in_fallback: bool,
    programs: Vec<Program>,
    conns: Vec<Option<Box<Conn>>>,
    free_slots: BinaryHeap<Reverse<usize>>,
    live: usize,
    agent_version: Option<u32>,
    refused: bool,
}

impl<C: Clock> Engine<C> {
    /// A new engine; call [`Engine::init`] before use.
    pub fn new(clock: C, config: EngineConfig) -> Self {
        let time_zero = clock.now_ns();
        Self {
            clock,
            config,
            time_zero,
            last_msg_sent: 0,
            in_fallback: false,
            programs: Vec::new(),
            conns: Vec::new(),
            free_slots: BinaryHeap::new(),
            live: 0,
            agent_version: None,
            refused: false,
        }
    }

    /// The engine's clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// libccp's `ccp_init`: send READY(id), then clear the program table, set
    /// the datapath's time zero and stop the fallback timer. Also forgets the
    /// agent's version (a new agent will announce its own). Connections are
    /// kept. A failed READY send is reported as [`Error::Send`] after all of
    /// this is done (libccp ignores it); call `init` again to retry.
    pub fn init(&mut self, ops: &mut (impl DatapathOps + ?Sized)) -> Result<(), Error> {
        if self.config.fallback_timeout_us == 0 {
            return Err(Error::MissingArg("fallback_timeout_us must be nonzero"));
        }
        let sent = ops.send_msg(&wire::serialize_ready(self.config.id));
        if let Err(e) = &sent {
            warn!("could not send READY: {e}");
        }
        self.programs.clear();
        self.time_zero = self.clock.now_ns();
        self.last_msg_sent = 0;
        self.in_fallback = false;
        self.agent_version = None;
        self.refused = false;
        sent.map_err(Error::Send)
    }

    /// libccp's `ccp_connection_start`: take the lowest free slot (socket id =
    /// slot + 1) and send CREATE. A failed send is not an error: CREATE is
    /// retried by [`Engine::invoke`] at most every 100 ms, and the fallback
    /// timer starts.
    pub fn connection_start(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        info: FlowInfo,
    ) -> Result<u32, Error> {
        if info.cong_alg.len() >= wire::MAX_CONG_ALG_SIZE {
            return Err(Error::CongAlgTooLong(info.cong_alg.len()));
        }
        let slot = match self.free_slots.peek() {
            Some(&Reverse(s)) => s,
            None => self.conns.len(),
        };
        let sid = u32::try_from(slot + 1).map_err(|_| Error::TooManyConnections)?;
        let now = self.clock.now_ns();
        let mut conn = Box::new(Conn {
            info,
            sent_create: false,
            last_create_sent: 0,
            implicit_time_zero: self.time_zero,
            program: None,
            staged_program: None,
            regs: Registers::default(),
            pending: Pending::default(),
        });
        self.send_create(ops, sid, &mut conn, now);
        if slot == self.conns.len() {
            self.conns.push(Some(conn));
        } else {
            self.free_slots.pop();
            if let Some(s) = self.conns.get_mut(slot) {
                *s = Some(conn);
            }
        }
        self.live += 1;
        Ok(sid)
    }

    /// libccp's `ccp_connection_free`: free the slot and send the close
    /// message (MEASURE with uid 0 and no fields). A failed close send is only
    /// logged, as in libccp.
    pub fn connection_free(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        sid: u32,
    ) -> Result<(), Error> {
        let slot = sid_slot(sid).ok_or(Error::UnknownConnection)?;
        match self.conns.get_mut(slot) {
            Some(c @ Some(_)) => *c = None,
            _ => return Err(Error::UnknownConnection),
        }
        self.free_slots.push(Reverse(slot));
        self.live -= 1;
        if let Err(e) = ops.send_msg(&wire::serialize_close(sid))
            && !self.in_fallback
        {
            warn!(sid, "could not send close message: {e}");
        }
        Ok(())
    }

    /// Whether the engine is in fallback: the agent has been unreachable for
    /// longer than the fallback timeout (as last seen by [`Engine::invoke`]),
    /// or the agent was refused for speaking another protocol version. The
    /// datapath should then use its own congestion control.
    pub fn in_fallback(&self) -> bool {
        self.in_fallback || self.refused
    }

    /// Number of live connections.
    pub fn num_connections(&self) -> usize {
        self.live
    }

    /// The protocol version the agent announced, if it sent VERSION since the
    /// last [`Engine::init`].
    pub fn agent_version(&self) -> Option<u32> {
        self.agent_version
    }

    fn version_mismatch(&self) -> Error {
        Error::VersionMismatch {
            agent: self.agent_version.unwrap_or(0),
            datapath: self.config.protocol_version,
        }
    }

    fn update_fto_timer(&mut self, now: u64) {
        if self.last_msg_sent == 0 {
            self.last_msg_sent = now;
        }
    }

    fn turn_off_fto_timer(&mut self) {
        if self.in_fallback {
            debug!("agent reachable again: leaving fallback");
        }
        self.in_fallback = false;
        self.last_msg_sent = 0;
    }

    /// libccp's `_check_fto`: true (and fallback entered) when a send failed
    /// more than `fto_us` ago and no agent message arrived since.
    fn check_fto(&mut self, now: u64) -> bool {
        let since = since_us(now, self.last_msg_sent);
        let expired = self.last_msg_sent != 0 && since > self.config.fallback_timeout_us;
        if expired && !self.in_fallback {
            warn!("entering fallback: {since} us since a send to the agent failed");
        }
        self.in_fallback = expired;
        expired
    }

    /// libccp's `send_conn_create`, for a connection not stored in the table.
    fn send_create(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        sid: u32,
        conn: &mut Conn,
        now: u64,
    ) {
        if conn.last_create_sent != 0 && since_us(now, conn.last_create_sent) < CREATE_TIMEOUT_US {
            return; // LIBCCP_CREATE_PENDING
        }
        conn.last_create_sent = now;
        let msg = match wire::serialize_create(sid, &conn.info) {
            Ok(m) => m,
            // checked in connection_start; nothing sensible to send otherwise
            Err(_) => return,
        };
        match ops.send_msg(&msg) {
            Ok(()) => conn.sent_create = true,
            Err(e) => {
                if !self.in_fallback {
                    warn!(sid, "could not send CREATE: {e}");
                }
                self.update_fto_timer(now);
            }
        }
    }

    /// libccp's `ccp_invoke`, to be called on every ACK with that ACK's
    /// measurements.
    ///
    /// In order: a refused agent gives [`Error::VersionMismatch`]; an expired
    /// fallback timer gives [`Error::FallbackTimedOut`]; if CREATE has not
    /// gone out yet it is retried (at most every 100 ms) and nothing else
    /// happens. Otherwise `Cwnd`/`Rate` registers take `snd_cwnd`/`snd_rate`,
    /// a staged program change and staged updates are applied (calling
    /// `set_cwnd`/`set_rate_abs` for nonzero `Cwnd`/`Rate` updates), and the
    /// program runs; afterwards nonzero `Cwnd` and `Rate` registers are applied
    /// and a requested report is sent. An instruction error aborts the run
    /// with no callbacks and no report.
    pub fn invoke(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        sid: u32,
        prims: &Primitives,
    ) -> Result<(), Error> {
        self.invoke_ext(ops, sid, prims, &ExtPrimitives::default())
    }

    /// [`Engine::invoke`] with this engine's extended measurements as well
    /// (see [`ExtPrimitives`]); with `ExtPrimitives::default()` it is
    /// [`Engine::invoke`].
    pub fn invoke_ext(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        sid: u32,
        prims: &Primitives,
        ext: &ExtPrimitives,
    ) -> Result<(), Error> {
        if self.refused {
            return Err(self.version_mismatch());
        }
        let now = self.clock.now_ns();
        if self.check_fto(now) {
            return Err(Error::FallbackTimedOut);
        }
        let slot = sid_slot(sid).ok_or(Error::UnknownConnection)?;
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return Err(Error::UnknownConnection);
        };
        let result = if conn.sent_create {
            self.run_conn(ops, sid, &mut conn, prims, ext, now)
        } else {
            self.send_create(ops, sid, &mut conn, now);
            Ok(())
        };
        if let Some(s) = self.conns.get_mut(slot) {
            *s = Some(conn);
        }
        result
    }

    fn run_conn(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        sid: u32,
        conn: &mut Conn,
        prims: &Primitives,
        ext: &ExtPrimitives,
        now: u64,
    ) -> Result<(), Error> {
        conn.regs.implicit[implicit::CWND as usize] = u64::from(prims.snd_cwnd);
        conn.regs.implicit[implicit::RATE as usize] = prims.snd_rate;

        if let Some(slot) = conn.staged_program.take() {
            conn.program = Some(slot);
            if let Some(p) = self.programs.get(slot) {
                p.reset_state(&mut conn.regs);
                p.init_register_state(&mut conn.regs);
            }
            conn.implicit_time_zero = now;
            conn.regs.implicit[implicit::US_ELAPSED as usize] = 0;
        }

        for &(i, v) in &conn.pending.control {
            if let Some(r) = conn.regs.control.get_mut(usize::from(i)) {
                *r = v;
            }
        }
        if let Some(cwnd) = conn.pending.cwnd {
            conn.regs.implicit[implicit::CWND as usize] = cwnd;
            if cwnd != 0 {
                ops.set_cwnd(sid, cwnd as u32);
            }
        }
        if let Some(rate) = conn.pending.rate {
            conn.regs.implicit[implicit::RATE as usize] = rate;
            if rate != 0 {
                ops.set_rate_abs(sid, rate as u32);
            }
        }
        conn.pending.clear();

        let Some(program) = conn.program.and_then(|s| self.programs.get(s)) else {
            return Err(Error::ProgIsNull);
        };
        conn.regs.implicit[implicit::EXPR_FLAG as usize] = 0;
        conn.regs.implicit[implicit::SHOULD_FALLTHROUGH as usize] = 0;
        conn.regs.implicit[implicit::SHOULD_REPORT as usize] = 0;
        conn.regs.implicit[implicit::US_ELAPSED as usize] = since_us(now, conn.implicit_time_zero);

        program.run(&mut Machine {
            regs: &mut conn.regs,
            implicit_time_zero: &mut conn.implicit_time_zero,
            prims,
            ext,
            now_ns: now,
            time_zero: self.time_zero,
        })?;

        let cwnd = conn.regs.implicit[implicit::CWND as usize];
        if cwnd > 0 {
            ops.set_cwnd(sid, cwnd as u32);
        }
        let rate = conn.regs.implicit[implicit::RATE as usize];
        if rate != 0 {
            ops.set_rate_abs(sid, rate as u32);
        }
        if conn.regs.implicit[implicit::SHOULD_REPORT as usize] != 0 {
            let fields = conn
                .regs
                .report
                .get(..program.num_to_return())
                .unwrap_or(&[]);
            let msg = wire::serialize_measure(sid, program.uid, fields);
            program.reset_state(&mut conn.regs);
            if let Err(e) = ops.send_msg(&msg) {
                debug!(sid, "could not send MEASURE: {e}");
                self.update_fto_timer(now);
            }
        }
        Ok(())
    }

    /// libccp's `ccp_read_msg` for one agent message, or for a buffer of
    /// several concatenated messages (each is processed; the first error is
    /// returned after processing all that can be delimited).
    ///
    /// Accepted types: INSTALL, UPDATE_FIELDS, CHANGE_PROG and VERSION. Any
    /// message with a valid header stops the fallback timer. `ops` is used to
    /// answer VERSION.
    pub fn read_msg(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        buf: &[u8],
    ) -> Result<(), Error> {
        let mut first_err = None;
        let mut off = 0usize;
        loop {
            let rest = buf.get(off..).unwrap_or(&[]);
            let (result, consumed) = self.read_one(ops, rest);
            if let Err(e) = result {
                first_err.get_or_insert(e);
            }
            match consumed {
                Some(n) if off + n < buf.len() => off += n,
                _ => break,
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Process the message at the start of `rest`; also returns its length
    /// when the header delimits it usably.
    fn read_one(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        rest: &[u8],
    ) -> (Result<(), Error>, Option<usize>) {
        let hdr = match wire::parse_header(rest) {
            Ok(h) => h,
            Err(e) => return (Err(e.into()), None),
        };
        let len = usize::from(hdr.len);
        let consumed = (len >= wire::HEADER_LEN && len <= rest.len()).then_some(len);
        (self.handle(ops, &hdr, rest), consumed)
    }

    fn handle(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        hdr: &Header,
        rest: &[u8],
    ) -> Result<(), Error> {
        if self.refused && hdr.typ != wire::VERSION {
            return Err(self.version_mismatch());
        }
        // libccp's order: type, then length against the buffer, then the limit
        wire::check_from_agent_type(hdr.typ)?;
        let len = usize::from(hdr.len);
        if len > rest.len() {
            return Err(Error::Truncated {
                what: wire::type_name(hdr.typ),
                needed: len,
                available: rest.len(),
            });
        }
        wire::check_len_limit(hdr.len)?;
        if len < wire::HEADER_LEN {
            return Err(Error::Malformed(wire::WireError::HeaderLenTooSmall {
                typ: hdr.typ,
                len: hdr.len,
            }));
        }
        let body = rest.get(wire::HEADER_LEN..len).unwrap_or(&[]);

        if hdr.typ == wire::VERSION {
            return self.handle_version(ops, hdr, body);
        }
        self.turn_off_fto_timer();

        if hdr.typ == wire::INSTALL {
            return match wire::parse_from_agent_body(hdr, body)? {
                FromAgent::Install {
                    program_uid,
                    expressions,
                    instructions,
                    ..
                } => {
                    if program_uid == 1 {
                        // a (re)started agent: forget every program
                        self.programs.clear();
                    }
                    debug!(
                        program_uid,
                        slot = self.programs.len(),
                        "installed datapath program"
                    );
                    self.programs
                        .push(Program::new(program_uid, &expressions, &instructions));
                    Ok(())
                }
                _ => Err(Error::InstallTypeMismatch),
            };
        }

        // the rest is about one flow
        let conn = sid_slot(hdr.sid)
            .and_then(|s| self.conns.get_mut(s))
            .and_then(|c| c.as_deref_mut())
            .ok_or(Error::UnknownConnection)?;
        match wire::parse_from_agent_body(hdr, body)? {
            FromAgent::UpdateFields { updates, .. } => conn.pending.stage_all(&updates),
            FromAgent::ChangeProg {
                program_uid,
                updates,
                ..
            } => {
                let Some(slot) = self.programs.iter().position(|p| p.uid == program_uid) else {
                    // libccp returns a positive non-error here
                    debug!(
                        sid = hdr.sid,
                        program_uid, "CHANGE_PROG to an unknown program ignored"
                    );
                    return Ok(());
                };
                conn.staged_program = Some(slot);
                conn.pending.clear();
                conn.pending.stage_all(&updates)
            }
            _ => Err(Error::InvalidHeaderType(hdr.typ)),
        }
    }

    fn handle_version(
        &mut self,
        ops: &mut (impl DatapathOps + ?Sized),
        hdr: &Header,
        body: &[u8],
    ) -> Result<(), Error> {
        let version = match wire::parse_from_agent_body(hdr, body)? {
            FromAgent::Version { version } => version,
            _ => return Err(Error::InvalidHeaderType(hdr.typ)),
        };
        self.agent_version = Some(version);
        let mine = self.config.protocol_version;
        let matches = version == mine;
        self.refused = !matches;
        if matches {
            self.turn_off_fto_timer();
        } else {
            warn!("refusing agent: it speaks wire v{version}, this datapath v{mine}");
        }
        let sent = ops.send_msg(&wire::serialize_version(mine));
        if !matches {
            if sent.is_err() {
                self.update_fto_timer(self.clock.now_ns());
            }
            return Err(self.version_mismatch());
        }
        sent.map_err(|e| {
            self.update_fto_timer(self.clock.now_ns());
            Error::Send(e)
        })
    }
}

/// Table slot of a socket id (ids start at 1).
fn sid_slot(sid: u32) -> Option<usize> {
    (sid as usize).checked_sub(1)
}
