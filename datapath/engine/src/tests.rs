//! Unit tests of the engine and its register machine, driven through the
//! public API with hand-assembled programs and a virtual clock.

use crate::wire::{self, Expression, Instruction, Register, UpdateField, implicit, op, prim, reg};
use crate::{Clock, DatapathOps, Engine, EngineConfig, Error, ExtPrimitives, FlowInfo, Primitives};
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
struct Rec {
    sent: Vec<Vec<u8>>,
    cwnd: Vec<(u32, u32)>,
    rate: Vec<(u32, u32)>,
    fail: bool,
}

impl DatapathOps for Rec {
    fn send_msg(&mut self, msg: &[u8]) -> std::io::Result<()> {
        if self.fail {
            return Err(std::io::Error::other("agent down"));
        }
        self.sent.push(msg.to_vec());
        Ok(())
    }
    fn set_cwnd(&mut self, sid: u32, cwnd: u32) {
        self.cwnd.push((sid, cwnd));
    }
    fn set_rate_abs(&mut self, sid: u32, rate: u32) {
        self.rate.push((sid, rate));
    }
}

const T0: u64 = 5_000_000_000;

fn r(typ: u8, index: u32) -> Register {
    Register { typ, index }
}
fn imm(v: u32) -> Register {
    r(reg::IMMEDIATE, v)
}
fn ins(opcode: u8, result: Register, left: Register, right: Register) -> Instruction {
    Instruction {
        opcode,
        result,
        left,
        right,
    }
}
fn def(target: Register, value: u32) -> Instruction {
    ins(op::DEF, target, target, imm(value))
}
fn bind(target: Register, value: Register) -> Instruction {
    ins(op::BIND, target, target, value)
}
fn flag() -> Register {
    r(reg::IMPLICIT, implicit::EXPR_FLAG)
}
fn when_true() -> Vec<Instruction> {
    vec![bind(flag(), imm(1))]
}
fn report() -> Instruction {
    bind(r(reg::IMPLICIT, implicit::SHOULD_REPORT), imm(1))
}
fn fallthrough() -> Instruction {
    bind(r(reg::IMPLICIT, implicit::SHOULD_FALLTHROUGH), imm(1))
}
fn vreport(i: u32) -> Register {
    r(reg::VOLATILE_REPORT, i)
}
fn nvreport(i: u32) -> Register {
    r(reg::NONVOLATILE_REPORT, i)
}
fn control(i: u32) -> Register {
    r(reg::NONVOLATILE_CONTROL, i)
}
fn primitive(i: u32) -> Register {
    r(reg::PRIMITIVE, i)
}
fn micros() -> Register {
    r(reg::IMPLICIT, implicit::US_ELAPSED)
}

/// Lay out an INSTALL message: DEFs, then each expression's condition and body.
fn program(
    uid: u32,
    defs: &[Instruction],
    exprs: &[(Vec<Instruction>, Vec<Instruction>)],
) -> Vec<u8> {
    let mut instrs = defs.to_vec();
    let mut expressions = Vec::new();
    for (cond, body) in exprs {
        let cond_start = instrs.len() as u32;
        instrs.extend_from_slice(cond);
        let event_start = instrs.len() as u32;
        instrs.extend_from_slice(body);
        expressions.push(Expression {
            cond_start,
            num_cond: cond.len() as u32,
            event_start,
            num_event: body.len() as u32,
        });
    }
    wire::serialize_install(0, uid, &expressions, &instrs)
}

struct Fixture {
    clock: Rc<VClock>,
    engine: Engine<Rc<VClock>>,
    rec: Rec,
}

impl Fixture {
    fn new() -> Self {
        let clock = Rc::new(VClock(Cell::new(T0)));
        let mut engine = Engine::new(clock.clone(), EngineConfig::default());
        let mut rec = Rec::default();
        engine.init(&mut rec).expect("init");
        Fixture { clock, engine, rec }
    }

    fn advance_us(&self, us: u64) {
        self.clock.0.set(self.clock.0.get() + us * 1000);
    }

    fn start(&mut self) -> u32 {
        self.engine
            .connection_start(&mut self.rec, flow())
            .expect("start")
    }

    fn read(&mut self, msg: &[u8]) -> Result<(), Error> {
        self.engine.read_msg(&mut self.rec, msg)
    }

    /// Install `prog` with `uid`, start a flow and switch it to the program.
    fn flow_with(&mut self, uid: u32, prog: &[u8], updates: &[UpdateField]) -> u32 {
        self.read(prog).expect("install");
        let sid = self.start();
        self.read(&wire::serialize_change_prog(sid, uid, updates))
            .expect("change_prog");
        self.rec.sent.clear();
        sid
    }

    fn invoke(&mut self, sid: u32, p: &Primitives) -> Result<(), Error> {
        self.engine.invoke(&mut self.rec, sid, p)
    }

    /// Fields of the reports sent since the last call.
    fn reports(&mut self) -> Vec<Vec<u64>> {
        if self.rec.sent.is_empty() {
            return Vec::new();
        }
        let out = wire::parse_to_agent(&self.rec.sent.concat())
            .expect("valid datapath messages")
            .into_iter()
            .filter_map(|(m, _)| match m {
                wire::ToAgent::Measure { fields, .. } => Some(fields),
                _ => None,
            })
            .collect();
        self.rec.sent.clear();
        out
    }
}

fn flow() -> FlowInfo {
    FlowInfo {
        init_cwnd: 14480,
        mss: 1448,
        src_ip: 0x0a00_0001,
        src_port: 4242,
        dst_ip: 0x0a00_0002,
        dst_port: 80,
        cong_alg: "reno".into(),
    }
}

