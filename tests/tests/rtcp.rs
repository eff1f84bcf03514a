//! RTCP (`ccp-algorithms`' `rtcp`) on the simulator's spine-leaf fabric, driven by the real agent
//! in virtual time, against the baselines on the same flows: per-packet one-way delay far below
//! reno's and dctcp's at a throughput close to theirs (random sending), urgent flows preempting
//! high-volume ones, and delay and throughput both falling as α or δ grows (the paper's
//! Table II).
//!
//! The network is the paper's (3 spines, 8 leaves, 12 hosts per leaf, §V-B1) at 1/10 of its time
//! scale: rates divided by 10 (1 Gbit/s host links, 4 Gbit/s fabric) and link delays multiplied
//! by 10 (10 µs), so that queues, windows and packets in flight per RTT, counted in packets, are
//! the paper's, while the ≈ 110 µs RTT leaves room for the agent's 20 µs IPC delay and 100 µs
//! shortest report period (at the paper's 1 µs links the RTT would be 11 µs, ten times shorter
//! than the agent's control loop). Delays in µs are 10× the paper's and rates 1/10; RTCP's δ
//! and maxRate (both rates) are the paper's 10 Gbit/s divided by 10. Every switch port has 100
//! packets of drop-tail buffer (ns-3's default queue) and CE-marks above K = 20 packets (DCTCP's
//! K for 1 Gbit/s; only dctcp reacts to marks).
//!
//! Every scenario is deterministic (no random loss or jitter; destinations from a fixed seed), so
//! the bounds are margins on fixed figures, quoted next to each. `paper_tables` (ignored: ≈ 20 s
//! of runs) prints every figure of `docs/results/rtcp.md`.

use ccp_sim::scenario::{
    Amount, Dur, FlowSpec, IncastSpec, LeafSpineSpec, LinkSpec, Rate, Scenario, SeriesFlows, Size,
    TopologySpec, WorkloadSpec, example,
};
use ccp_sim::{SimResult, run};

const GBIT: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
/// Hosts of the fabric: 8 leaves × 12.
const HOSTS: u32 = 96;
/// Simulated time of the steady-state scenarios, ms (≈ 270 RTTs), and the start of the
/// throughput measurement.
const RUN_MS: u64 = 30;
const FROM_MS: u64 = 10;

/// Agent-wide parameters at this time scale: RTCP's δ and maxRate, the paper's 10 Gbit/s over 10;
/// TIMELY's rates and delays (its defaults are for 10 Gbit/s and a 20 µs minimum RTT) scaled
/// the same way; its floor `min-rate` is δ, as the module's default (10 Mbit/s at 10 Gbit/s).
/// LEDBAT's target is the 5 ms of datacenter recipes (its default, 100 ms, is for the WAN).
const SCALED: &[&str] = &[
    "ledbat.target=5ms",
    "rtcp.delta=1gbit",
    "rtcp.max-rate=1gbit",
    "timely.init-rate=1gbit",
    "timely.max-rate=1gbit",
    "timely.min-rate=1mbit",
    "timely.delta=1mbit",
    "timely.t-low=500us",
    "timely.t-high=5ms",
    "timely.min-rtt=200us",
];

/// The paper's fabric at 1/10 time scale; `fabric_gbit` is the leaf-spine rate (4: full
/// bisection; 2: the over-subscription scenario's halved fabric).
fn fabric(fabric_gbit: u64, ms: u64) -> Scenario {
    let mut s = example("leaf-spine").unwrap();
    s.duration = Dur::ms(ms);
    s.workloads.clear();
    s.transport.min_rto = Dur::ms(2);
    s.transport.initial_rto = Dur::ms(2);
    s.transport.tick = Dur::ms(1);
    s.output.step = Dur::ms(1);
    s.output.flow_series = SeriesFlows::All;
    s.output.queue_series = false;
    s.agent.params = SCALED.iter().map(|p| p.to_string()).collect();
    let port = |gbit: u64| LinkSpec {
        ecn_k: Some(Amount::Packets(20)),
        ..LinkSpec::new(Rate::from_bits(gbit * GBIT), Dur::us(10)).with_buffer(Amount::Packets(100))
    };
    s.topology = TopologySpec::LeafSpine(LeafSpineSpec {
        spines: 3,
        leaves: 8,
        hosts_per_leaf: 12,
        host_link: port(1),
        fabric_link: port(fabric_gbit),
    });
    s
}

