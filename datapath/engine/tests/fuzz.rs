//! Property tests: no input bytes make the engine or the wire parsers panic.
//!
//! Arbitrary byte strings and arbitrary mutations of valid messages go to
//! `Engine::read_msg`, `wire::parse_to_agent` and `wire::parse_from_agent`;
//! random (mostly valid, sometimes not) programs are installed and invoked
//! with random primitives and time steps.

use ccp_engine::wire::{self, Expression, Instruction, Register, UpdateField};
use ccp_engine::{Clock, DatapathOps, Engine, EngineConfig, FlowInfo, Primitives};
use proptest::prelude::*;
use std::cell::Cell;
use std::rc::Rc;

#[derive(Default)]
struct VClock(Cell<u64>);

impl Clock for VClock {
    fn now_ns(&self) -> u64 {
        self.0.get()
    }
}

#[derive(Default)]
struct Sink {
    fail: bool,
    sent: usize,
}

impl DatapathOps for Sink {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        // everything the engine sends must be a valid datapath message
        wire::parse_to_agent(msg).expect("engine sent a malformed message");
        self.sent += 1;
        if self.fail {
            Err(std::io::Error::other("down"))
        } else {
            Ok(())
        }
    }
    fn set_cwnd(&mut self, _: u32, _: u32) {}
    fn set_rate_abs(&mut self, _: u32, _: u32) {}
}

fn engine_with_flows() -> (Engine<Rc<VClock>>, Rc<VClock>, Sink) {
    let clock = Rc::new(VClock(Cell::new(1_000_000_000)));
    let mut e = Engine::new(clock.clone(), EngineConfig::default());
    let mut sink = Sink::default();
    e.init(&mut sink).unwrap();
    for _ in 0..3 {
        e.connection_start(&mut sink, FlowInfo::default()).unwrap();
    }
    (e, clock, sink)
}

fn sample_program(uid: u32) -> Vec<u8> {
    let r = |typ, index| Register { typ, index };
    let ins = |opcode, result, left, right| Instruction {
        opcode,
        result,
        left,
        right,
    };
    let instrs = [
        ins(2, r(5, 0), r(5, 0), r(1, 0)),
        ins(2, r(0, 0), r(0, 0), r(1, 0x3fff_ffff)),
        ins(1, r(2, 0), r(2, 0), r(1, 1)),
        ins(0, r(5, 0), r(5, 0), r(4, 0)),
        ins(11, r(0, 0), r(0, 0), r(4, 13)),
        ins(6, r(7, 0), r(2, 3), r(1, 1000)),
        ins(1, r(2, 0), r(2, 0), r(7, 0)),
        ins(1, r(2, 2), r(2, 2), r(1, 1)),
        ins(1, r(2, 3), r(2, 3), r(1, 0)),
    ];
    let exprs = [
        Expression {
            cond_start: 2,
            num_cond: 1,
            event_start: 3,
            num_event: 2,
        },
        Expression {
            cond_start: 5,
            num_cond: 2,
            event_start: 7,
            num_event: 2,
        },
    ];
    wire::serialize_install(0, uid, &exprs, &instrs)
}

fn valid_agent_messages() -> Vec<Vec<u8>> {
    let upd = |reg_type, reg_index, value| UpdateField {
        reg_type,
        reg_index,
        value,
    };
    vec![
        sample_program(1),
        sample_program(9),
        wire::serialize_update_fields(1, &[upd(0, 0, 5), upd(2, 4, 9000), upd(2, 5, 1)]),
        wire::serialize_change_prog(2, 9, &[upd(8, 1, 3)]),
        wire::serialize_version(1),
    ]
}

fn valid_datapath_messages() -> Vec<Vec<u8>> {
    vec![
        wire::serialize_ready(4),
        wire::serialize_create(
            3,
            &FlowInfo {
                cong_alg: "cubic".into(),
                ..Default::default()
            },
        )
        .unwrap(),
        wire::serialize_measure(3, 7, &[1, 2, 3]),
        wire::serialize_close(3),
        wire::serialize_version(1),
    ]
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Extend(Vec<u8>),
    SetLen(u16),
    SetType(u16),
    SetU32(usize, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Mutation::Extend),
        any::<u16>().prop_map(Mutation::SetLen),
        (0u16..10).prop_map(Mutation::SetType),
        (any::<usize>(), any::<u32>()).prop_map(|(i, v)| Mutation::SetU32(i, v)),
    ]
}