/// Run `ret = op(left, right)` with `ret` a control register holding `old`
/// (for EWMA / IF / NOTIF); left and right are 64-bit primitives.
fn eval(opcode: u8, left: u64, right: u64, old: u64) -> Result<u64, Error> {
    let mut f = Fixture::new();
    let prog = program(
        7,
        &[def(control(0), 0), def(vreport(0), 0)],
        &[(
            when_true(),
            vec![
                ins(
                    opcode,
                    control(0),
                    primitive(prim::RATE_OUTGOING),
                    primitive(prim::RATE_INCOMING),
                ),
                bind(vreport(0), control(0)),
                report(),
            ],
        )],
    );
    let update = UpdateField {
        reg_type: reg::NONVOLATILE_CONTROL,
        reg_index: 0,
        value: old,
    };
    let sid = f.flow_with(7, &prog, &[update]);
    let p = Primitives {
        rate_outgoing: left,
        rate_incoming: right,
        ..Default::default()
    };
    f.invoke(sid, &p)?;
    let reports = f.reports();
    assert_eq!(reports.len(), 1);
    Ok(reports[0][0])
}

#[test]
fn arithmetic_ops() {
    assert_eq!(eval(op::ADD, 3, 4, 0).unwrap(), 7);
    assert_eq!(eval(op::SUB, 10, 4, 0).unwrap(), 6);
    assert_eq!(eval(op::MUL, 6, 7, 0).unwrap(), 42);
    assert_eq!(eval(op::DIV, 43, 7, 0).unwrap(), 6);
    assert_eq!(eval(op::BIND, 1, 99, 5).unwrap(), 99);
    assert_eq!(
        eval(op::DEF, 1, 99, 5).unwrap(),
        5,
        "DEF in a body is a no-op"
    );
}

#[test]
fn overflow_errors_abort_the_run() {
    let e = eval(op::ADD, u64::MAX, 1, 0).unwrap_err();
    assert!(matches!(e, Error::AddOverflow));
    assert_eq!(e.libccp_code(), Some(-91));
    let e = eval(op::SUB, 3, 4, 0).unwrap_err();
    assert!(matches!(e, Error::SubUnderflow));
    assert_eq!(e.libccp_code(), Some(-94));
    let e = eval(op::MUL, 1 << 63, 2, 0).unwrap_err();
    assert_eq!(e.libccp_code(), Some(-93));
    let e = eval(op::MUL, 3, 0x5555_5555_5555_5556, 0).unwrap_err();
    assert!(matches!(e, Error::MulOverflow));
    // libccp only notices a wrapped product smaller than the left operand
    let x = 0x1_0000_0001u64;
    assert_eq!(eval(op::MUL, x, x, 0).unwrap(), x.wrapping_mul(x));
    assert_eq!(eval(op::MUL, 0, 5, 0).unwrap(), 0);
    let e = eval(op::DIV, 5, 0, 0).unwrap_err();
    assert!(matches!(e, Error::DivByZero));
    assert_eq!(e.libccp_code(), Some(-92));
}

#[test]
fn error_aborts_without_callbacks_or_report() {
    let mut f = Fixture::new();
    let prog = program(
        3,
        &[def(vreport(0), 0)],
        &[(
            when_true(),
            vec![
                bind(r(reg::IMPLICIT, implicit::CWND), imm(5000)),
                report(),
                ins(op::DIV, vreport(0), imm(1), imm(0)),
            ],
        )],
    );
    let sid = f.flow_with(3, &prog, &[]);
    let e = f.invoke(sid, &Primitives::default()).unwrap_err();
    assert!(matches!(e, Error::DivByZero));
    assert!(f.rec.cwnd.is_empty());
    assert!(f.rec.sent.is_empty());
}

#[test]
fn comparison_ops() {
    assert_eq!(eval(op::EQUIV, 4, 4, 9).unwrap(), 1);
    assert_eq!(eval(op::EQUIV, 4, 5, 9).unwrap(), 0);
    assert_eq!(eval(op::GT, 5, 4, 9).unwrap(), 1);
    assert_eq!(eval(op::GT, 4, 4, 9).unwrap(), 0);
    assert_eq!(eval(op::LT, 3, 4, 9).unwrap(), 1);
    assert_eq!(eval(op::LT, 4, 3, 9).unwrap(), 0);
    assert_eq!(eval(op::MAX, 3, u64::MAX, 0).unwrap(), u64::MAX);
    assert_eq!(eval(op::MIN, 3, u64::MAX, 0).unwrap(), 3);
    assert_eq!(eval(op::MIN, 8, 2, 0).unwrap(), 2);
}

#[test]
fn conditional_ops() {
    assert_eq!(eval(op::IF, 1, 42, 7).unwrap(), 42);
    assert_eq!(eval(op::IF, 0, 42, 7).unwrap(), 7);
    assert_eq!(eval(op::NOTIF, 0, 42, 7).unwrap(), 42);
    assert_eq!(eval(op::NOTIF, 3, 42, 7).unwrap(), 7);
}

#[test]
fn ewma() {
    // first sample: old value 0 -> the new value
    assert_eq!(eval(op::EWMA, 2, 200, 0).unwrap(), 200);
    // (2 * 100 + 8 * 200) / 10
    assert_eq!(eval(op::EWMA, 2, 200, 100).unwrap(), 180);
    assert_eq!(eval(op::EWMA, 10, 200, 100).unwrap(), 100);
    // weight above 10 wraps like C: (11*10 + (10-11)*1) / 10 = 109 / 10
    assert_eq!(eval(op::EWMA, 11, 1, 10).unwrap(), 10);
}

#[test]
fn maxwrap() {
    assert_eq!(eval(op::MAXWRAP, 0, 5, 0).unwrap(), 5);
    assert_eq!(eval(op::MAXWRAP, 5, 0, 0).unwrap(), 5);
    assert_eq!(eval(op::MAXWRAP, 10, 20, 0).unwrap(), 20);
    assert_eq!(eval(op::MAXWRAP, 20, 10, 0).unwrap(), 20);
    // 0x10 comes "after" 0xffff_fff0 on the 32-bit circle
    assert_eq!(eval(op::MAXWRAP, 0xffff_fff0, 0x10, 0).unwrap(), 0x10);
    assert_eq!(eval(op::MAXWRAP, 0x10, 0xffff_fff0, 0).unwrap(), 0x10);
    // results are truncated to 32 bits unless an operand is 0
    assert_eq!(eval(op::MAXWRAP, 0x1_0000_0005, 3, 0).unwrap(), 5);
    assert_eq!(
        eval(op::MAXWRAP, 0, 0x1_0000_0005, 0).unwrap(),
        0x1_0000_0005
    );
}