/// A small deterministic generator (splitmix64).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Random sending (§V-B2): every host sends one long-lived flow to another host chosen at
/// random (seeded), all running `alg` (a requested name, parameters allowed).
fn random_sending(alg: &str, fabric_gbit: u64) -> Scenario {
    random_sending_drawn(alg, fabric_gbit, 7)
}

/// [`random_sending`] with the destinations drawn from `draw` (7: the scenario's own draw).
fn random_sending_drawn(alg: &str, fabric_gbit: u64, draw: u64) -> Scenario {
    let mut s = fabric(fabric_gbit, RUN_MS);
    s.flows = (0..HOSTS)
        .map(|h| {
            let d = (h + 1 + (mix(u64::from(h) + draw) % u64::from(HOSTS - 1)) as u32) % HOSTS;
            FlowSpec {
                class: "bulk".into(),
                ..FlowSpec::bulk(&format!("h{h}"), &format!("h{d}"), alg)
            }
        })
        .collect();
    s
}

/// Urgent-flow preemption (§V-B3): every host sends a high-volume flow to the next host on its
/// right from time 0 and, from 2 ms on, an urgent flow on the same pair; `hv` and `urgent` are
/// the algorithms asked for.
fn preemption(hv: &str, urgent: &str) -> Scenario {
    let mut s = fabric(4, RUN_MS);
    for h in 0..HOSTS {
        let (src, dst) = (format!("h{h}"), format!("h{}", (h + 1) % HOSTS));
        s.flows.push(FlowSpec {
            class: "high-volume".into(),
            ..FlowSpec::bulk(&src, &dst, hv)
        });
        s.flows.push(FlowSpec {
            class: "urgent".into(),
            start: Dur::ms(2),
            ..FlowSpec::bulk(&src, &dst, urgent)
        });
    }
    s
}

/// One `alg` flow from h0 to h13 (another leaf), class "probe"; with `reverse`, h13 also sends
/// a flow of its own (to h30, class "other"), so the probe's ACKs leave h13 behind its data.
fn lone_flow(alg: &str, reverse: bool) -> Scenario {
    let mut s = fabric(4, RUN_MS);
    s.flows.push(FlowSpec {
        class: "probe".into(),
        ..FlowSpec::bulk("h0", "h13", alg)
    });
    if reverse {
        s.flows.push(FlowSpec {
            class: "other".into(),
            ..FlowSpec::bulk("h13", "h30", alg)
        });
    }
    s
}

/// The 95→1 incast (§V-C2): 95 hosts answer h0 with `size` bytes each at once, `rounds` times,
/// every port with `buffer` packets of buffer.
fn incast(alg: &str, size: u64, rounds: u32, buffer: u64) -> Scenario {
    let mut s = fabric(4, 200);
    if let TopologySpec::LeafSpine(ls) = &mut s.topology {
        for l in [&mut ls.host_link, &mut ls.fabric_link] {
            *l = l.clone().with_buffer(Amount::Packets(buffer));
        }
    }
    s.stop_when_done = true;
    s.workloads = vec![WorkloadSpec::Incast(IncastSpec {
        receiver: "h0".into(),
        senders: vec![],
        size: Size(size),
        rounds,
        gap: Dur::us(100),
        start: Dur(0),
        alg: alg.into(),
        class: "incast".into(),
    })];
    s
}

/// What one run shows.
#[derive(Clone, Copy, Debug)]
struct Figures {
    /// Mean per-flow goodput from `FROM_MS` to the end, Mbit/s.
    goodput: f64,
    /// Mean and 99th percentile of the per-packet one-way delay, µs.
    mean_us: f64,
    p99_us: f64,
    retransmits: u64,
}

