//! Differential tests: the engine against the real C libccp 1.2.
//!
//! The `libccp` crate is used only to link its static C library. The C API is
//! declared here by hand, with `#[repr(C)]` structs matching `ccp.h`, so that
//! this test supplies the `now`/`since_usecs`/`after_usecs` callbacks from a
//! virtual clock shared with the engine (a thread-local, so every test thread
//! has its own). Per-datapath recording goes through the datapath's `impl`
//! pointer.
//!
//! Programs are compiled by portus and serialized with portus' own message
//! types, and the same bytes go to both sides. For each program set, 1,000
//! seeded random sequences interleave ACKs with random primitives, virtual
//! time steps, UPDATE_FIELDS / CHANGE_PROG messages, reinstalls, malformed
//! headers, agent outages (failing sends) and flow starts and ends. After every
//! step both sides must have sent byte-identical messages, made identical
//! `set_cwnd`/`set_rate_abs` calls, returned the same libccp code and agree on
//! fallback.

use ccp_engine::{Clock, DatapathOps, Engine, EngineConfig, FlowInfo, Primitives, wire};
use libccp as _;
use portus::lang::{Reg, Scope};
use portus::serialize::{changeprog, install, serialize, update_field};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};
use std::ptr;

#[path = "common/programs.rs"]
mod programs;
use programs::{CONTROLLED, CONTROLLED_ALT, LOSS, PER_ACK, PER_RTT, PULSE};

// ---------------------------------------------------------------- C side --

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CcpPrimitives {
    bytes_acked: u32,
    packets_acked: u32,
    bytes_misordered: u32,
    packets_misordered: u32,
    ecn_bytes: u32,
    ecn_packets: u32,
    lost_pkts_sample: u32,
    was_timeout: bool,
    rtt_sample_us: u64,
    rate_outgoing: u64,
    rate_incoming: u64,
    bytes_in_flight: u32,
    packets_in_flight: u32,
    snd_cwnd: u32,
    snd_rate: u64,
    bytes_pending: u32,
}

#[repr(C)]
struct CcpDatapathInfo {
    init_cwnd: u32,
    mss: u32,
    src_ip: u32,
    src_port: u32,
    dst_ip: u32,
    dst_port: u32,
    cong_alg: [c_char; 64],
}

#[repr(C)]
struct CcpConnection {
    index: u16,
    last_create_msg_sent: u64,
    prims: CcpPrimitives,
    flow_info: CcpDatapathInfo,
    state: *mut c_void,
    impl_: *mut c_void,
    datapath: *mut CcpDatapath,
}

type SetCwndFn = extern "C" fn(*mut CcpConnection, u32);
type SendMsgFn = extern "C" fn(*mut CcpDatapath, *mut c_char, c_int) -> c_int;
type LogFn = extern "C" fn(*mut CcpDatapath, c_int, *const c_char, c_int);

#[repr(C)]
struct CcpDatapath {
    set_cwnd: Option<SetCwndFn>,
    set_rate_abs: Option<SetCwndFn>,
    send_msg: Option<SendMsgFn>,
    log: Option<LogFn>,
    time_zero: u64,
    now: Option<extern "C" fn() -> u64>,
    since_usecs: Option<extern "C" fn(u64) -> u64>,
    after_usecs: Option<extern "C" fn(u64) -> u64>,
    max_connections: usize,
    ccp_active_connections: *mut CcpConnection,
    fto_us: u64,
    last_msg_sent: u64,
    in_fallback: bool,
    max_programs: usize,
    programs: *mut c_void,
    impl_: *mut c_void,
}

unsafe extern "C" {
    fn ccp_init(dp: *mut CcpDatapath, id: u32) -> c_int;
    fn ccp_free(dp: *mut CcpDatapath);
    fn ccp_connection_start(
        dp: *mut CcpDatapath,
        impl_: *mut c_void,
        info: *mut CcpDatapathInfo,
    ) -> *mut CcpConnection;
    fn ccp_connection_free(dp: *mut CcpDatapath, sid: u16);
    fn ccp_connection_lookup(dp: *mut CcpDatapath, sid: u16) -> *mut CcpConnection;
    fn ccp_read_msg(dp: *mut CcpDatapath, buf: *mut c_char, len: c_int) -> c_int;
    fn ccp_invoke(conn: *mut CcpConnection) -> c_int;
    fn calloc(n: usize, size: usize) -> *mut c_void;
    fn free(p: *mut c_void);
}

