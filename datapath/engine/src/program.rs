//! Datapath programs and the register machine that runs them.
//!
//! This module owns the executable form of an installed program (built from a
//! validated [`wire::FromAgent::Install`]), the per-connection register file,
//! and libccp's execution semantics: instruction arithmetic with libccp's
//! overflow checks, register reads and writes (including the `Micros`
//! time-zero trick), the DEF preamble (`reset_state`, `init_register_state`)
//! and the expression loop with fallthrough.

use crate::wire::{self, Expression, Instruction, implicit, op, prim, reg};
use crate::{Error, ExtPrimitives, Primitives};
use std::cell::Cell;
use std::ops::Range;

/// libccp's "infinity" immediate in DEFs.
const DEF_INFINITY: u64 = 0x3fff_ffff;
/// What "infinity" becomes in a register (libccp's `(u64)~0U`).
const U32_ALL_ONES: u64 = 0xffff_ffff;

/// libccp's `since_usecs(then)` with nanosecond datapath time units.
#[inline]
pub(crate) fn since_us(now_ns: u64, then_ns: u64) -> u64 {
    now_ns.wrapping_sub(then_ns) / 1000
}

/// A readable operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    Imm(u64),
    Report(u8),
    Control(u8),
    Implicit(u8),
    Local(u8),
    Tmp(u8),
    Prim(u8),
}

/// A writable register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dst {
    Report(u8),
    Control(u8),
    Implicit(u8),
    Local(u8),
    Tmp(u8),
}