fn apply(mut msg: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        match m {
            Mutation::Flip(i, b) => {
                if !msg.is_empty() {
                    let n = msg.len();
                    msg[i % n] ^= b;
                }
            }
            Mutation::Truncate(i) => msg.truncate(i % (msg.len() + 1)),
            Mutation::Extend(bytes) => msg.extend_from_slice(bytes),
            Mutation::SetLen(l) => {
                if msg.len() >= 4 {
                    msg[2..4].copy_from_slice(&l.to_le_bytes());
                }
            }
            Mutation::SetType(t) => {
                if msg.len() >= 2 {
                    msg[0..2].copy_from_slice(&t.to_le_bytes());
                }
            }
            Mutation::SetU32(i, v) => {
                if msg.len() >= 4 {
                    let at = i % (msg.len() - 3);
                    msg[at..at + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
    msg
}

fn prims() -> impl Strategy<Value = Primitives> {
    (
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<bool>()),
        (any::<u64>(), any::<u64>(), any::<u64>()),
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            any::<u32>(),
        ),
    )
        .prop_map(
            |((a, b, c, d), (e, f, g, h), (i, j, k), (l, m, n, o, p))| Primitives {
                bytes_acked: a,
                packets_acked: b,
                bytes_misordered: c,
                packets_misordered: d,
                ecn_bytes: e,
                ecn_packets: f,
                lost_pkts_sample: g,
                was_timeout: h,
                rtt_sample_us: i,
                rate_outgoing: j,
                rate_incoming: k,
                bytes_in_flight: l,
                packets_in_flight: m,
                snd_cwnd: n,
                snd_rate: o,
                bytes_pending: p,
            },
        )
}

/// An operand register that exists.
fn valid_register() -> impl Strategy<Value = Register> {
    let reg =
        |typ: u8, max: u32| (Just(typ), 0..max).prop_map(|(typ, index)| Register { typ, index });
    prop_oneof![
        1 => reg(0, 4),
        1 => reg(8, 4),
        1 => reg(2, 6),
        1 => reg(3, 8),
        1 => reg(7, 8),
        1 => reg(5, 4),
        1 => reg(6, 4),
        2 => reg(4, 15),
        2 => (Just(1u8), prop_oneof![0u32..100, any::<u32>(), Just(0x3fff_ffff)])
            .prop_map(|(typ, index)| Register { typ, index }),
    ]
}

/// A result register that may be written.
fn valid_result() -> impl Strategy<Value = Register> {
    valid_register().prop_filter("writable", |r| r.typ != 1 && r.typ != 4)
}

/// Instructions: mostly valid, now and then anything.
fn instruction() -> impl Strategy<Value = Instruction> {
    let valid = (0u8..15, valid_result(), valid_register(), valid_register());
    let anything = (
        any::<u8>(),
        (any::<u8>(), any::<u32>()),
        (any::<u8>(), any::<u32>()),
        (any::<u8>(), any::<u32>()),
    )
        .prop_map(|(o, (a, b), (c, d), (e, f))| {
            (
                o,
                Register { typ: a, index: b },
                Register { typ: c, index: d },
                Register { typ: e, index: f },
            )
        });
    prop_oneof![30 => valid, 1 => anything].prop_map(|(opcode, result, left, right)| Instruction {
        opcode,
        result,
        left,
        right,
    })
}

/// A random program: a few DEFs, then instructions, and expressions whose
/// ranges are mostly inside the list.
fn random_program() -> impl Strategy<Value = (u32, Vec<Expression>, Vec<Instruction>)> {
    let def = (valid_result(), 0u32..1000).prop_map(|(target, v)| Instruction {
        opcode: 2,
        result: target,
        left: target,
        right: Register { typ: 1, index: v },
    });
    (
        prop_oneof![Just(1u32), 2u32..6],
        proptest::collection::vec(def, 0..5),
        proptest::collection::vec(instruction(), 1..24),
        proptest::collection::vec((any::<u32>(), 0u32..4, any::<u32>(), 0u32..6), 0..5),
        0u32..40,
    )
        .prop_map(|(uid, defs, body, exprs, wild)| {
            let first = defs.len() as u32;
            let mut instrs = defs;
            instrs.extend(body);
            let n = instrs.len() as u32;
            let span = n - first;
            let exprs = exprs
                .into_iter()
                .map(|(a, b, c, d)| {
                    let cond_start = first + a % span;
                    let event_start = first + c % span;
                    Expression {
                        cond_start,
                        num_cond: if wild == 0 { b } else { b.min(n - cond_start) },
                        event_start,
                        num_event: if wild == 1 { d } else { d.min(n - event_start) },
                    }
                })
                .collect();
            (uid, exprs, instrs)
        })
}

#[derive(Clone, Debug)]
enum Action {
    Install(u32, Vec<Expression>, Vec<Instruction>, bool),
    Change(u32, u32),
    Update(u32, Vec<(u8, u32, u64)>),
    Invoke(u32, Primitives),
    Advance(u64),
    Start,
    Free(u32),
    AgentDown(bool),
    Raw(Vec<u8>),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        2 => (random_program(), any::<bool>()).prop_map(|((u, e, i), s)| Action::Install(u, e, i, s)),
        2 => (0u32..5, 1u32..6).prop_map(|(s, u)| Action::Change(s, u)),
        1 => (0u32..6, proptest::collection::vec((0u8..10, 0u32..120, any::<u64>()), 0..4))
            .prop_map(|(s, v)| Action::Update(s, v)),
        8 => (prop_oneof![9 => 1u32..4, 1 => 0u32..8], prims()).prop_map(|(s, p)| Action::Invoke(s, p)),
        2 => any::<u64>().prop_map(|ns| Action::Advance(ns % 5_000_000_000)),
        1 => Just(Action::Start),
        1 => (0u32..6).prop_map(Action::Free),
        1 => any::<bool>().prop_map(Action::AgentDown),
        1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Action::Raw),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = wire::parse_to_agent(&bytes);
        let _ = wire::parse_from_agent(&bytes);
        let _ = wire::parse_header(&bytes);
        let (mut e, _, mut sink) = engine_with_flows();
        let _ = e.read_msg(&mut sink, &bytes);
        let _ = e.invoke(&mut sink, 1, &Primitives::default());
    }

    #[test]
    fn arbitrary_bytes_with_a_plausible_header_never_panic(
        typ in 0u16..8,
        sid in 0u32..5,
        body in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let len = (8 + body.len()) as u16;
        let mut msg = wire::Header { typ, len, sid }.to_bytes().to_vec();
        msg.extend_from_slice(&body);
        let _ = wire::parse_to_agent(&msg);
        let _ = wire::parse_from_agent(&msg);
        let (mut e, _, mut sink) = engine_with_flows();
        let r = e.read_msg(&mut sink, &msg);
        if typ < 2 || typ == 5 || typ == 7 {
            prop_assert!(r.is_err());
        }
        let _ = e.invoke(&mut sink, sid, &Primitives::default());
    }

    #[test]
    fn mutated_agent_messages_never_panic(
        which in 0usize..5,
        muts in proptest::collection::vec(mutation(), 1..4),
        p in prims(),
    ) {
        let msgs = valid_agent_messages();
        let msg = apply(msgs[which].clone(), &muts);
        let _ = wire::parse_from_agent(&msg);
        let (mut e, clock, mut sink) = engine_with_flows();
        let _ = e.read_msg(&mut sink, &sample_program(9));
        let _ = e.read_msg(&mut sink, &wire::serialize_change_prog(1, 9, &[]));
        let _ = e.read_msg(&mut sink, &msg);
        let _ = e.read_msg(&mut sink, &[msg.clone(), msgs[which].clone()].concat());
        for sid in 0..5 {
            clock.0.set(clock.0.get() + 1_000_000);
            let _ = e.invoke(&mut sink, sid, &p);
        }
    }

    #[test]
    fn mutated_datapath_messages_never_panic(
        which in 0usize..5,
        muts in proptest::collection::vec(mutation(), 1..4),
    ) {
        let msgs = valid_datapath_messages();
        let msg = apply(msgs[which].clone(), &muts);
        let _ = wire::parse_to_agent(&msg);
        let _ = wire::parse_to_agent(&[msg.clone(), msgs[which].clone()].concat());
        let _ = wire::parse_to_agent(&[msgs[which].clone(), msg].concat());
    }

    #[test]
    fn valid_messages_parse(which in 0usize..5) {
        prop_assert!(wire::parse_from_agent(&valid_agent_messages()[which]).is_ok());
        prop_assert!(wire::parse_to_agent(&valid_datapath_messages()[which]).is_ok());
    }

    #[test]
    fn invoke_after_random_installs_never_panics(
        actions in proptest::collection::vec(action(), 1..60),
    ) {
        let (mut e, clock, mut sink) = engine_with_flows();
        for a in actions {
            match a {
                Action::Install(uid, exprs, instrs, switch) => {
                    let msg = wire::serialize_install(0, uid, &exprs, &instrs);
                    let parsed = wire::parse_from_agent(&msg);
                    let r = e.read_msg(&mut sink, &msg);
                    // the engine installs exactly what the parser accepts
                    if e.agent_version().is_none() {
                        prop_assert_eq!(parsed.is_ok(), r.is_ok(), "{:?} vs {:?}", parsed, r);
                    }
                    if switch {
                        for sid in 1..=3 {
                            let _ = e.read_msg(&mut sink, &wire::serialize_change_prog(sid, uid, &[]));
                        }
                    }
                }
                Action::Change(sid, uid) => {
                    let _ = e.read_msg(&mut sink, &wire::serialize_change_prog(sid, uid, &[]));
                }
                Action::Update(sid, ups) => {
                    let ups: Vec<UpdateField> = ups
                        .into_iter()
                        .map(|(reg_type, reg_index, value)| UpdateField { reg_type, reg_index, value })
                        .collect();
                    let _ = e.read_msg(&mut sink, &wire::serialize_update_fields(sid, &ups));
                }
                Action::Invoke(sid, p) => {
                    let _ = e.invoke(&mut sink, sid, &p);
                }
                Action::Advance(ns) => clock.0.set(clock.0.get().wrapping_add(ns)),
                Action::Start => {
                    let _ = e.connection_start(&mut sink, FlowInfo::default());
                }
                Action::Free(sid) => {
                    let _ = e.connection_free(&mut sink, sid);
                }
                Action::AgentDown(down) => sink.fail = down,
                Action::Raw(bytes) => {
                    let _ = e.read_msg(&mut sink, &bytes);
                }
            }
        }
    }
}