/// Mean per-flow goodput of `class` over (from, to] ms, Mbit/s.
fn goodput_mbps(r: &SimResult, class: &str, from_ms: u64, to_ms: u64) -> f64 {
    let ids: Vec<u32> = r
        .flows
        .iter()
        .filter(|f| f.class == class)
        .map(|f| f.flow)
        .collect();
    let at = |flow: u32, t: u64| {
        r.flow_samples(flow)
            .filter(|s| s.time_ns <= t)
            .map(|s| s.delivered_bytes)
            .max()
            .unwrap_or(0)
    };
    let total: u64 = ids
        .iter()
        .map(|&f| at(f, to_ms * MS) - at(f, from_ms * MS))
        .sum();
    total as f64 * 8.0 / ((to_ms - from_ms) as f64 / 1e3) / ids.len() as f64 / 1e6
}

fn figures(r: &SimResult, class: &str) -> Figures {
    let h = &r.owd[class];
    Figures {
        goodput: goodput_mbps(r, class, FROM_MS, RUN_MS),
        mean_us: h.mean() as f64 / 1e3,
        p99_us: h.quantile(0.99) as f64 / 1e3,
        retransmits: r
            .flows
            .iter()
            .filter(|f| f.class == class)
            .map(|f| f.retransmits)
            .sum(),
    }
}

/// Run `s`, checking that every flow got the algorithm it asked for.
fn run_checked(s: &Scenario) -> SimResult {
    let r = run(s, None).unwrap();
    let listed = s.flows.len() as u64;
    let created: u64 = r.agent.algorithms.values().sum();
    assert!(created >= listed, "{:?}", r.agent.algorithms);
    assert_eq!(r.agent.bad_reports, 0);
    r
}

fn random_figures(alg: &str, fabric_gbit: u64) -> Figures {
    let r = run_checked(&random_sending(alg, fabric_gbit));
    let name = alg.split(':').next().unwrap();
    assert_eq!(r.agent.algorithms.get(name), Some(&u64::from(HOSTS)));
    figures(&r, "bulk")
}

fn show(label: &str, f: &Figures) {
    println!(
        "{label:34} goodput {:6.1} Mbit/s  delay mean {:6.1} µs  p99 {:6.1} µs  retransmits {}",
        f.goodput, f.mean_us, f.p99_us, f.retransmits
    );
}

#[test]
fn random_sending_delay_far_below_reno_and_dctcp_at_close_throughput() {
    let rtcp = random_figures("rtcp", 4);
    let by_rtt = random_figures("rtcp:one-way-delay=false", 4);
    let reno = random_figures("reno", 4);
    let dctcp = random_figures("dctcp", 4);
    for (l, f) in [
        ("rtcp", &rtcp),
        ("rtcp, D from the RTT", &by_rtt),
        ("reno", &reno),
        ("dctcp", &dctcp),
    ] {
        show(l, f);
    }
    // Measured: rtcp 570 Mbit/s, 146 / 295 µs (D from the RTT: 551, 126 / 238); reno 546,
    // 853 / 1901; dctcp 585, 235 / 1049.
    // Delay: the paper has RTCP's mean at 17 % of NewReno's and 36 % of DCTCP's, its p99 at
    // 16 % of NewReno's. Here 17 % and 62 % (mean), 16 % and 28 % (p99).
    assert!(rtcp.mean_us < 0.3 * reno.mean_us, "{rtcp:?} {reno:?}");
    assert!(rtcp.p99_us < 0.3 * reno.p99_us, "{rtcp:?} {reno:?}");
    assert!(rtcp.mean_us < 0.8 * dctcp.mean_us, "{rtcp:?} {dctcp:?}");
    assert!(rtcp.p99_us < 0.5 * dctcp.p99_us, "{rtcp:?} {dctcp:?}");
    // Throughput: the paper has RTCP the best (4362 Mbit/s against NewReno's 4300 and DCTCP's
    // 3956). Here it is 0.97 of DCTCP's and 1.04 of Reno's (0.92 and 0.98 when eq. (9) decided
    // once per epoch instead of on every acknowledgement, unpaced). Taking D from the one-way delay (the
    // paper's time stamps) rather than the RTT gains 4 %: every host also sends, so a flow's
    // ACKs queue behind its receiver's own data, which the RTT counts as congestion of the
    // flow's path (see docs/results/rtcp.md). The bound is what holds, with a margin.
    let best = reno.goodput.max(dctcp.goodput);
    assert!(rtcp.goodput > 0.95 * best, "{rtcp:?} best {best:.1}");
    assert!(rtcp.goodput > by_rtt.goodput, "{rtcp:?} {by_rtt:?}");
    // No loss: RTCP backs off on delay long before the 100-packet buffers fill.
    assert!(
        rtcp.retransmits < reno.retransmits / 20,
        "{rtcp:?} {reno:?}"
    );
}