impl Dst {
    fn as_src(self) -> Src {
        match self {
            Dst::Report(i) => Src::Report(i),
            Dst::Control(i) => Src::Control(i),
            Dst::Implicit(i) => Src::Implicit(i),
            Dst::Local(i) => Src::Local(i),
            Dst::Tmp(i) => Src::Tmp(i),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Bind,
    Def,
    Div,
    Equiv,
    Ewma,
    Gt,
    If,
    Lt,
    Max,
    MaxWrap,
    Min,
    Mul,
    NotIf,
    Sub,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Instr {
    op: Op,
    ret: Dst,
    left: Src,
    right: Src,
}

/// An installed program.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub(crate) uid: u32,
    /// (condition, body) instruction ranges, in order.
    exprs: Vec<(Range<usize>, Range<usize>)>,
    instrs: Vec<Instr>,
    /// DEF writes done by `reset_state` (volatile report and control).
    volatile_defaults: Vec<(Dst, u64)>,
    /// DEF writes done by `init_register_state` (non-volatile ones).
    nonvolatile_defaults: Vec<(Dst, u64)>,
    /// Report registers sent in a MEASURE. Like libccp's per-slot field this
    /// starts at 0 and is set by `reset_state`, which matters for a flow left
    /// pointing at a slot refilled after a `program_uid == 1` clear: its first
    /// report carries no fields.
    num_to_return: Cell<usize>,
    /// What `reset_state` stores there (`None` for a program of DEFs only,
    /// where libccp's walk never reaches the store).
    reported: Option<usize>,
}

/// Register index of a validated register (always < 110).
fn idx8(index: u32) -> u8 {
    u8::try_from(index).unwrap_or(u8::MAX)
}

fn src(r: wire::Register) -> Src {
    match r.typ {
        reg::IMMEDIATE => Src::Imm(u64::from(r.index)),
        reg::NONVOLATILE_REPORT | reg::VOLATILE_REPORT => Src::Report(idx8(r.index)),
        reg::NONVOLATILE_CONTROL | reg::VOLATILE_CONTROL => Src::Control(idx8(r.index)),
        reg::IMPLICIT => Src::Implicit(idx8(r.index)),
        reg::LOCAL => Src::Local(idx8(r.index)),
        reg::TMP => Src::Tmp(idx8(r.index)),
        // PRIMITIVE (validation admits nothing else)
        _ => Src::Prim(idx8(r.index)),
    }
}

fn dst(r: wire::Register) -> Dst {
    match r.typ {
        reg::NONVOLATILE_REPORT | reg::VOLATILE_REPORT => Dst::Report(idx8(r.index)),
        reg::NONVOLATILE_CONTROL | reg::VOLATILE_CONTROL => Dst::Control(idx8(r.index)),
        reg::IMPLICIT => Dst::Implicit(idx8(r.index)),
        reg::LOCAL => Dst::Local(idx8(r.index)),
        // TMP (validation admits nothing else)
        _ => Dst::Tmp(idx8(r.index)),
    }
}

fn opcode(o: u8) -> Op {
    match o {
        op::ADD => Op::Add,
        op::BIND => Op::Bind,
        op::DEF => Op::Def,
        op::DIV => Op::Div,
        op::EQUIV => Op::Equiv,
        op::EWMA => Op::Ewma,
        op::GT => Op::Gt,
        op::IF => Op::If,
        op::LT => Op::Lt,
        op::MAX => Op::Max,
        op::MAXWRAP => Op::MaxWrap,
        op::MIN => Op::Min,
        op::MUL => Op::Mul,
        op::NOTIF => Op::NotIf,
        // SUB (validation admits nothing else)
        _ => Op::Sub,
    }
}

/// The value a DEF assigns: its right operand's immediate (0 for a register
/// operand, whose value field libccp leaves zeroed), with libccp's infinity.
fn def_value(right: wire::Register) -> u64 {
    let v = if right.typ == reg::IMMEDIATE {
        u64::from(right.index)
    } else {
        0
    };
    if v == DEF_INFINITY { U32_ALL_ONES } else { v }
}

impl Program {
    /// Build from parts already checked by [`wire::parse_from_agent_body`].
    pub(crate) fn new(
        uid: u32,
        expressions: &[Expression],
        instructions: &[Instruction],
    ) -> Program {
        // Control registers the DEF preamble binds to an extended primitive
        // (see `wire::prim::OWD_US_BINDING`): their reads become primitive
        // reads.
        let bound: Vec<u8> = instructions
            .iter()
            .take_while(|i| i.opcode == op::DEF)
            .filter(|d| {
                matches!(d.left.typ, reg::VOLATILE_CONTROL | reg::NONVOLATILE_CONTROL)
                    && def_value(d.right) == u64::from(prim::OWD_US_BINDING)
            })
            .map(|d| idx8(d.left.index))
            .collect();
        let read = |r: wire::Register| match src(r) {
            Src::Control(i) if bound.contains(&i) => Src::Prim(prim::OWD_US as u8),
            s => s,
        };
        let instrs = instructions
            .iter()
            .map(|i| Instr {
                op: opcode(i.opcode),
                ret: dst(i.result),
                left: read(i.left),
                right: read(i.right),
            })
            .collect();
        let range = |start: u32, n: u32| start as usize..(start as usize + n as usize);
        let exprs = expressions
            .iter()
            .map(|e| {
                (
                    range(e.cond_start, e.num_cond),
                    range(e.event_start, e.num_event),
                )
            })
            .collect();
        let preamble = || instructions.iter().take_while(|i| i.opcode == op::DEF);
        let mut volatile_defaults = Vec::new();
        let mut nonvolatile_defaults = Vec::new();
        let mut reported = 0;
        for d in preamble() {
            let target = (dst(d.left), def_value(d.right));
            match d.left.typ {
                reg::VOLATILE_REPORT => {
                    reported += 1;
                    volatile_defaults.push(target);
                }
                reg::NONVOLATILE_REPORT => {
                    reported += 1;
                    nonvolatile_defaults.push(target);
                }
                reg::VOLATILE_CONTROL => volatile_defaults.push(target),
                reg::NONVOLATILE_CONTROL => nonvolatile_defaults.push(target),
                _ => {}
            }
        }
        // libccp stores the count only when the walk reaches a non-DEF
        // instruction; a program of DEFs only keeps the slot's initial 0.
        let has_body = instructions.iter().any(|i| i.opcode != op::DEF);
        Program {
            uid,
            exprs,
            instrs,
            volatile_defaults,
            nonvolatile_defaults,
            num_to_return: Cell::new(0),
            reported: has_body.then_some(reported),
        }
    }

    /// Number of report registers a MEASURE carries now.
    pub(crate) fn num_to_return(&self) -> usize {
        self.num_to_return.get()
    }

    /// libccp's `reset_state`: volatile registers back to their defaults.
    pub(crate) fn reset_state(&self, regs: &mut Registers) {
        for &(d, v) in &self.volatile_defaults {
            regs.write_plain(d, v);
        }
        if let Some(n) = self.reported {
            self.num_to_return.set(n);
        }
    }

    /// libccp's `init_register_state`: non-volatile registers to their
    /// defaults.
    pub(crate) fn init_register_state(&self, regs: &mut Registers) {
        for &(d, v) in &self.nonvolatile_defaults {
            regs.write_plain(d, v);
        }
    }

    /// libccp's `state_machine` expression loop (implicit flags reset and
    /// `Micros` already done by the caller). Stops at the first error.
    pub(crate) fn run(&self, m: &mut Machine<'_>) -> Result<(), Error> {
        for (cond, body) in &self.exprs {
            self.run_range(cond.clone(), m)?;
            if m.regs.implicit[implicit::EXPR_FLAG as usize] != 0 {
                self.run_range(body.clone(), m)?;
            }
            if m.regs.implicit[implicit::EXPR_FLAG as usize] != 0
                && m.regs.implicit[implicit::SHOULD_FALLTHROUGH as usize] == 0
            {
                break;
            }
        }
        Ok(())
    }

    fn run_range(&self, r: Range<usize>, m: &mut Machine<'_>) -> Result<(), Error> {
        for ins in self.instrs.get(r).unwrap_or(&[]) {
            m.step(ins)?;
        }
        Ok(())
    }
}

/// A connection's register file.
#[derive(Clone, Debug)]
pub(crate) struct Registers {
    pub(crate) report: [u64; wire::MAX_REPORT_REG],
    pub(crate) control: [u64; wire::MAX_CONTROL_REG],
    pub(crate) implicit: [u64; wire::MAX_IMPLICIT_REG],
    pub(crate) tmp: [u64; wire::MAX_TMP_REG],
    pub(crate) local: [u64; wire::MAX_LOCAL_REG],
}

impl Default for Registers {
    fn default() -> Self {
        Self {
            report: [0; wire::MAX_REPORT_REG],
            control: [0; wire::MAX_CONTROL_REG],
            implicit: [0; wire::MAX_IMPLICIT_REG],
            tmp: [0; wire::MAX_TMP_REG],
            local: [0; wire::MAX_LOCAL_REG],
        }
    }
}

fn set(slot: Option<&mut u64>, v: u64) {
    if let Some(s) = slot {
        *s = v;
    }
}

impl Registers {
    /// A write that cannot touch `Micros` (used for DEF defaults, whose
    /// targets are report and control registers).
    fn write_plain(&mut self, d: Dst, v: u64) {
        match d {
            Dst::Report(i) => set(self.report.get_mut(usize::from(i)), v),
            Dst::Control(i) => set(self.control.get_mut(usize::from(i)), v),
            Dst::Implicit(i) => set(self.implicit.get_mut(usize::from(i)), v),
            Dst::Local(i) => set(self.local.get_mut(usize::from(i)), v),
            Dst::Tmp(i) => set(self.tmp.get_mut(usize::from(i)), v),
        }
    }
}

/// Everything one program run reads and writes.
pub(crate) struct Machine<'a> {
    pub(crate) regs: &'a mut Registers,
    pub(crate) implicit_time_zero: &'a mut u64,
    pub(crate) prims: &'a Primitives,
    pub(crate) ext: &'a ExtPrimitives,
    pub(crate) now_ns: u64,
    /// The datapath's time zero (for `Ack.now`).
    pub(crate) time_zero: u64,
}

fn get(slot: Option<&u64>) -> u64 {
    slot.copied().unwrap_or(0)
}

/// libccp's 32-bit wraparound-aware maximum.
pub(crate) fn max_wrap(a: u64, b: u64) -> u64 {
    // distance walking upwards from `from` to `to` on the 32-bit circle, as
    // libccp counts it (the wrap step itself is not counted)
    fn dist(from: u32, to: u32) -> u32 {
        if to > from {
            to - from
        } else {
            (u32::MAX - from).wrapping_add(to)
        }
    }
    if a == 0 {
        return b;
    }
    if b == 0 {
        return a;
    }
    let (a32, b32) = (a as u32, b as u32);
    if dist(b32, a32) < dist(a32, b32) {
        u64::from(a32)
    } else {
        u64::from(b32)
    }
}

/// libccp's EWMA: weight `a` tenths on the old value `b`, the rest on the new
/// value `c`; the new value alone when the old one is 0. Wrapping like C.
pub(crate) fn ewma(a: u64, b: u64, c: u64) -> u64 {
    if b == 0 {
        return c;
    }
    let old = a.wrapping_mul(b);
    let new = 10u64.wrapping_sub(a).wrapping_mul(c);
    old.wrapping_add(new) / 10
}

impl Machine<'_> {
    fn read(&self, s: Src) -> u64 {
        let r = &*self.regs;
        match s {
            Src::Imm(v) => v,
            Src::Report(i) => get(r.report.get(usize::from(i))),
            Src::Control(i) => get(r.control.get(usize::from(i))),
            Src::Implicit(i) => get(r.implicit.get(usize::from(i))),
            Src::Local(i) => get(r.local.get(usize::from(i))),
            Src::Tmp(i) => get(r.tmp.get(usize::from(i))),
            Src::Prim(i) => self.primitive(u32::from(i)),
        }
    }