#[test]
fn volatile_registers_reset_on_report() {
    let mut f = Fixture::new();
    let acked = primitive(prim::BYTES_ACKED);
    let prog = program(
        4,
        &[def(vreport(0), 0), def(nvreport(1), 0), def(vreport(2), 7)],
        &[(
            when_true(),
            vec![
                ins(op::ADD, vreport(0), vreport(0), acked),
                ins(op::ADD, nvreport(1), nvreport(1), acked),
                ins(op::ADD, vreport(2), vreport(2), acked),
                report(),
            ],
        )],
    );
    let sid = f.flow_with(4, &prog, &[]);
    let p = Primitives {
        bytes_acked: 10,
        ..Default::default()
    };
    f.invoke(sid, &p).unwrap();
    f.invoke(sid, &p).unwrap();
    assert_eq!(f.reports(), vec![vec![10, 10, 17], vec![10, 20, 17]]);
}

#[test]
fn fallthrough_controls_later_expressions() {
    for with_fallthrough in [false, true] {
        let mut f = Fixture::new();
        let mut first = vec![bind(vreport(0), imm(1))];
        if with_fallthrough {
            first.push(fallthrough());
        }
        let prog = program(
            9,
            &[def(vreport(0), 0), def(vreport(1), 0)],
            &[
                (when_true(), first),
                (when_true(), vec![bind(vreport(1), imm(1))]),
                (when_true(), vec![report()]),
            ],
        );
        let sid = f.flow_with(9, &prog, &[]);
        f.invoke(sid, &Primitives::default()).unwrap();
        if with_fallthrough {
            // fallthrough stays set: all three expressions run
            assert_eq!(f.reports(), vec![vec![1, 1]]);
        } else {
            assert!(f.reports().is_empty());
        }
    }
}

#[test]
fn false_condition_skips_body_and_continues() {
    let mut f = Fixture::new();
    let prog = program(
        9,
        &[def(vreport(0), 0)],
        &[
            (
                vec![ins(
                    op::GT,
                    flag(),
                    primitive(prim::LOST_PKTS_SAMPLE),
                    imm(0),
                )],
                vec![bind(vreport(0), imm(5)), report()],
            ),
            (when_true(), vec![bind(vreport(0), imm(6)), report()]),
        ],
    );
    let sid = f.flow_with(9, &prog, &[]);
    f.invoke(sid, &Primitives::default()).unwrap();
    let lossy = Primitives {
        lost_pkts_sample: 2,
        ..Default::default()
    };
    f.invoke(sid, &lossy).unwrap();
    assert_eq!(f.reports(), vec![vec![6], vec![5]]);
}

#[test]
fn micros_and_ack_now() {
    let mut f = Fixture::new();
    f.advance_us(1_000);
    let prog = program(
        2,
        &[def(vreport(0), 0), def(vreport(1), 0)],
        &[
            (
                when_true(),
                vec![
                    bind(vreport(0), micros()),
                    bind(vreport(1), primitive(prim::NOW)),
                    report(),
                    fallthrough(),
                ],
            ),
            (
                vec![ins(op::GT, flag(), micros(), imm(10_000))],
                vec![bind(micros(), imm(0))],
            ),
        ],
    );
    let sid = f.flow_with(2, &prog, &[]);
    f.advance_us(500);
    // program change resets Micros at this invoke
    f.invoke(sid, &Primitives::default()).unwrap();
    f.advance_us(7_000);
    f.invoke(sid, &Primitives::default()).unwrap();
    f.advance_us(5_000);
    f.invoke(sid, &Primitives::default()).unwrap(); // Micros 12000 -> reset
    f.advance_us(3_000);
    f.invoke(sid, &Primitives::default()).unwrap();
    assert_eq!(
        f.reports(),
        vec![
            vec![0, 1_500],
            vec![7_000, 8_500],
            vec![12_000, 13_500],
            vec![3_000, 16_500]
        ]
    );
}

#[test]
fn writing_micros_moves_time_zero_in_nanoseconds() {
    // libccp subtracts the microsecond value from a nanosecond clock
    let mut f = Fixture::new();
    let prog = program(
        2,
        &[def(vreport(0), 0), def(control(0), 0)],
        &[
            (
                vec![ins(op::EQUIV, flag(), control(0), imm(0))],
                vec![bind(control(0), imm(1)), bind(micros(), imm(5_000))],
            ),
            (when_true(), vec![bind(vreport(0), micros()), report()]),
        ],
    );
    let sid = f.flow_with(2, &prog, &[]);
    f.invoke(sid, &Primitives::default()).unwrap();
    f.advance_us(2_000);
    f.invoke(sid, &Primitives::default()).unwrap();
    // time zero = now - 5000 ns, so 2000 us later Micros reads 2005
    assert_eq!(f.reports(), vec![vec![2_005]]);
}

#[test]
fn infinity_default_and_zero_rtt() {
    let mut f = Fixture::new();
    let prog = program(
        6,
        &[def(vreport(0), 0x3fff_ffff), def(vreport(1), 0)],
        &[(
            when_true(),
            vec![bind(vreport(1), primitive(prim::RTT_SAMPLE_US)), report()],
        )],
    );
    let sid = f.flow_with(6, &prog, &[]);
    f.invoke(sid, &Primitives::default()).unwrap();
    let p = Primitives {
        rtt_sample_us: 12_345,
        ..Default::default()
    };
    f.invoke(sid, &p).unwrap();
    assert_eq!(
        f.reports(),
        vec![vec![0xffff_ffff, 0xffff_ffff], vec![0xffff_ffff, 12_345]]
    );
}