thread_local! {
    static VNOW: Cell<u64> = const { Cell::new(0) };
}

fn vnow() -> u64 {
    VNOW.with(Cell::get)
}

fn advance_ns(ns: u64) {
    VNOW.with(|c| c.set(c.get() + ns));
}

extern "C" fn vc_now() -> u64 {
    vnow()
}
extern "C" fn vc_since_usecs(then: u64) -> u64 {
    vnow().wrapping_sub(then) / 1000
}
extern "C" fn vc_after_usecs(us: u64) -> u64 {
    vnow().wrapping_add(us.wrapping_mul(1000))
}

/// What a datapath did, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Send(Vec<u8>),
    Cwnd(u32, u32),
    Rate(u32, u32),
}

#[derive(Default)]
struct Recorder {
    events: Vec<Event>,
    agent_down: bool,
}

unsafe fn recorder<'a>(dp: *mut CcpDatapath) -> &'a mut Recorder {
    unsafe { &mut *((*dp).impl_ as *mut Recorder) }
}

extern "C" fn c_send(dp: *mut CcpDatapath, msg: *mut c_char, size: c_int) -> c_int {
    let rec = unsafe { recorder(dp) };
    if rec.agent_down {
        return -1;
    }
    let len = usize::try_from(size).unwrap_or(0);
    let bytes = unsafe { std::slice::from_raw_parts(msg as *const u8, len) };
    rec.events.push(Event::Send(bytes.to_vec()));
    0
}

extern "C" fn c_set_cwnd(conn: *mut CcpConnection, cwnd: u32) {
    let (sid, rec) = unsafe { (u32::from((*conn).index), recorder((*conn).datapath)) };
    rec.events.push(Event::Cwnd(sid, cwnd));
}

extern "C" fn c_set_rate(conn: *mut CcpConnection, rate: u32) {
    let (sid, rec) = unsafe { (u32::from((*conn).index), recorder((*conn).datapath)) };
    rec.events.push(Event::Rate(sid, rate));
}

const C_CONNECTIONS: usize = 64;
const C_PROGRAMS: usize = 64;

/// The real libccp.
struct CSide {
    dp: *mut CcpDatapath,
    conns: *mut CcpConnection,
    rec: *mut Recorder,
}

impl CSide {
    fn new() -> Self {
        let rec = Box::into_raw(Box::<Recorder>::default());
        let conns =
            unsafe { calloc(C_CONNECTIONS, size_of::<CcpConnection>()) } as *mut CcpConnection;
        assert!(!conns.is_null());
        let dp = Box::into_raw(Box::new(CcpDatapath {
            set_cwnd: Some(c_set_cwnd),
            set_rate_abs: Some(c_set_rate),
            send_msg: Some(c_send),
            log: None,
            time_zero: 0,
            now: Some(vc_now),
            since_usecs: Some(vc_since_usecs),
            after_usecs: Some(vc_after_usecs),
            max_connections: C_CONNECTIONS,
            ccp_active_connections: conns,
            fto_us: 1000,
            last_msg_sent: 0,
            in_fallback: false,
            max_programs: C_PROGRAMS,
            programs: ptr::null_mut(),
            impl_: rec as *mut c_void,
        }));
        CSide { dp, conns, rec }
    }

    fn rec(&mut self) -> &mut Recorder {
        unsafe { &mut *self.rec }
    }

    fn init(&mut self, id: u32) -> i32 {
        unsafe { ccp_init(self.dp, id) }
    }

    fn in_fallback(&self) -> bool {
        unsafe { (*self.dp).in_fallback }
    }