#[test]
fn one_way_delay_keeps_a_flow_whose_receiver_also_sends_at_full_rate() {
    // The probe's ACKs wait in h13's NIC queue behind h13's own flow. Its RTT counts that
    // queue, its one-way delay does not (the simulator's receiver echoes receive time stamps).
    let probe = |alg: &str, reverse: bool| {
        let r = run_checked(&lone_flow(alg, reverse));
        figures(&r, "probe")
    };
    let alone = probe("rtcp", false);
    let owd = probe("rtcp", true);
    let rtt = probe("rtcp:one-way-delay=false", true);
    show("alone", &alone);
    show("receiver sends, D from OWD", &owd);
    show("receiver sends, D from RTT", &rtt);
    // Measured: alone 964.9 Mbit/s; with the reverse flow 864.7 (D from the one-way delay, 90 %
    // of alone) and 790.0 (D from the RTT, 82 %); dctcp keeps 899 of 965 (93 %). (Before eq. (9)
    // acted on every acknowledgement: 842.7 and 704.9.) The rest of the loss is the window
    // law's: the ACK queue lengthens the RTT, so the window must cover a larger
    // bandwidth-delay product than the forward queue RTCP tolerates (see docs/results/rtcp.md).
    assert!(alone.goodput > 900.0, "{alone:?}");
    assert!(owd.goodput > 0.85 * alone.goodput, "{owd:?} {alone:?}");
    assert!(owd.goodput > 1.05 * rtt.goodput, "{owd:?} {rtt:?}");
    assert!(rtt.goodput < 0.85 * alone.goodput, "{rtt:?} {alone:?}");
}

#[test]
fn urgent_flows_preempt_high_volume_ones() {
    let r = run_checked(&preemption("rtcp", "rtcp:weight=24000"));
    let (hv, urgent) = (figures(&r, "high-volume"), figures(&r, "urgent"));
    let b = run_checked(&preemption("reno", "reno"));
    let (reno_hv, reno_urgent) = (figures(&b, "high-volume"), figures(&b, "urgent"));
    for (l, f) in [
        ("rtcp high-volume", &hv),
        ("rtcp urgent (weight 24000)", &urgent),
        ("reno high-volume", &reno_hv),
        ("reno urgent", &reno_urgent),
    ] {
        show(l, f);
    }
    // Measured: rtcp high-volume 171 Mbit/s, 165 / 442 µs; urgent 680, 181 / 442; reno
    // high-volume 710, 1037 / 1638; urgent 30, 1067 / 1573.
    // The urgent class takes the bandwidth: 4.0× the high-volume class's per-flow goodput.
    assert!(urgent.goodput > 3.0 * hv.goodput, "{urgent:?} {hv:?}");
    // The paper's urgent flows get 4–7× NewReno's; here the late-starting Reno flows hardly get
    // in at all (23×). 3× is the paper's direction with a margin.
    assert!(
        urgent.goodput > 3.0 * reno_urgent.goodput,
        "{urgent:?} {reno_urgent:?}"
    );
    // Both classes see a fraction of Reno's delay: a sixth of its mean (16 % high-volume, 17 %
    // urgent) and, as the paper's, about a quarter of its p99 (27 % and 28 %). (With eq. (9)
    // once per epoch the p99 was 58 % and 62 % of Reno's: the forward queue settled where the
    // counter tolerates it, ω/(α·δ) ≈ 170 µs for a high-volume flow and ≈ 230 µs for an urgent
    // one at their rates, and the per-epoch doubling overshot it.)
    for (f, base) in [(&urgent, &reno_urgent), (&hv, &reno_hv)] {
        assert!(f.mean_us < 0.3 * base.mean_us, "{f:?} {base:?}");
        assert!(f.p99_us < 0.35 * base.p99_us, "{f:?} {base:?}");
    }
    let r = run_checked(&preemption(
        "rtcp:one-way-delay=false",
        "rtcp:weight=24000,one-way-delay=false",
    ));
    let (rtt_hv, rtt_urgent) = (figures(&r, "high-volume"), figures(&r, "urgent"));
    show("rtcp high-volume, D from the RTT", &rtt_hv);
    show("rtcp urgent, D from the RTT", &rtt_urgent);
    // Measured: high-volume 113 Mbit/s, 120 / 311 µs; urgent 721, 146 / 311.
    assert!(rtt_urgent.goodput > 3.0 * rtt_hv.goodput);
    for (f, base) in [(&rtt_urgent, &reno_urgent), (&rtt_hv, &reno_hv)] {
        assert!(f.mean_us < 0.3 * base.mean_us, "{f:?} {base:?}");
        assert!(f.p99_us < 0.4 * base.p99_us, "{f:?} {base:?}");
    }
    // Not asserted: the paper's urgent flows see less delay than DCTCP's (31.5 % of its mean).
    // Here they see more (181 µs, 146 with D from the RTT, against 162): both classes share
    // every FIFO on their path, and the urgent flow's larger weight tolerates a longer queue.
    // Per-packet delay cannot separate two classes on one FIFO path; the paper measures the
    // urgent class's advantage by flow completion time, which `tests/tests/rtcp_fct.rs` checks.
}