#[test]
fn a_control_register_bound_to_owd_reads_the_one_way_delay() {
    let mut f = Fixture::new();
    // Report 0 := control 0 (bound: its default is the binding value), report 1 := control 1
    // (an ordinary control), report 2 := report 2 + control 0.
    let prog = program(
        9,
        &[
            def(vreport(0), 0),
            def(vreport(1), 0),
            def(vreport(2), 0),
            def(control(0), prim::OWD_US_BINDING),
            def(control(1), 7),
        ],
        &[(
            when_true(),
            vec![
                bind(vreport(0), control(0)),
                bind(vreport(1), control(1)),
                ins(op::ADD, vreport(2), vreport(2), control(0)),
                report(),
            ],
        )],
    );
    let sid = f.flow_with(9, &prog, &[]);
    let p = Primitives::default();
    f.engine
        .invoke_ext(&mut f.rec, sid, &p, &ExtPrimitives { owd_us: Some(42) })
        .unwrap();
    f.engine
        .invoke_ext(&mut f.rec, sid, &p, &ExtPrimitives { owd_us: Some(0) })
        .unwrap();
    // Not measured: reads 2^32 - 1, like a missing RTT sample.
    f.invoke(sid, &p).unwrap();
    assert_eq!(
        f.reports(),
        vec![
            vec![42, 7, 42],
            vec![0, 7, 0],
            vec![0xffff_ffff, 7, 0xffff_ffff]
        ]
    );
    // An update of the bound register does not hide the measurement.
    f.engine
        .read_msg(
            &mut f.rec,
            &wire::serialize_update_fields(
                sid,
                &[UpdateField {
                    reg_type: reg::NONVOLATILE_CONTROL,
                    reg_index: 0,
                    value: 5,
                }],
            ),
        )
        .unwrap();
    f.engine
        .invoke_ext(&mut f.rec, sid, &p, &ExtPrimitives { owd_us: Some(9) })
        .unwrap();
    assert_eq!(f.reports(), vec![vec![9, 7, 9]]);
}

#[test]
fn without_the_binding_value_a_control_register_ignores_the_one_way_delay() {
    let mut f = Fixture::new();
    let prog = program(
        10,
        &[
            def(vreport(0), 0),
            def(control(0), prim::OWD_US_BINDING - 1),
        ],
        &[(when_true(), vec![bind(vreport(0), control(0)), report()])],
    );
    let sid = f.flow_with(10, &prog, &[]);
    f.engine
        .invoke_ext(
            &mut f.rec,
            sid,
            &Primitives::default(),
            &ExtPrimitives { owd_us: Some(42) },
        )
        .unwrap();
    assert_eq!(f.reports(), vec![vec![u64::from(prim::OWD_US_BINDING - 1)]]);
}

#[test]
fn cwnd_and_rate_registers_drive_callbacks() {
    let mut f = Fixture::new();
    let prog = program(
        8,
        &[],
        &[(
            when_true(),
            vec![ins(
                op::ADD,
                r(reg::IMPLICIT, implicit::CWND),
                r(reg::IMPLICIT, implicit::CWND),
                imm(1448),
            )],
        )],
    );
    let sid = f.flow_with(8, &prog, &[]);
    let p = Primitives {
        snd_cwnd: 10_000,
        snd_rate: 0,
        ..Default::default()
    };
    f.invoke(sid, &p).unwrap();
    let p = Primitives {
        snd_cwnd: 20_000,
        snd_rate: 1 << 32 | 7,
        ..Default::default()
    };
    f.invoke(sid, &p).unwrap();
    assert_eq!(f.rec.cwnd, vec![(sid, 11_448), (sid, 21_448)]);
    // Rate registers are truncated to 32 bits like libccp's u32 callback
    assert_eq!(f.rec.rate, vec![(sid, 7)]);
}

#[test]
fn update_fields_are_staged_until_invoke() {
    let mut f = Fixture::new();
    let prog = program(
        11,
        &[def(control(3), 1), def(vreport(0), 0)],
        &[(when_true(), vec![bind(vreport(0), control(3)), report()])],
    );
    let sid = f.flow_with(11, &prog, &[]);
    f.invoke(sid, &Primitives::default()).unwrap();
    let updates = [
        UpdateField {
            reg_type: reg::NONVOLATILE_CONTROL,
            reg_index: 3,
            value: 40,
        },
        UpdateField {
            reg_type: reg::VOLATILE_CONTROL,
            reg_index: 3,
            value: 41,
        },
        UpdateField {
            reg_type: reg::IMPLICIT,
            reg_index: implicit::CWND,
            value: 30_000,
        },
        UpdateField {
            reg_type: reg::IMPLICIT,
            reg_index: implicit::EXPR_FLAG,
            value: 1,
        },
        UpdateField {
            reg_type: reg::IMPLICIT,
            reg_index: implicit::RATE,
            value: 0,
        },
    ];
    f.read(&wire::serialize_update_fields(sid, &updates))
        .unwrap();
    assert!(f.rec.cwnd.is_empty(), "nothing applied before invoke");
    f.invoke(sid, &Primitives::default()).unwrap();
    assert_eq!(f.reports(), vec![vec![1], vec![41]]);
    // the staged Cwnd is applied, then the program leaves it in the register
    assert_eq!(f.rec.cwnd, vec![(sid, 30_000), (sid, 30_000)]);
    assert!(f.rec.rate.is_empty(), "a zero Rate update is not applied");
}

#[test]
fn bad_update_keeps_earlier_ones() {
    let mut f = Fixture::new();
    let prog = program(
        11,
        &[def(control(3), 1), def(vreport(0), 0)],
        &[(when_true(), vec![bind(vreport(0), control(3)), report()])],
    );
    let sid = f.flow_with(11, &prog, &[]);
    let good = UpdateField {
        reg_type: reg::NONVOLATILE_CONTROL,
        reg_index: 3,
        value: 77,
    };
    let bad_type = UpdateField {
        reg_type: reg::VOLATILE_REPORT,
        reg_index: 0,
        value: 1,
    };
    let e = f
        .read(&wire::serialize_update_fields(sid, &[good, bad_type, good]))
        .unwrap_err();
    assert!(matches!(e, Error::UpdateInvalidRegType { reg_type: 5, .. }));
    assert_eq!(e.libccp_code(), Some(-53));
    let bad_index = UpdateField {
        reg_index: 110,
        ..good
    };
    let e = f
        .read(&wire::serialize_update_fields(sid, &[bad_index]))
        .unwrap_err();
    assert!(matches!(e, Error::UpdateInvalidRegIndex { index: 110 }));
    f.invoke(sid, &Primitives::default()).unwrap();
    assert_eq!(f.reports(), vec![vec![77]]);
    // unknown flow
    let e = f
        .read(&wire::serialize_update_fields(sid + 1, &[good]))
        .unwrap_err();
    assert_eq!(e.libccp_code(), Some(-71));
}