    fn start(&mut self, info: &FlowInfo) -> Option<u32> {
        // The engine deliberately does not keep libccp's per-slot
        // `last_create_msg_sent` across reuse; clear it in free slots.
        for i in 0..C_CONNECTIONS {
            unsafe {
                let c = self.conns.add(i);
                if (*c).index == 0 {
                    (*c).last_create_msg_sent = 0;
                }
            }
        }
        let mut name = [0 as c_char; 64];
        for (d, s) in name.iter_mut().zip(info.cong_alg.bytes()) {
            *d = s as c_char;
        }
        let mut ci = CcpDatapathInfo {
            init_cwnd: info.init_cwnd,
            mss: info.mss,
            src_ip: info.src_ip,
            src_port: info.src_port,
            dst_ip: info.dst_ip,
            dst_port: info.dst_port,
            cong_alg: name,
        };
        let conn = unsafe { ccp_connection_start(self.dp, ptr::null_mut(), &mut ci) };
        if conn.is_null() {
            None
        } else {
            Some(u32::from(unsafe { (*conn).index }))
        }
    }

    fn free_conn(&mut self, sid: u32) {
        unsafe { ccp_connection_free(self.dp, sid as u16) }
    }

    fn invoke(&mut self, sid: u32, p: &Primitives) -> i32 {
        unsafe {
            let conn = ccp_connection_lookup(self.dp, sid as u16);
            assert!(!conn.is_null(), "C lost connection {sid}");
            (*conn).prims = CcpPrimitives {
                bytes_acked: p.bytes_acked,
                packets_acked: p.packets_acked,
                bytes_misordered: p.bytes_misordered,
                packets_misordered: p.packets_misordered,
                ecn_bytes: p.ecn_bytes,
                ecn_packets: p.ecn_packets,
                lost_pkts_sample: p.lost_pkts_sample,
                was_timeout: p.was_timeout,
                rtt_sample_us: p.rtt_sample_us,
                rate_outgoing: p.rate_outgoing,
                rate_incoming: p.rate_incoming,
                bytes_in_flight: p.bytes_in_flight,
                packets_in_flight: p.packets_in_flight,
                snd_cwnd: p.snd_cwnd,
                snd_rate: p.snd_rate,
                bytes_pending: p.bytes_pending,
            };
            ccp_invoke(conn)
        }
    }

    fn read(&mut self, msg: &[u8]) -> i32 {
        let mut copy = msg.to_vec();
        unsafe {
            ccp_read_msg(
                self.dp,
                copy.as_mut_ptr() as *mut c_char,
                copy.len() as c_int,
            )
        }
    }
}

impl Drop for CSide {
    fn drop(&mut self) {
        unsafe {
            for i in 0..C_CONNECTIONS {
                let idx = (*self.conns.add(i)).index;
                if idx != 0 {
                    ccp_connection_free(self.dp, idx);
                }
            }
            if !(*self.dp).programs.is_null() {
                ccp_free(self.dp);
            }
            free(self.conns as *mut c_void);
            drop(Box::from_raw(self.dp));
            drop(Box::from_raw(self.rec));
        }
    }
}

// ------------------------------------------------------------- Rust side --

struct ThreadClock;

impl Clock for ThreadClock {
    fn now_ns(&self) -> u64 {
        vnow()
    }
}

impl DatapathOps for Recorder {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        if self.agent_down {
            return Err(std::io::Error::other("agent down"));
        }
        self.events.push(Event::Send(msg.to_vec()));
        Ok(())
    }
    fn set_cwnd(&mut self, sid: u32, cwnd: u32) {
        self.events.push(Event::Cwnd(sid, cwnd));
    }
    fn set_rate_abs(&mut self, sid: u32, rate: u32) {
        self.events.push(Event::Rate(sid, rate));
    }
}

fn code(r: Result<(), ccp_engine::Error>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.libccp_code().unwrap_or(-9999),
    }
}

/// libccp returns a positive value for CHANGE_PROG to an unknown program.
fn c_code(r: i32) -> i32 {
    r.min(0)
}

// -------------------------------------------------------------- programs --

struct Prog {
    uid: u32,
    install: Vec<u8>,
    scope: Scope,
    /// Names the agent may update (control registers, Cwnd, Rate).
    updatable: Vec<&'static str>,
}