#[test]
fn raising_alpha_or_delta_lowers_delay_and_throughput() {
    // Table II's rows on the over-subscribed fabric (2 Gbit/s between leaves and spines): α
    // from 300 to 1000 at δ = 10⁴, then δ from 3·10³ to 10⁴ at α = 1000 (δ in the paper's
    // Mbit/s, divided by 10 for this scale).
    let run_with =
        |alpha: &str, delta: &str| random_figures(&format!("rtcp:alpha={alpha},delta={delta}"), 2);
    let a300 = run_with("300", "1gbit");
    let a1000 = run_with("1000", "1gbit");
    let d3000 = run_with("1000", "300mbit");
    show("alpha 300, delta 10^4", &a300);
    show("alpha 1000, delta 10^4", &a1000);
    show("alpha 1000, delta 3*10^3", &d3000);
    // Measured: see docs/results/rtcp.md.
    assert!(a1000.mean_us < 0.9 * a300.mean_us, "{a1000:?} {a300:?}");
    assert!(a1000.goodput < a300.goodput, "{a1000:?} {a300:?}");
    assert!(a1000.mean_us < 0.9 * d3000.mean_us, "{a1000:?} {d3000:?}");
    assert!(a1000.goodput < d3000.goodput, "{a1000:?} {d3000:?}");
}

#[test]
fn incast_p99_far_below_ledbat_and_vegas_from_two_packet_starts() {
    // The 95→1 incast with 1000-packet buffers, every flow (datapath and agent) starting from a
    // two-packet window, RTCP at the paper's α = 5000. With the simulator's default ten-packet
    // start the 95 first windows (950 packets) fill any buffer before the agent decides, and
    // with 100-packet buffers 95 two-packet windows alone overflow it (docs/results/rtcp.md).
    let p99 = |alg: &str| {
        let mut s = incast(alg, 64_000, 10, 1000);
        s.transport.init_cwnd = 2;
        let r = run(&s, None).unwrap();
        let h = &r.owd["incast"];
        let p99 = h.quantile(0.99) as f64 / 1e3;
        println!(
            "{alg:28} delay mean {:7.1} µs  p99 {p99:7.1} µs",
            h.mean() as f64 / 1e3
        );
        p99
    };
    let rtcp = p99("rtcp:alpha=5000,init-cwnd=2");
    let ledbat = p99("ledbat:init-cwnd=2");
    let vegas = p99("vegas:init-cwnd=2");
    // Measured: rtcp 2359 µs, ledbat 5803, vegas 8707 (41 % and 27 %); the paper: below 56 %
    // of LEDBAT's, TIMELY's and Vegas's.
    assert!(rtcp < 0.56 * ledbat, "{rtcp} {ledbat}");
    assert!(rtcp < 0.56 * vegas, "{rtcp} {vegas}");
}