#[test]
fn update_count_is_read_as_a_signed_byte() {
    let mut f = Fixture::new();
    let sid = f.start();
    let mut msg = wire::serialize_update_fields(sid, &[]);
    msg[8] = 0x80; // -128 -> 0xffff_ff80 updates
    let e = f.read(&msg).unwrap_err();
    assert!(matches!(e, Error::UpdateTooMany(0xffff_ff80)));
    assert_eq!(e.libccp_code(), Some(-52));
    // the other bytes of the count are ignored
    let mut msg = wire::serialize_update_fields(sid, &[]);
    msg[9] = 0x12;
    f.read(&msg).unwrap();
}

#[test]
fn change_prog_switches_and_initializes() {
    let mut f = Fixture::new();
    let a = program(21, &[def(vreport(0), 1)], &[(when_true(), vec![report()])]);
    let b = program(
        22,
        &[def(vreport(0), 2), def(control(0), 50)],
        &[(
            when_true(),
            vec![ins(op::ADD, vreport(0), vreport(0), control(0)), report()],
        )],
    );
    f.read(&b).unwrap();
    let sid = f.flow_with(21, &a, &[]);
    f.invoke(sid, &Primitives::default()).unwrap();
    // unknown uid: accepted, nothing changes
    f.read(&wire::serialize_change_prog(sid, 999, &[])).unwrap();
    f.invoke(sid, &Primitives::default()).unwrap();
    // staged update, then a change: the change drops it and stages its own
    let stale = UpdateField {
        reg_type: reg::IMPLICIT,
        reg_index: implicit::CWND,
        value: 1234,
    };
    f.read(&wire::serialize_update_fields(sid, &[stale]))
        .unwrap();
    let upd = UpdateField {
        reg_type: reg::NONVOLATILE_CONTROL,
        reg_index: 0,
        value: 5,
    };
    f.read(&wire::serialize_change_prog(sid, 22, &[upd]))
        .unwrap();
    f.invoke(sid, &Primitives::default()).unwrap();
    f.invoke(sid, &Primitives::default()).unwrap();
    let reports = wire::parse_to_agent(&f.rec.sent.concat()).unwrap();
    let got: Vec<(u32, Vec<u64>)> = reports
        .into_iter()
        .filter_map(|(m, _)| match m {
            wire::ToAgent::Measure {
                program_uid,
                fields,
                ..
            } => Some((program_uid, fields)),
            _ => None,
        })
        .collect();
    assert_eq!(
        got,
        vec![(21, vec![1]), (21, vec![1]), (22, vec![7]), (22, vec![7])]
    );
    assert!(f.rec.cwnd.is_empty());
}

#[test]
fn program_uid_one_clears_the_table() {
    let mut f = Fixture::new();
    let p5 = program(5, &[def(vreport(0), 5)], &[(when_true(), vec![report()])]);
    let p1 = program(1, &[def(vreport(0), 1)], &[(when_true(), vec![report()])]);
    let sid = f.flow_with(5, &p5, &[]);
    f.invoke(sid, &Primitives::default()).unwrap();
    assert_eq!(f.reports(), vec![vec![5]]);
    f.read(&p1).unwrap(); // a restarted agent: table cleared, uid 1 in slot 0
    // uid 5 is gone
    f.read(&wire::serialize_change_prog(sid, 5, &[])).unwrap();
    // like libccp, the flow keeps its slot and now runs what is there, without
    // a program change: the slot's report count is still libccp's initial 0
    f.invoke(sid, &Primitives::default()).unwrap();
    // the report's reset_state set the count and p1's defaults
    f.invoke(sid, &Primitives::default()).unwrap();
    let got: Vec<_> = wire::parse_to_agent(&f.rec.sent.concat())
        .unwrap()
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    assert_eq!(
        got,
        vec![
            wire::ToAgent::Measure {
                sid,
                program_uid: 1,
                fields: vec![]
            },
            wire::ToAgent::Measure {
                sid,
                program_uid: 1,
                fields: vec![1]
            },
        ]
    );
}

#[test]
fn reinstalled_uid_uses_first_slot() {
    let mut f = Fixture::new();
    let v1 = program(5, &[def(vreport(0), 1)], &[(when_true(), vec![report()])]);
    let v2 = program(5, &[def(vreport(0), 2)], &[(when_true(), vec![report()])]);
    f.read(&v1).unwrap();
    let sid = f.flow_with(5, &v2, &[]);
    f.invoke(sid, &Primitives::default()).unwrap();
    assert_eq!(f.reports(), vec![vec![1]]);
}

#[test]
fn no_program_is_prog_is_null() {
    let mut f = Fixture::new();
    let sid = f.start();
    let e = f.invoke(sid, &Primitives::default()).unwrap_err();
    assert!(matches!(e, Error::ProgIsNull));
    assert_eq!(e.libccp_code(), Some(-96));
    assert_eq!(
        f.invoke(99, &Primitives::default())
            .unwrap_err()
            .libccp_code(),
        Some(-71)
    );
}