fn compile(src: &str, updatable: &[&'static str]) -> Prog {
    let (bin, scope) = portus::lang::compile(src.as_bytes(), &[]).expect("portus compiles");
    let msg = install::Msg {
        sid: 0,
        program_uid: scope.program_uid,
        num_events: bin.events.len() as u32,
        num_instrs: bin.instrs.len() as u32,
        instrs: bin,
    };
    let install = serialize(&msg).expect("serialize install");
    for name in updatable {
        assert!(scope.get(name).is_some(), "{name} not in scope");
    }
    Prog {
        uid: scope.program_uid,
        install,
        scope,
        updatable: updatable.to_vec(),
    }
}

// ------------------------------------------------------------- the check --

/// What the sequences exercised (summed over a test).
#[derive(Debug, Default)]
struct Stats {
    steps: u64,
    reports: u64,
    report_fields: u64,
    creates: u64,
    closes: u64,
    cwnd_calls: u64,
    rate_calls: u64,
    /// libccp return codes seen (both sides agree), by code.
    codes: std::collections::BTreeMap<i32, u64>,
}

impl Stats {
    fn count(&mut self, code: i32, events: &[Event]) {
        self.steps += 1;
        *self.codes.entry(code).or_default() += 1;
        for e in events {
            match e {
                Event::Cwnd(..) => self.cwnd_calls += 1,
                Event::Rate(..) => self.rate_calls += 1,
                Event::Send(m) => match wire::parse_to_agent(m) {
                    Ok(v) => match &v[0].0 {
                        wire::ToAgent::Measure { fields, .. } => {
                            self.reports += 1;
                            self.report_fields += fields.len() as u64;
                        }
                        wire::ToAgent::Create { .. } => self.creates += 1,
                        wire::ToAgent::Close { .. } => self.closes += 1,
                        _ => {}
                    },
                    Err(e) => panic!("datapath sent an invalid message: {e}"),
                },
            }
        }
    }
}

struct Pair<'s> {
    stats: &'s mut Stats,
    c: CSide,
    rust: Engine<ThreadClock>,
    rec: Recorder,
    /// Live flows (identical ids on both sides).
    live: Vec<u32>,
    log: Vec<String>,
}

impl Pair<'_> {
    fn compare(&mut self, what: &str, c_ret: i32, r_ret: i32) {
        self.log.push(what.to_string());
        let c_events = std::mem::take(&mut self.c.rec().events);
        let r_events = std::mem::take(&mut self.rec.events);
        let context = || {
            let tail: Vec<&String> = self.log.iter().rev().take(8).rev().collect();
            format!("recent steps: {tail:#?}")
        };
        assert_eq!(
            c_code(c_ret),
            r_ret,
            "return code differs after {what} (C left, engine right); {}",
            context()
        );
        assert_eq!(
            c_events,
            r_events,
            "callbacks / messages differ after {what} (C left, engine right); {}",
            context()
        );
        assert_eq!(
            self.c.in_fallback(),
            self.rust.in_fallback(),
            "fallback state differs after {what}; {}",
            context()
        );
        self.stats.count(r_ret, &r_events);
    }

    fn read(&mut self, what: &str, msg: &[u8]) {
        let c = self.c.read(msg);
        let r = code(self.rust.read_msg(&mut self.rec, msg));
        self.compare(what, c, r);
    }

    fn set_agent_down(&mut self, down: bool) {
        self.c.rec().agent_down = down;
        self.rec.agent_down = down;
    }
}

fn rand_u32(rng: &mut StdRng) -> u32 {
    match rng.gen_range(0..20) {
        0 => 0,
        1 => u32::MAX - rng.gen_range(0..1000),
        2..=4 => rng.r#gen(),
        _ => rng.gen_range(0..100_000),
    }
}