    fn primitive(&self, i: u32) -> u64 {
        let p = self.prims;
        match i {
            prim::BYTES_ACKED => u64::from(p.bytes_acked),
            prim::BYTES_MISORDERED => u64::from(p.bytes_misordered),
            prim::ECN_BYTES => u64::from(p.ecn_bytes),
            prim::ECN_PACKETS => u64::from(p.ecn_packets),
            prim::LOST_PKTS_SAMPLE => u64::from(p.lost_pkts_sample),
            prim::NOW => since_us(self.now_ns, self.time_zero),
            prim::PACKETS_ACKED => u64::from(p.packets_acked),
            prim::PACKETS_MISORDERED => u64::from(p.packets_misordered),
            prim::BYTES_IN_FLIGHT => u64::from(p.bytes_in_flight),
            prim::BYTES_PENDING => u64::from(p.bytes_pending),
            prim::PACKETS_IN_FLIGHT => u64::from(p.packets_in_flight),
            prim::RATE_INCOMING => p.rate_incoming,
            prim::RATE_OUTGOING => p.rate_outgoing,
            prim::RTT_SAMPLE_US => {
                if p.rtt_sample_us == 0 {
                    U32_ALL_ONES
                } else {
                    p.rtt_sample_us
                }
            }
            prim::WAS_TIMEOUT => u64::from(p.was_timeout),
            prim::OWD_US => self.ext.owd_us.unwrap_or(U32_ALL_ONES),
            _ => 0,
        }
    }