#[test]
fn programs_without_body_run_quietly() {
    // an all-DEF program can never set the report flag (implicit registers
    // are cleared before each run), so libccp's unset report count is moot
    let mut f = Fixture::new();
    let only_defs = program(13, &[def(vreport(0), 3), def(control(1), 4)], &[]);
    let sid = f.flow_with(13, &only_defs, &[]);
    f.invoke(sid, &Primitives::default()).unwrap();
    let no_exprs = program(12, &[def(vreport(0), 3), report()], &[]);
    f.read(&no_exprs).unwrap();
    f.read(&wire::serialize_change_prog(sid, 12, &[])).unwrap();
    f.invoke(sid, &Primitives::default()).unwrap();
    assert!(f.reports().is_empty());
}

#[test]
fn ready_create_and_close_bytes() {
    assert_eq!(
        wire::serialize_ready(7),
        vec![5, 0, 12, 0, 0, 0, 0, 0, 7, 0, 0, 0]
    );
    let clock = VClock(Cell::new(T0));
    let mut e = Engine::new(
        &clock,
        EngineConfig {
            id: 0x0102_0304,
            ..Default::default()
        },
    );
    let mut rec = Rec::default();
    e.init(&mut rec).unwrap();
    assert_eq!(rec.sent, vec![vec![5, 0, 12, 0, 0, 0, 0, 0, 4, 3, 2, 1]]);
    let sid = e.connection_start(&mut rec, flow()).unwrap();
    assert_eq!(sid, 1);
    let create = &rec.sent[1];
    assert_eq!(create.len(), 96);
    assert_eq!(&create[..8], &[0, 0, 96, 0, 1, 0, 0, 0]);
    assert_eq!(&create[8..12], &14480u32.to_le_bytes());
    assert_eq!(&create[28..32], &80u32.to_le_bytes());
    assert_eq!(&create[32..36], b"reno");
    assert!(create[36..].iter().all(|&b| b == 0));
    e.connection_free(&mut rec, sid).unwrap();
    assert_eq!(
        rec.sent[2],
        vec![1, 0, 16, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(rec.sent[2], wire::serialize_close(1));
    assert_eq!(e.num_connections(), 0);
    assert!(e.connection_free(&mut rec, sid).is_err());
}

#[test]
fn socket_ids_reuse_the_lowest_free_slot() {
    let mut f = Fixture::new();
    let ids: Vec<u32> = (0..5).map(|_| f.start()).collect();
    assert_eq!(ids, vec![1, 2, 3, 4, 5]);
    f.engine.connection_free(&mut f.rec, 4).unwrap();
    f.engine.connection_free(&mut f.rec, 2).unwrap();
    assert_eq!(f.start(), 2);
    assert_eq!(f.start(), 4);
    assert_eq!(f.start(), 6);
    assert_eq!(f.engine.num_connections(), 6);
    // no 1024 limit
    for _ in 0..2000 {
        f.start();
    }
    assert_eq!(f.engine.num_connections(), 2006);
}

#[test]
fn long_cong_alg_is_rejected() {
    let mut f = Fixture::new();
    let mut info = flow();
    info.cong_alg = "x".repeat(64);
    assert!(matches!(
        f.engine.connection_start(&mut f.rec, info.clone()),
        Err(Error::CongAlgTooLong(64))
    ));
    info.cong_alg = "x".repeat(63);
    f.engine.connection_start(&mut f.rec, info).unwrap();
}

#[test]
fn create_is_retried_every_100ms() {
    let mut f = Fixture::new();
    let prog = program(3, &[], &[(when_true(), vec![])]);
    f.read(&prog).unwrap();
    f.rec.fail = true;
    f.rec.sent.clear();
    let sid = f.start();
    f.rec.fail = false;
    // the failed CREATE started the fallback timer; agent messages stop it
    f.read(&wire::serialize_change_prog(sid, 3, &[])).unwrap();
    f.advance_us(50_000);
    f.invoke(sid, &Primitives::default()).unwrap();
    assert!(f.rec.sent.is_empty(), "within 100 ms of the last attempt");
    f.advance_us(60_000);
    f.invoke(sid, &Primitives::default()).unwrap();
    assert_eq!(f.rec.sent.len(), 1);
    assert_eq!(f.rec.sent[0][0], wire::CREATE as u8);
    let p = Primitives {
        snd_cwnd: 100,
        ..Default::default()
    };
    f.invoke(sid, &p).unwrap();
    assert_eq!(
        f.rec.cwnd,
        vec![(sid, 100)],
        "program runs once CREATE is out"
    );
}

#[test]
fn fallback_timer() {
    let mut f = Fixture::new();
    let prog = program(3, &[], &[(when_true(), vec![report()])]);
    let sid = f.flow_with(3, &prog, &[]);
    f.rec.fail = true;
    f.invoke(sid, &Primitives::default()).unwrap(); // MEASURE fails: timer starts
    f.advance_us(1_000);
    f.invoke(sid, &Primitives::default()).unwrap(); // exactly fto: not yet
    assert!(!f.engine.in_fallback());
    f.advance_us(1);
    let e = f.invoke(sid, &Primitives::default()).unwrap_err();
    assert!(matches!(e, Error::FallbackTimedOut));
    assert_eq!(e.libccp_code(), Some(-101));
    assert!(f.engine.in_fallback());
    // any valid agent message restores
    f.rec.fail = false;
    f.read(&wire::serialize_update_fields(sid, &[])).unwrap();
    assert!(!f.engine.in_fallback());
    f.invoke(sid, &Primitives::default()).unwrap();
    assert_eq!(f.rec.sent.len(), 1);
    // even one that then fails
    f.rec.fail = true;
    f.invoke(sid, &Primitives::default()).unwrap();
    f.advance_us(5_000);
    assert!(f.invoke(sid, &Primitives::default()).is_err());
    assert!(f.read(&wire::serialize_update_fields(999, &[])).is_err());
    assert!(!f.engine.in_fallback());
}

#[test]
fn version_match_is_echoed() {
    let mut f = Fixture::new();
    f.rec.sent.clear();
    f.read(&wire::serialize_version(wire::PROTOCOL_VERSION))
        .unwrap();
    assert_eq!(f.engine.agent_version(), Some(1));
    assert_eq!(f.rec.sent, vec![wire::serialize_version(1)]);
    assert_eq!(
        f.rec.sent[0],
        vec![6, 0, 16, 0, 0, 0, 0, 0, 1, 0, 0, 0, b'V', b'C', b'C', b'P']
    );
    assert!(!f.engine.in_fallback());
    let prog = program(3, &[], &[(when_true(), vec![])]);
    let sid = f.flow_with(3, &prog, &[]);
    f.invoke(sid, &Primitives::default()).unwrap();
}

#[test]
fn version_mismatch_refuses_the_agent() {
    let mut f = Fixture::new();
    let prog = program(3, &[], &[(when_true(), vec![])]);
    let sid = f.flow_with(3, &prog, &[]);
    let e = f.read(&wire::serialize_version(2)).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("v2") && text.contains("v1"), "{text}");
    assert_eq!(
        text,
        "protocol version mismatch: agent speaks libccp wire v2, this datapath speaks v1; refusing agent"
    );
    assert!(matches!(
        e,
        Error::VersionMismatch {
            agent: 2,
            datapath: 1
        }
    ));
    assert_eq!(e.libccp_code(), None);
    // our own version went back so the agent can name both
    assert_eq!(f.rec.sent, vec![wire::serialize_version(1)]);
    assert_eq!(f.engine.agent_version(), Some(2));
    assert!(f.engine.in_fallback());
    // everything else is refused
    let e = f.read(&prog).unwrap_err();
    assert!(matches!(e, Error::VersionMismatch { agent: 2, .. }));
    let e = f.invoke(sid, &Primitives::default()).unwrap_err();
    assert!(matches!(e, Error::VersionMismatch { agent: 2, .. }));
    // a matching agent lifts the refusal
    f.read(&wire::serialize_version(1)).unwrap();
    f.invoke(sid, &Primitives::default()).unwrap();
}

#[test]
fn datapath_with_other_version_refuses_v1_agent() {
    let clock = VClock(Cell::new(T0));
    let mut e = Engine::new(
        &clock,
        EngineConfig {
            protocol_version: 3,
            ..Default::default()
        },
    );
    let mut rec = Rec::default();
    e.init(&mut rec).unwrap();
    let err = e
        .read_msg(&mut rec, &wire::serialize_version(1))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "protocol version mismatch: agent speaks libccp wire v1, this datapath speaks v3; refusing agent"
    );
    assert_eq!(rec.sent.last(), Some(&wire::serialize_version(3)));
}