fn rand_u64(rng: &mut StdRng) -> u64 {
    match rng.gen_range(0..40) {
        0..=2 => 0,
        3 => u64::MAX - rng.gen_range(0..1_000_000),
        4 => rng.r#gen(),
        5..=6 => u64::from(rng.r#gen::<u32>()),
        _ => rng.gen_range(0..250_000_000),
    }
}

fn rand_prims(rng: &mut StdRng) -> Primitives {
    let mss = 1448;
    let pkts = rng.gen_range(0..4u32);
    Primitives {
        bytes_acked: if rng.gen_bool(0.9) {
            pkts * mss
        } else {
            rand_u32(rng)
        },
        packets_acked: pkts,
        bytes_misordered: if rng.gen_bool(0.1) { rand_u32(rng) } else { 0 },
        packets_misordered: if rng.gen_bool(0.1) { rand_u32(rng) } else { 0 },
        ecn_bytes: if rng.gen_bool(0.1) { rand_u32(rng) } else { 0 },
        ecn_packets: if rng.gen_bool(0.1) {
            rng.gen_range(0..5)
        } else {
            0
        },
        lost_pkts_sample: if rng.gen_bool(0.12) {
            rng.gen_range(1..10)
        } else {
            0
        },
        was_timeout: rng.gen_bool(0.03),
        rtt_sample_us: match rng.gen_range(0..50) {
            0..=2 => 0,
            3 => rand_u64(rng),
            _ => rng.gen_range(1_000..300_000),
        },
        rate_outgoing: rand_u64(rng),
        rate_incoming: rand_u64(rng),
        bytes_in_flight: rand_u32(rng),
        packets_in_flight: rng.gen_range(0..1000),
        snd_cwnd: if rng.gen_bool(0.05) {
            rand_u32(rng)
        } else {
            rng.gen_range(0..2_000_000)
        },
        snd_rate: if rng.gen_bool(0.5) { 0 } else { rand_u64(rng) },
        bytes_pending: rand_u32(rng),
    }
}

fn rand_flow(rng: &mut StdRng) -> FlowInfo {
    let names = [
        "reno",
        "cubic",
        "bbr",
        "",
        "a-much-longer-congestion-control-name",
    ];
    let mut name = names[rng.gen_range(0..names.len())].to_string();
    if rng.gen_bool(0.05) {
        name = "x".repeat(63);
    }
    FlowInfo {
        init_cwnd: rng.r#gen(),
        mss: rng.gen_range(500..9000),
        src_ip: rng.r#gen(),
        src_port: rng.gen_range(0..65536),
        dst_ip: rng.r#gen(),
        dst_port: rng.gen_range(0..65536),
        cong_alg: name,
    }
}

fn rand_value(rng: &mut StdRng) -> u64 {
    match rng.gen_range(0..12) {
        0 => 0,
        1 => 1,
        2 => u64::MAX - rng.gen_range(0..100),
        3 => rng.r#gen(),
        4 => u64::from(u32::MAX) + rng.gen_range(0..10_000),
        _ => rng.gen_range(0..200_000),
    }
}

/// Random updates for `prog`: its control registers, Cwnd and Rate, and now
/// and then a report register (rejected by both sides).
fn rand_fields(rng: &mut StdRng, prog: &Prog) -> Vec<(Reg, u64)> {
    let n = rng.gen_range(0..4);
    let mut out = Vec::new();
    for _ in 0..n {
        let reg = if rng.gen_bool(0.05) {
            prog.scope
                .get("Report.acked")
                .cloned()
                .expect("every test program reports acked")
        } else {
            let name = prog.updatable[rng.gen_range(0..prog.updatable.len())];
            prog.scope.get(name).cloned().expect("in scope")
        };
        out.push((reg, rand_value(rng)));
    }
    out
}

fn update_msg(sid: u32, fields: Vec<(Reg, u64)>) -> Vec<u8> {
    serialize(&update_field::Msg {
        sid,
        num_fields: fields.len() as u8,
        fields,
    })
    .expect("serialize update")
}

fn change_msg(sid: u32, uid: u32, fields: Vec<(Reg, u64)>) -> Vec<u8> {
    serialize(&changeprog::Msg {
        sid,
        program_uid: uid,
        num_fields: fields.len() as u32,
        fields,
    })
    .expect("serialize changeprog")
}

fn time_step(rng: &mut StdRng) -> u64 {
    match rng.gen_range(0..100) {
        0..=19 => 0,
        20..=89 => rng.gen_range(0..2_000_000),
        90..=97 => rng.gen_range(2_000_000..200_000_000),
        _ => rng.gen_range(200_000_000..3_000_000_000),
    }
}

fn run_sequence(seed: u64, progs: &[Prog], stats: &mut Stats) {
    let mut rng = StdRng::seed_from_u64(seed);
    VNOW.with(|c| c.set(1_000_000_000 + rng.gen_range(0..1_000_000_000)));
    let id = rng.r#gen();
    let mut pair = Pair {
        stats,
        c: CSide::new(),
        rust: Engine::new(
            ThreadClock,
            EngineConfig {
                id,
                ..Default::default()
            },
        ),
        rec: Recorder::default(),
        live: Vec::new(),
        log: vec![format!("seed {seed}")],
    };
    let c = pair.c.init(id);
    let r = code(pair.rust.init(&mut pair.rec));
    assert_eq!(
        pair.c.rec().events,
        vec![Event::Send(wire::serialize_ready(id))]
    );
    pair.compare("init", c, r);

    let mut order: Vec<usize> = (0..progs.len()).collect();
    if rng.gen_bool(0.5) {
        order.reverse();
    }
    for &i in &order {
        pair.read(&format!("install uid {}", progs[i].uid), &progs[i].install);
    }

    let steps = rng.gen_range(50..200);
    for step in 0..steps {
        let action = rng.gen_range(0..100);
        let live = pair.live.len();
        match action {
            0..=54 if live > 0 => {
                advance_ns(time_step(&mut rng));
                let sid = pair.live[rng.gen_range(0..live)];
                let p = rand_prims(&mut rng);
                let c = pair.c.invoke(sid, &p);
                let r = code(pair.rust.invoke(&mut pair.rec, sid, &p));
                pair.compare(&format!("step {step}: invoke sid {sid} with {p:?}"), c, r);
            }
            55..=64 => advance_ns(time_step(&mut rng) * 10),
            65..=73 => {
                let prog = &progs[rng.gen_range(0..progs.len())];
                let sid = if live > 0 && rng.gen_bool(0.95) {
                    pair.live[rng.gen_range(0..live)]
                } else {
                    rng.gen_range(1..20)
                };
                let msg = update_msg(sid, rand_fields(&mut rng, prog));
                pair.read(
                    &format!("step {step}: update_field sid {sid}: {msg:?}"),
                    &msg,
                );
            }
            74..=79 if live > 0 => {
                let prog = &progs[rng.gen_range(0..progs.len())];
                let sid = pair.live[rng.gen_range(0..live)];
                let uid = if rng.gen_bool(0.95) {
                    prog.uid
                } else {
                    424_242
                };
                let msg = change_msg(sid, uid, rand_fields(&mut rng, prog));
                pair.read(
                    &format!("step {step}: change_prog sid {sid}: {msg:?}"),
                    &msg,
                );
            }
            80..=86 if live < 8 => {
                let info = rand_flow(&mut rng);
                let c = pair.c.start(&info).expect("C table has room");
                let r = pair
                    .rust
                    .connection_start(&mut pair.rec, info.clone())
                    .expect("engine start");
                assert_eq!(c, r, "socket ids differ");
                pair.live.push(r);
                pair.compare(&format!("step {step}: start sid {r}: {info:?}"), 0, 0);
                if rng.gen_bool(0.9) {
                    let prog = &progs[rng.gen_range(0..progs.len())];
                    let msg = change_msg(r, prog.uid, rand_fields(&mut rng, prog));
                    pair.read(&format!("step {step}: initial change_prog sid {r}"), &msg);
                }
            }
            87..=91 if live > 0 => {
                let sid = pair.live.swap_remove(rng.gen_range(0..live));
                pair.c.free_conn(sid);
                let r = code(pair.rust.connection_free(&mut pair.rec, sid));
                pair.compare(&format!("step {step}: free sid {sid}"), 0, r);
            }
            92..=94 => {
                // outages are short: down now and then, back up soon
                let down = if pair.rec.agent_down {
                    rng.gen_bool(0.5)
                } else {
                    rng.gen_bool(0.6)
                };
                pair.set_agent_down(down);
                pair.log.push(format!("step {step}: agent down = {down}"));
            }
            95..=96 => {
                let prog = &progs[rng.gen_range(0..progs.len())];
                pair.read(
                    &format!("step {step}: reinstall uid {}", prog.uid),
                    &prog.install,
                );
            }
            97..=99 => {
                // header-level rejections libccp handles without reading the body
                let mut msg = update_msg(1, Vec::new());
                let what = match rng.gen_range(0..4) {
                    0 => {
                        // (6 is this project's VERSION, unknown to libccp)
                        let bad = [5u16, 7, 8, 9, 40, 255, 1000];
                        let t = bad[rng.gen_range(0..bad.len())];
                        msg[0..2].copy_from_slice(&t.to_le_bytes());
                        "bad type"
                    }
                    1 => {
                        msg[0] = rng.gen_range(0..2);
                        "datapath-bound type"
                    }
                    2 => {
                        msg[2..4].copy_from_slice(&500u16.to_le_bytes());
                        "length beyond buffer"
                    }
                    _ => {
                        msg = vec![0; 33_000];
                        msg[0] = wire::CHANGE_PROG as u8;
                        msg[2..4].copy_from_slice(&33_000u16.to_le_bytes());
                        "too long"
                    }
                };
                pair.read(&format!("step {step}: {what}"), &msg);
            }
            _ => {}
        }
    }

    pair.set_agent_down(rng.gen_bool(0.1));
    for sid in std::mem::take(&mut pair.live) {
        pair.c.free_conn(sid);
        let r = code(pair.rust.connection_free(&mut pair.rec, sid));
        pair.compare(&format!("final free sid {sid}"), 0, r);
    }
    assert_eq!(pair.rust.num_connections(), 0);
}

const SEQUENCES: u64 = 1000;

/// Run the sequences and check they reached the paths that matter: reports,
/// creates, closes, window and rate calls, fallback, and the given libccp
/// error codes.
fn run_all(base_seed: u64, progs: &[Prog], expected_codes: &[i32]) {
    let mut stats = Stats::default();
    for i in 0..SEQUENCES {
        let seed = base_seed.wrapping_mul(1_000_003).wrapping_add(i);
        run_sequence(seed, progs, &mut stats);
    }
    println!("{stats:#?}");
    assert!(stats.reports >= 1_000, "{stats:?}");
    assert!(stats.report_fields > stats.reports, "{stats:?}");
    assert!(stats.creates >= 2_000 && stats.closes >= 2_000, "{stats:?}");
    assert!(stats.cwnd_calls >= 5_000, "{stats:?}");
    assert!(stats.rate_calls >= 1_000, "{stats:?}");
    let common = [-101, -96, -71, -53, -32, -23, -22];
    for code in common.iter().chain(expected_codes) {
        assert!(
            stats.codes.get(code).copied().unwrap_or(0) > 0,
            "libccp code {code} never happened: {stats:?}"
        );
    }
}

#[test]
fn c_struct_layout_matches_ccp_h() {
    // sizes and offsets as laid out by the C compiler for ccp.h on LP64
    assert_eq!(size_of::<CcpPrimitives>(), 88);
    assert_eq!(offset_of!(CcpPrimitives, was_timeout), 28);
    assert_eq!(offset_of!(CcpPrimitives, rtt_sample_us), 32);
    assert_eq!(offset_of!(CcpPrimitives, bytes_in_flight), 56);
    assert_eq!(offset_of!(CcpPrimitives, snd_cwnd), 64);
    assert_eq!(offset_of!(CcpPrimitives, snd_rate), 72);
    assert_eq!(offset_of!(CcpPrimitives, bytes_pending), 80);
    assert_eq!(size_of::<CcpDatapathInfo>(), 88);
    assert_eq!(size_of::<CcpConnection>(), 216);
    assert_eq!(offset_of!(CcpConnection, last_create_msg_sent), 8);
    assert_eq!(offset_of!(CcpConnection, prims), 16);
    assert_eq!(offset_of!(CcpConnection, flow_info), 104);
    assert_eq!(offset_of!(CcpConnection, state), 192);
    assert_eq!(offset_of!(CcpConnection, datapath), 208);
    assert_eq!(size_of::<CcpDatapath>(), 128);
    assert_eq!(offset_of!(CcpDatapath, time_zero), 32);
    assert_eq!(offset_of!(CcpDatapath, max_connections), 64);
    assert_eq!(offset_of!(CcpDatapath, fto_us), 80);
    assert_eq!(offset_of!(CcpDatapath, in_fallback), 96);
    assert_eq!(offset_of!(CcpDatapath, programs), 112);
    assert_eq!(offset_of!(CcpDatapath, impl_), 120);

    // and the C library agrees at run time
    VNOW.with(|c| c.set(7_000_000_000));
    let mut c = CSide::new();
    assert_eq!(c.init(0xdead_beef), 0);
    unsafe {
        assert_eq!((*c.dp).time_zero, 7_000_000_000);
        assert!(!(*c.dp).programs.is_null());
        assert_eq!((*c.dp).last_msg_sent, 0);
    }
    let mut engine = Engine::new(
        ThreadClock,
        EngineConfig {
            id: 0xdead_beef,
            ..Default::default()
        },
    );
    let mut rec = Recorder::default();
    engine.init(&mut rec).unwrap();
    assert_eq!(c.rec().events, rec.events, "READY bytes");
    assert_eq!(
        rec.events,
        vec![Event::Send(vec![
            5, 0, 12, 0, 0, 0, 0, 0, 0xef, 0xbe, 0xad, 0xde
        ])]
    );
    let info = FlowInfo {
        init_cwnd: 1,
        mss: 2,
        src_ip: 3,
        src_port: 4,
        dst_ip: 5,
        dst_port: 6,
        cong_alg: "layout".into(),
    };
    assert_eq!(c.start(&info), Some(1));
    unsafe {
        let conn = ccp_connection_lookup(c.dp, 1);
        assert_eq!((*conn).index, 1);
        assert_eq!((*conn).datapath, c.dp);
        assert_eq!((*conn).flow_info.dst_port, 6);
        assert_eq!((*conn).last_create_msg_sent, 7_000_000_000);
        assert!(!(*conn).state.is_null());
    }
    let create = c.rec().events.pop();
    assert_eq!(
        create,
        Some(Event::Send(wire::serialize_create(1, &info).unwrap()))
    );
}

#[test]
fn differential_per_ack_report() {
    run_all(1, &[compile(PER_ACK, &["Cwnd", "Rate"])], &[]);
}

#[test]
fn differential_per_rtt_ewma_min_max() {
    run_all(2, &[compile(PER_RTT, &["Cwnd", "Rate"])], &[-91]);
}

#[test]
fn differential_loss_fallthrough() {
    run_all(3, &[compile(LOSS, &["Cwnd", "Rate"])], &[]);
}

#[test]
fn differential_rate_pulse() {
    run_all(
        4,
        &[compile(
            PULSE,
            &[
                "Control.state",
                "Control.high",
                "Control.low",
                "Control.period",
                "Cwnd",
                "Rate",
            ],
        )],
        &[-94],
    );
}

#[test]
fn differential_update_field_and_change_prog() {
    run_all(
        5,
        &[
            compile(
                CONTROLLED,
                &[
                    "Control.gain",
                    "Control.target",
                    "Control.interval",
                    "Control.burst",
                    "Cwnd",
                    "Rate",
                ],
            ),
            compile(
                CONTROLLED_ALT,
                &["Control.floor", "Control.step", "Cwnd", "Rate"],
            ),
        ],
        &[-91, -93, -94],
    );
}

#[test]
fn differential_all_programs_together() {
    let progs = [
        compile(PER_ACK, &["Cwnd", "Rate"]),
        compile(PER_RTT, &["Cwnd", "Rate"]),
        compile(LOSS, &["Cwnd", "Rate"]),
        compile(PULSE, &["Control.state", "Control.period", "Cwnd", "Rate"]),
        compile(
            CONTROLLED,
            &["Control.gain", "Control.burst", "Cwnd", "Rate"],
        ),
    ];
    run_all(6, &progs, &[-91, -93, -94]);
}