#[test]
fn timely_incast_rounds_do_not_wait_for_flows_at_its_floor() {
    // The 95→1 incast with 100-packet buffers (TIMELY's incast row of docs/results/rtcp.md).
    // The first queue's gradient sends most flows to TIMELY's floor, where a flow has a packet
    // per floor-rate packet time to complete. With the floor at δ (1 Mbit/s) 190 of 285 flows
    // of three rounds were done at 200 ms; with a floor eight times lower (125 kbit/s, one
    // packet per 96 ms) only 89 of the first round's 95, and no other round started.
    let r = run(&incast("timely", 64_000, 10, 100), None).unwrap();
    let done = r.flows.iter().filter(|f| f.completed).count();
    println!("timely incast: {done} of {} flows done", r.flows.len());
    assert!(done >= 150, "{done} of {}", r.flows.len());
}

/// RTCP against DCTCP and Reno over four more random draws of the destinations (Table I's
/// ratios, docs/results/rtcp.md).
#[test]
#[ignore = "prints the destination-draw ratios of docs/results/rtcp.md (≈ 10 s of runs)"]
fn random_sending_over_other_destination_draws() {
    for draw in [101, 202, 303, 404] {
        for (fab, rtcp) in [(4, "rtcp"), (2, "rtcp:alpha=1000")] {
            let f =
                |alg: &str| figures(&run_checked(&random_sending_drawn(alg, fab, draw)), "bulk");
            let (r, d, n) = (f(rtcp), f("dctcp"), f("reno"));
            println!(
                "draw {draw} {}: {rtcp} {:.1} Mbit/s ({:.0} / {:.0} µs) = {:.3} of dctcp's {:.1}, {:.3} of reno's {:.1}; dctcp {:.0} / {:.0} µs",
                if fab == 4 { "RS" } else { "OS" },
                r.goodput,
                r.mean_us,
                r.p99_us,
                r.goodput / d.goodput,
                d.goodput,
                r.goodput / n.goodput,
                n.goodput,
                d.mean_us,
                d.p99_us
            );
        }
    }
}