#[test]
fn malformed_version_is_rejected() {
    let mut f = Fixture::new();
    let mut msg = wire::serialize_version(1);
    msg[12] ^= 1;
    assert!(matches!(
        f.read(&msg).unwrap_err(),
        Error::Malformed(wire::WireError::BadVersionMagic { .. })
    ));
    let mut long = wire::serialize_version(1);
    long.extend_from_slice(&[0; 4]);
    long[2] = 20;
    assert!(matches!(
        f.read(&long).unwrap_err(),
        Error::Malformed(wire::WireError::LengthMismatch { .. })
    ));
    assert_eq!(f.engine.agent_version(), None);
}

#[test]
fn invalid_programs_are_not_installed() {
    let good = |uid| program(uid, &[def(vreport(0), 1)], &[(when_true(), vec![report()])]);
    let cases: Vec<(Vec<u8>, Option<i32>)> = vec![
        (
            program(
                1,
                &[],
                &[(when_true(), vec![ins(15, vreport(0), imm(0), imm(0))])],
            ),
            Some(-33),
        ),
        (
            program(1, &[], &[(when_true(), vec![bind(imm(0), imm(0))])]),
            Some(-34),
        ),
        (
            program(1, &[], &[(when_true(), vec![bind(primitive(0), imm(0))])]),
            Some(-34),
        ),
        (
            program(1, &[], &[(when_true(), vec![bind(vreport(110), imm(0))])]),
            Some(-35),
        ),
        (
            program(1, &[], &[(when_true(), vec![bind(vreport(0), r(9, 0))])]),
            Some(-37),
        ),
        (
            program(
                1,
                &[],
                &[(
                    when_true(),
                    vec![ins(op::ADD, vreport(0), r(reg::TMP, 8), imm(0))],
                )],
            ),
            Some(-36),
        ),
        (
            program(
                1,
                &[],
                &[(when_true(), vec![bind(vreport(0), primitive(15))])],
            ),
            Some(-37),
        ),
        (
            program(
                1,
                &[],
                &[(when_true(), vec![bind(r(reg::IMPLICIT, 6), imm(0))])],
            ),
            Some(-35),
        ),
    ];
    let mut f = Fixture::new();
    f.read(&good(5)).unwrap();
    for (msg, code) in cases {
        let e = f.read(&msg).unwrap_err();
        assert_eq!(e.libccp_code(), code, "{e}");
    }
    // expression range outside the instruction list
    let bad_range = wire::serialize_install(
        0,
        1,
        &[Expression {
            cond_start: 0,
            num_cond: 2,
            event_start: 0,
            num_event: 0,
        }],
        &when_true(),
    );
    assert!(matches!(
        f.read(&bad_range).unwrap_err(),
        Error::Malformed(wire::WireError::ExprOutOfRange { .. })
    ));
    // wrong length
    let mut short = good(1);
    short.truncate(short.len() - 1);
    let len = short.len() as u16;
    short[2..4].copy_from_slice(&len.to_le_bytes());
    assert!(f.read(&short).is_err());
    // none of the uid-1 installs cleared the table: uid 5 is still there
    let sid = f.start();
    f.read(&wire::serialize_change_prog(sid, 5, &[])).unwrap();
    f.invoke(sid, &Primitives::default()).unwrap();
    assert_eq!(f.reports(), vec![vec![1]]);
}