    fn write(&mut self, d: Dst, v: u64) {
        if d == Dst::Implicit(implicit::US_ELAPSED as u8) {
            // libccp: the program's time zero moves so that Micros reads `v`
            // now (subtracting microseconds from nanoseconds, as libccp does).
            *self.implicit_time_zero = self.now_ns.wrapping_sub(v);
        }
        self.regs.write_plain(d, v);
    }

    #[inline]
    fn step(&mut self, ins: &Instr) -> Result<(), Error> {
        let left = self.read(ins.left);
        let right = self.read(ins.right);
        let result = match ins.op {
            Op::Add => {
                let r = left.wrapping_add(right);
                if r < left {
                    return Err(Error::AddOverflow);
                }
                r
            }
            Op::Bind => right,
            Op::Def => return Ok(()),
            Op::Div => {
                if right == 0 {
                    return Err(Error::DivByZero);
                }
                left / right
            }
            Op::Equiv => u64::from(left == right),
            Op::Ewma => ewma(left, self.read(ins.ret.as_src()), right),
            Op::Gt => u64::from(left > right),
            Op::If => {
                if left == 0 {
                    return Ok(());
                }
                right
            }
            Op::Lt => u64::from(left < right),
            Op::Max => left.max(right),
            Op::MaxWrap => max_wrap(left, right),
            Op::Min => left.min(right),
            Op::Mul => {
                let r = left.wrapping_mul(right);
                if r < left && right > 0 {
                    return Err(Error::MulOverflow);
                }
                r
            }
            Op::NotIf => {
                if left != 0 {
                    return Ok(());
                }
                right
            }
            Op::Sub => {
                let r = left.wrapping_sub(right);
                if r > left {
                    return Err(Error::SubUnderflow);
                }
                r
            }
        };
        self.write(ins.ret, result);
        Ok(())
    }
}