/// Every figure of docs/results/rtcp.md:
/// `cargo test --release -p ccp-tests --test rtcp paper_tables -- --ignored --nocapture`.
#[test]
#[ignore = "prints the tables of docs/results/rtcp.md (≈ 20 s of runs)"]
fn paper_tables() {
    println!("Table I, random sending (RS) and over-subscription (OS):");
    for fab in [4, 2] {
        for alg in [
            "reno", "dctcp", "bbr", "timely", "ledbat", "vegas", "cubic", "rtcp",
        ] {
            let alg = if alg == "rtcp" && fab == 2 {
                "rtcp:alpha=1000"
            } else {
                alg
            };
            show(
                &format!("{} {alg}", if fab == 4 { "RS" } else { "OS" }),
                &random_figures(alg, fab),
            );
        }
        if fab == 2 {
            show("OS rtcp (alpha 500)", &random_figures("rtcp", 2));
        }
    }
    println!("TIMELY with the EWMA weight of its authors' reference code (alpha 0.02):");
    for fab in [4, 2] {
        show(
            &format!("{} timely:alpha=0.02", if fab == 4 { "RS" } else { "OS" }),
            &random_figures("timely:alpha=0.02", fab),
        );
    }
    println!("RTCP variants, random sending and over-subscription (alpha 1000):");
    for v in [
        "one-way-delay=false",
        "per-ack=false",
        "epoch=1",
        "epoch=2",
        "epoch=4",
    ] {
        show(
            &format!("RS rtcp:{v}"),
            &random_figures(&format!("rtcp:{v}"), 4),
        );
        show(
            &format!("OS rtcp:alpha=1000,{v}"),
            &random_figures(&format!("rtcp:alpha=1000,{v}"), 2),
        );
    }
    println!("Random sending, receivers grouped by their number of incoming flows:");
    for alg in ["rtcp", "rtcp:one-way-delay=false", "dctcp"] {
        let r = run_checked(&random_sending(alg, 4));
        let mut by_dst: std::collections::BTreeMap<&str, Vec<u32>> = Default::default();
        for f in &r.flows {
            by_dst.entry(f.dst.as_str()).or_default().push(f.flow);
        }
        let at = |flow: u32, t: u64| {
            r.flow_samples(flow)
                .filter(|s| s.time_ns <= t)
                .map(|s| s.delivered_bytes)
                .max()
                .unwrap_or(0)
        };
        let mut groups: std::collections::BTreeMap<usize, (usize, f64)> = Default::default();
        for flows in by_dst.values() {
            let bytes: u64 = flows
                .iter()
                .map(|&f| at(f, RUN_MS * MS) - at(f, FROM_MS * MS))
                .sum();
            let mbps = bytes as f64 * 8.0 / ((RUN_MS - FROM_MS) as f64 / 1e3) / 1e6;
            let g = groups.entry(flows.len()).or_default();
            g.0 += 1;
            g.1 += mbps;
        }
        let line: Vec<String> = groups
            .iter()
            .map(|(k, (n, sum))| format!("{k} in: {n} receivers {:.0} Mbit/s", sum / *n as f64))
            .collect();
        println!("{alg:34} {}", line.join("; "));
    }
    println!("A flow whose receiver also sends (h0 -> h13, h13 -> h30):");
    for (alg, reverse) in [
        ("rtcp", false),
        ("rtcp:one-way-delay=false", false),
        ("rtcp", true),
        ("rtcp:one-way-delay=false", true),
        ("dctcp", false),
        ("dctcp", true),
    ] {
        let r = run_checked(&lone_flow(alg, reverse));
        show(
            &format!("{alg}{}", if reverse { ", receiver sends" } else { "" }),
            &figures(&r, "probe"),
        );
    }
    println!("Table II, over-subscription:");
    for (a, d) in [
        ("300", "1gbit"),
        ("600", "1gbit"),
        ("1000", "1gbit"),
        ("1000", "600mbit"),
        ("1000", "300mbit"),
    ] {
        show(
            &format!("alpha {a}, delta {d}"),
            &random_figures(&format!("rtcp:alpha={a},delta={d}"), 2),
        );
    }
    println!("Urgent-flow preemption:");
    for (hv, u) in [
        ("rtcp", "rtcp:weight=24000"),
        ("reno", "reno"),
        ("dctcp", "dctcp"),
    ] {
        let r = run_checked(&preemption(hv, u));
        show(&format!("{hv} high-volume"), &figures(&r, "high-volume"));
        show(&format!("{u} urgent"), &figures(&r, "urgent"));
    }
    for buffer in [100, 300, 1000] {
        println!("95→1 incast, 10 rounds of 64 KB per sender, {buffer}-packet buffers:");
        for alg in [
            "rtcp:alpha=5000,init-cwnd=2",
            "ledbat",
            "timely",
            "vegas",
            "dctcp",
            "reno",
        ] {
            incast_line(alg, buffer, 10);
        }
        // RTCP as the paper starts it: the datapath itself opens with two packets; LEDBAT and
        // Vegas started the same way, for comparison.
        for alg in [
            "rtcp:alpha=5000,init-cwnd=2",
            "ledbat:init-cwnd=2",
            "vegas:init-cwnd=2",
        ] {
            incast_line(alg, buffer, 2);
        }
    }
}

/// One incast run and its line; `datapath_iw`: the simulator's own initial window, packets
/// (what a flow sends before the agent's first decision reaches the datapath).
fn incast_line(alg: &str, buffer: u64, datapath_iw: u32) {
    {
        let mut s = incast(alg, 64_000, 10, buffer);
        s.transport.init_cwnd = datapath_iw;
        let r = run(&s, None).unwrap();
        let h = &r.owd["incast"];
        let fcts: Vec<u64> = r.flows.iter().filter_map(|f| f.fct_ns).collect();
        let done = r.flows.iter().filter(|f| f.completed).count();
        let mean_fct = fcts.iter().sum::<u64>() as f64 / fcts.len().max(1) as f64 / 1e3;
        println!(
            "{alg:24} IW {datapath_iw:2}  delay mean {:6.1} µs  p99 {:7.1} µs  flows done {done}/{}  mean FCT {mean_fct:.0} µs  end {:.1} ms  retransmits {}",
            h.mean() as f64 / 1e3,
            h.quantile(0.99) as f64 / 1e3,
            r.flows.len(),
            r.end_ns as f64 / 1e6,
            r.flows.iter().map(|f| f.retransmits).sum::<u64>()
        );
    }
}