#[test]
fn header_checks_follow_libccp_order() {
    let mut f = Fixture::new();
    // invalid type first, even when the length is also wrong
    let mut m = wire::serialize_update_fields(1, &[]);
    m[0] = 1;
    m[2] = 200;
    assert!(matches!(
        f.read(&m).unwrap_err(),
        Error::InvalidHeaderType(1)
    ));
    // length beyond the buffer
    let mut m = wire::serialize_update_fields(1, &[]);
    m[2] = 200;
    assert_eq!(f.read(&m).unwrap_err().libccp_code(), Some(-22));
    // too long
    let mut big = vec![0u8; 40_000];
    big[..8].copy_from_slice(
        &wire::Header {
            typ: wire::INSTALL,
            len: 40_000,
            sid: 0,
        }
        .to_bytes(),
    );
    assert_eq!(f.read(&big).unwrap_err().libccp_code(), Some(-23));
    assert_eq!(f.read(&[]).unwrap_err().libccp_code(), Some(-22));
    assert_eq!(f.read(&[2, 0, 3]).unwrap_err().libccp_code(), Some(-22));
}

#[test]
fn concatenated_messages_are_all_processed() {
    let mut f = Fixture::new();
    let a = program(31, &[def(vreport(0), 31)], &[(when_true(), vec![report()])]);
    let b = program(32, &[def(vreport(0), 32)], &[(when_true(), vec![report()])]);
    let mut bad = wire::serialize_update_fields(0, &[]);
    bad[0] = 9; // invalid type, but delimited
    let buf = [a, bad, b].concat();
    let e = f.read(&buf).unwrap_err();
    assert!(matches!(e, Error::InvalidHeaderType(9)));
    let sid = f.start();
    let buf = [
        wire::serialize_change_prog(sid, 31, &[]),
        wire::serialize_change_prog(sid, 32, &[]),
    ]
    .concat();
    f.read(&buf).unwrap();
    f.invoke(sid, &Primitives::default()).unwrap();
    assert_eq!(f.reports(), vec![vec![32]]);
}

#[test]
fn parse_to_agent_checks_lengths() {
    let mut create = wire::serialize_create(3, &flow()).unwrap();
    let all = [
        wire::serialize_ready(1),
        create.clone(),
        wire::serialize_measure(3, 9, &[1, 2]),
        wire::serialize_close(3),
        wire::serialize_version(1),
    ]
    .concat();
    let msgs = wire::parse_to_agent(&all).unwrap();
    assert_eq!(msgs.len(), 5);
    assert_eq!(msgs[0], (wire::ToAgent::Ready { id: 1 }, 0..12));
    assert_eq!(
        msgs[1].0,
        wire::ToAgent::Create {
            sid: 3,
            info: flow()
        }
    );
    assert_eq!(
        msgs[2].0,
        wire::ToAgent::Measure {
            sid: 3,
            program_uid: 9,
            fields: vec![1, 2]
        }
    );
    assert_eq!(msgs[3].0, wire::ToAgent::Close { sid: 3 });
    assert_eq!(msgs[4].0, wire::ToAgent::Version { version: 1 });

    // A name field without a NUL, or not UTF-8, is refused: portus would panic on the first.
    let name_at = wire::CREATE_LEN - wire::MAX_CONG_ALG_SIZE;
    let mut bad = create.clone();
    bad[name_at..].fill(b'a');
    assert_eq!(
        wire::parse_to_agent(&bad).unwrap_err().to_string(),
        "CREATE's algorithm name has no terminating NUL in its 64 bytes"
    );
    let mut bad = create.clone();
    bad[name_at] = 0xff;
    assert_eq!(
        wire::parse_to_agent(&bad).unwrap_err().to_string(),
        "CREATE's algorithm name is not UTF-8"
    );

    create.truncate(64);
    create[2] = 64;
    let e = wire::parse_to_agent(&create).unwrap_err();
    assert_eq!(
        e.to_string(),
        "CREATE message is 64 bytes, libccp 1.2 wire (v1) expects 96"
    );
    let mut m = wire::serialize_measure(3, 9, &[1, 2]);
    m[12] = 3;
    assert!(matches!(
        wire::parse_to_agent(&m).unwrap_err(),
        wire::WireError::LengthMismatch {
            expected: 40,
            found: 32,
            ..
        }
    ));
    m[12] = 111;
    assert!(matches!(
        wire::parse_to_agent(&m).unwrap_err(),
        wire::WireError::TooManyFields { n: 111 }
    ));
    let install = program(1, &[], &[]);
    assert!(matches!(
        wire::parse_to_agent(&install).unwrap_err(),
        wire::WireError::InvalidHeaderType { typ: 2, .. }
    ));
}

#[test]
fn parse_from_agent_round_trips() {
    let updates = [UpdateField {
        reg_type: reg::IMPLICIT,
        reg_index: 4,
        value: 42,
    }];
    let buf = [
        program(4, &[def(vreport(0), 1)], &[(when_true(), vec![report()])]),
        wire::serialize_update_fields(2, &updates),
        wire::serialize_change_prog(2, 4, &updates),
        wire::serialize_version(1),
    ]
    .concat();
    let msgs = wire::parse_from_agent(&buf).unwrap();
    assert_eq!(msgs.len(), 4);
    assert!(matches!(
        &msgs[0].0,
        wire::FromAgent::Install { program_uid: 4, expressions, instructions, .. }
            if expressions.len() == 1 && instructions.len() == 3
    ));
    assert_eq!(
        msgs[1].0,
        wire::FromAgent::UpdateFields {
            sid: 2,
            updates: updates.to_vec()
        }
    );
    assert_eq!(
        msgs[2].0,
        wire::FromAgent::ChangeProg {
            sid: 2,
            program_uid: 4,
            updates: updates.to_vec()
        }
    );
    assert_eq!(msgs[3].0, wire::FromAgent::Version { version: 1 });
    // the portus example from its serializer tests
    let portus_change = [
        4, 0, 29, 0, 1, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 2, 4, 0, 0, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(
        wire::serialize_change_prog(1, 7, &updates),
        portus_change.to_vec()
    );
}

#[test]
fn wall_clock_is_never_zero_and_monotonic() {
    let c = crate::WallClock::default();
    let a = c.now_ns();
    let b = c.now_ns();
    assert!(a >= 1_000_000_000 && b >= a);
    let shared = std::sync::Arc::new(c);
    assert!(shared.now_ns() >= b);
}
