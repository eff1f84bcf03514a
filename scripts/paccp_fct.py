#!/usr/bin/env python3
"""PACCP with real datacenter workloads (the paper's Figs. 8-11), on the simulator.

Builds one ccp-sim scenario per load: a leaf-spine of 2 leaves x 8 hosts and 1 spine, 1 Gbit/s
host links (100 us, 100 packets) and 4 Gbit/s fabric links (200 us, 400 packets) -- the paper's
6x5 leaf-spine with 40 hosts per rack (10/40 Gbit/s, 10/20 us, 100/400 packets) at a tenth of the
rates and ten times the delays, with the same 2:1 oversubscription of the rack uplinks. Flows
arrive as Poisson processes with sizes from the websearch or datamining CDF; each goes from a host
to a host of the other leaf. The load is a fraction of the leaf's uplink capacity (every flow
crosses it), offered equally by the leaf's hosts. The agent prices them:

  vbp  per leaf 4 BE hosts (0, 1), 2 DS hosts (0, 2) and 2 MRG hosts (0.5 Gbit/s, 2), every host
       a VBP VM (its class split among its live flows); the same load from every host.
  fbp  every host an FBP VM; a flow is BE with probability 0.6, DS (0, 2) with 0.2 and MRG
       (0.25 Gbit/s, 2) with 0.2 (three generators with 60/20/20 % of the load, each asking for
       its class -- FBP honours a flow's purchase).

Deadlines (the paper's, scaled): a flow's deadline is its size over theta/n_a (VBP: theta of the
MRG VM, n_a = the flows its host has live when it starts; FBP: theta of the MRG class), at least
10 ms (the paper's 1 ms floor at ten times the delays). The same rule is applied to flows of every
class, as the paper does, to compare what MRG buys. Small <= 100 KB < medium <= 1 MB < big.

Usage: scripts/paccp_fct.py --model vbp --workload websearch --loads 0.3,0.5,0.8 \
           [--duration 2] [--seeds 1,2,3] [--ccp-sim PATH] [--out DIR]
Prints a Markdown table: mean FCT per class and size normalised to BE, and deadline-meet rates;
then one of the big flows split by size (1-10 MB, 10-100 MB, above 100 MB): their count, mean
size and mean FCT normalised to BE's of the same split. The big bucket spans 1 MB to 1 GB, so its
mean FCT follows the few largest flows each class happened to draw; within a split the sizes
match. --no-run tabulates the runs already in --out again (the same arguments as the run).

Long-lived flows on the paper's whole fabric (Figs. 4-5), at the same 1/10 scale: 6 leaves, 5
spines, 40 hosts per leaf (240 hosts), every leaf's hosts 0-19 BE, 20-29 DS (0, 2) and 30-39 MRG
VMs (VBP, one VM per host), each host sending one long-lived flow to the host of the same index
in another leaf so that every leaf sends 4 BE, 2 DS and 2 MRG flows to each other leaf, and every
host receives one flow. Flows take a spine by ECMP hash (the paper's simulator picks one at
random per flow), so an uplink carries 8 flows on average, not exactly. Cases:
  fig4-theta2  MRG (0.2 Gbit/s, 1)     fig4-theta7  MRG (0.7 Gbit/s, 2)
  fig5-vbp     fig4-theta7 plus a second flow (to the same peer) on hosts 0-9, 20-24 and 30-34
               of every leaf: VBP gives both flows of such a VM half its (theta, omega).
  scripts/paccp_fct.py --long-lived fig4-theta2 [--duration 4] [--seed 1] [--write-only]
Prints per-class mean rates (from 1 s on) next to the per-uplink optimum the paper quotes.
"""

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

HOSTS_PER_LEAF = 8
LEAVES = 2
THETA_VBP_MBIT = 500
THETA_FBP_MBIT = 250
DEADLINE_FLOOR_S = 0.010
UPLINK_MBIT = 4000
# Host links: 1 Gbit/s, 100 us. The paper's 100-packet buffers are the switches' (here the leaf's
# port towards the host, the reverse direction); a host's own NIC queue holds 1000 packets, as
# Linux's default txqueuelen (the paper's simulator never drops in a host's send queue). The
# hosts' packets get +-3 us of timing noise (one packet time of the 4 Gbit/s uplink): without it
# hosts of equal links phase-lock to the uplink's departures in the deterministic simulator.
HOST_LINK = ("{rate: 1gbit, delay: 100us, buffer: 1000pkts, jitter: 3us, "
             "reverse: {buffer: 100pkts, jitter: 0us}}")


def host_ip(h):
    return f"10.0.0.{h + 1}"


def vbp_class(k):
    """Class of the k-th host of a leaf (VBP)."""
    return "be" if k < 4 else ("ds" if k < 6 else "mrg")


def scenario(model, cdf, load, duration, seed):
    lines = [
        f"name: paccp-{model}-load{load}",
        f"seed: {seed}",
        f"duration: {duration + 1}s",
        "stop_when_done: true",
        "transport: {min_rto: 5ms, initial_rto: 20ms, tick: 1ms}",
        "agent:",
        "  default_alg: paccp",
        "  pricing:",
    ]
    if model == "vbp":
        lines.append("    vms:")
        for leaf in range(LEAVES):
            for k in range(HOSTS_PER_LEAF):
                h = leaf * HOSTS_PER_LEAF + k
                c = vbp_class(k)
                extra = {"be": "", "ds": ", omega: 2",
                         "mrg": f", theta: {THETA_VBP_MBIT}mbit, omega: 2"}[c]
                lines.append(f"      - {{name: h{h}, src: {host_ip(h)}, class: {c}{extra}}}")
    else:
        lines.append("    model: fbp")
    lines += [
        "topology:",
        "  kind: leaf_spine",
        "  spines: 1",
        f"  leaves: {LEAVES}",
        f"  hosts_per_leaf: {HOSTS_PER_LEAF}",
        f"  host_link: {HOST_LINK}",
        "  fabric_link: {rate: 4gbit, delay: 200us, buffer: 400pkts}",
        "workloads:",
    ]

    def hosts(leaf, pred=lambda k: True):
        return [f"h{leaf * HOSTS_PER_LEAF + k}" for k in range(HOSTS_PER_LEAF) if pred(k)]

    for leaf in range(LEAVES):
        other = hosts(1 - leaf)
        if model == "vbp":
            groups = [(c, "paccp", load, hosts(leaf, lambda k, c=c: vbp_class(k) == c))
                      for c in ("be", "ds", "mrg")]
        else:
            groups = [("be", "paccp", 0.6 * load, hosts(leaf)),
                      ("ds", "paccp:omega=2", 0.2 * load, hosts(leaf)),
                      ("mrg", f"paccp:theta={THETA_FBP_MBIT}mbit,omega=2", 0.2 * load,
                       hosts(leaf))]
        for cls, alg, l, src in groups:
            # The load is a fraction of the leaf's uplink (4 Gbit/s), shared by the hosts.
            cap = UPLINK_MBIT * len(src) // HOSTS_PER_LEAF
            lines.append(
                f"  - {{kind: poisson, load: {l:.4f}, capacity: {cap}mbit, cdf: {cdf}, "
                f"alg: \"{alg}\", class: {cls}, "
                f"sources: [{', '.join(src)}], destinations: [{', '.join(other)}], "
                f"stop: {duration}s}}")
    lines.append("output: {step: 100ms, flow_series: none, queue_series: false}")
    return "\n".join(lines) + "\n"


FABRIC = {"leaves": 6, "spines": 5, "hosts": 40}


def long_lived_class(k):
    """Class of the k-th host of a leaf in the long-lived fabric runs (20/10/10 per leaf)."""
    return "be" if k < 20 else ("ds" if k < 30 else "mrg")


def long_lived_flows(case):
    """The flows in scenario order: (source host, destination host, class label)."""
    leaves, per = FABRIC["leaves"], FABRIC["hosts"]
    flows, second = [], []
    for leaf in range(leaves):
        for k in range(per):
            c = long_lived_class(k)
            first = {"be": 0, "ds": 20, "mrg": 30}[c]
            # 4 BE, 2 DS and 2 MRG flows of every leaf to each of the 5 other leaves.
            peer = ((leaf + 1 + (k - first) % (leaves - 1)) % leaves) * per + k
            two = case == "fig5-vbp" and (k < 10 or 20 <= k < 25 or 30 <= k < 35)
            label = c + ("-2" if two else "-1" if case == "fig5-vbp" else "")
            flows.append((leaf * per + k, peer, label))
            if two:
                second.append((leaf * per + k, peer, label))
    return flows + second


def long_lived_scenario(case, duration, seed):
    leaves, spines, per = FABRIC["leaves"], FABRIC["spines"], FABRIC["hosts"]
    theta, omega = (200, 1) if case == "fig4-theta2" else (700, 2)
    lines = [
        f"# PACCP {case} on the paper's 6x5 leaf-spine, 40 hosts per leaf, at 1/10 of its rates",
        "# and 10x its delays (written by scripts/paccp_fct.py --long-lived; see its docstring).",
        "# 240 hosts: about 40 s of CPU per simulated second. Results: docs/results/paccp.md.",
        f"#   target/release/ccp-sim run experiments/recipes/paccp/leaf-spine/{case}.yaml "
        f"--out results/{case}",
        f"#   scripts/paccp_fct.py --long-lived {case} --ccp-sim target/release/ccp-sim  "
        "# runs and tabulates",
        f"name: paccp-{case}",
        f"seed: {seed}",
        f"duration: {duration}s",
        "transport: {min_rto: 5ms, initial_rto: 20ms, tick: 1ms}",
        "agent:",
        "  default_alg: paccp",
        "  pricing:",
        "    vms:",
    ]
    for leaf in range(leaves):
        for k in range(per):
            h = leaf * per + k
            c = long_lived_class(k)
            extra = {"be": "", "ds": ", omega: 2",
                     "mrg": f", theta: {theta}mbit, omega: {omega}"}[c]
            lines.append(f"      - {{name: h{h}, src: {host_ip(h)}, class: {c}{extra}}}")
    lines += [
        "topology:",
        "  kind: leaf_spine",
        f"  spines: {spines}",
        f"  leaves: {leaves}",
        f"  hosts_per_leaf: {per}",
        f"  host_link: {HOST_LINK}",
        "  fabric_link: {rate: 4gbit, delay: 200us, buffer: 400pkts}",
        "flows:",
    ]
    for src, dst, _ in long_lived_flows(case):
        lines.append(f"  - {{src: h{src}, dst: h{dst}, alg: paccp}}")
    lines.append("output: {step: 100ms, flow_series: all, queue_series: false}")
    return "\n".join(lines) + "\n"


def long_lived_report(case, run_dir):
    """Per-class mean goodput from 1 s to the end, next to the per-uplink optimum."""
    theta = 200 if case == "fig4-theta2" else 700
    labels = [label for _, _, label in long_lived_flows(case)]
    series = {}
    for r in csv.DictReader(open(run_dir / "flow_series.csv")):
        series.setdefault(int(r["flow"]), []).append((int(r["time_ns"]), int(r["delivered_bytes"])))
    groups = {}
    for f, s in series.items():
        s.sort()
        at1 = max(b for t, b in s if t <= 1_000_000_000)
        t_end, b_end = s[-1]
        groups.setdefault(labels[f], []).append((b_end - at1) * 8 / (t_end - 1e9) * 1e3)
    if case == "fig5-vbp":
        opt = {"be-1": 325, "ds-1": 650, "mrg-1": 700, "be-2": 162.5, "ds-2": 325, "mrg-2": 350}
        paper = {"be-1": 2740, "ds-1": 4650, "mrg-1": 7160, "be-2": 1600, "ds-2": 2660,
                 "mrg-2": 3850}
    elif case == "fig4-theta2":
        opt, paper = {"be": 400, "ds": 800, "mrg": 400}, {"be": 3720, "ds": 6210, "mrg": 4090}
    else:
        opt, paper = {"be": 325, "ds": 650, "mrg": 700}, {"be": 2980, "ds": 5080, "mrg": 7140}
    print(f"| {case} class | flows | mean Mbit/s | p10 / p90 | optimum | paper (Gbit/s) |")
    print("|---|---|---|---|---|---|")
    means = {}
    for c in sorted(groups):
        v = sorted(groups[c])
        means[c] = sum(v) / len(v)
        print(f"| {c.upper()} | {len(v)} | {means[c]:.0f} | {v[len(v) // 10]:.0f} / "
              f"{v[9 * len(v) // 10]:.0f} | {opt[c]} | {paper[c] / 1000:.2f} |")
    for suffix in ([""] if case != "fig5-vbp" else ["-1", "-2"]):
        print(f"DS{suffix}/BE{suffix} {means['ds' + suffix] / means['be' + suffix]:.2f}")
    mrg = [x for c, v in groups.items() if c.startswith("mrg") for x in v]
    need = [theta / (2 if c.endswith("-2") else 1) for c, v in groups.items()
            if c.startswith("mrg") for _ in v]
    met = sum(1 for x, t in zip(mrg, need) if x >= t)
    print(f"MRG flows at or above their theta: {met} of {len(mrg)}")


def size_bucket(size):
    return "small" if size <= 100_000 else ("medium" if size <= 1_000_000 else "big")


# The big bucket split by size: (label, upper bound in bytes).
BIG_SPLITS = [("1-10 MB", 10_000_000), ("10-100 MB", 100_000_000), ("> 100 MB", None)]


def big_split(size):
    for label, upper in BIG_SPLITS:
        if upper is None or size <= upper:
            return label


def analyse(flows_csvs, model):
    rows = []
    for i, path in enumerate(flows_csvs):
        for r in csv.DictReader(open(path)):
            r["src"] = f"{i}:{r['src']}"  # hosts of different runs are different hosts
            rows.append(r)
    for r in rows:
        r["start"] = int(r["start_ns"]) / 1e9
        r["end"] = int(r["end_ns"]) / 1e9
        r["size"] = int(r["size_bytes"]) if r["size_bytes"] else 0
    # n_a: flows of the same source live when a flow starts (itself included).
    by_src = {}
    for r in rows:
        by_src.setdefault(r["src"], []).append(r)
    stats = {}
    for r in rows:
        if model == "vbp":
            n_a = sum(1 for o in by_src[r["src"]] if o["start"] <= r["start"] < o["end"])
            theta = THETA_VBP_MBIT * 1e6 / 8 / max(n_a, 1)
        else:
            theta = THETA_FBP_MBIT * 1e6 / 8
        deadline = max(DEADLINE_FLOOR_S, r["size"] / theta)
        done = r["completed"] == "true"
        fct = int(r["fct_ns"]) / 1e9 if done else None
        buckets = ["overall", size_bucket(r["size"])]
        if buckets[1] == "big":
            buckets.append(big_split(r["size"]))
        for bucket in buckets:
            s = stats.setdefault((r["class"], bucket), {"fct": [], "size": [], "met": 0, "n": 0})
            s["n"] += 1
            if done:
                s["fct"].append(fct)
                s["size"].append(r["size"])
                if fct <= deadline:
                    s["met"] += 1
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--long-lived", choices=["fig4-theta2", "fig4-theta7", "fig5-vbp"],
                    help="long-lived flows on the paper's whole fabric instead of a workload")
    ap.add_argument("--seed", type=int, default=1, help="seed of a --long-lived run")
    ap.add_argument("--write-only", action="store_true",
                    help="with --long-lived: print the scenario and exit")
    ap.add_argument("--model", choices=["vbp", "fbp"])
    ap.add_argument("--workload", choices=["websearch", "datamining"])
    ap.add_argument("--loads", default="0.3,0.5,0.8")
    ap.add_argument("--duration", type=float, default=None,
                    help="seconds of arrivals (default 2); with --long-lived the run's length "
                         "(default 4, as the recipes in experiments/recipes/paccp/leaf-spine)")
    ap.add_argument("--seeds", default="1", help="seeds per load; their flows are pooled")
    ap.add_argument("--ccp-sim", default="ccp-sim")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent / "../../shared/data"),
                    help="the shared data directory (holds workloads/*.csv)")
    ap.add_argument("--out", default="results/paccp-fct")
    ap.add_argument("--no-run", action="store_true",
                    help="tabulate the runs already in --out (the same --model, --workload, "
                         "--loads, --seeds and --duration) without running them again")
    a = ap.parse_args()
    if a.duration is None:
        a.duration = 4.0 if a.long_lived else 2.0
    if a.long_lived and a.no_run:
        ap.error("--no-run tabulates workload runs; --long-lived runs are reported as they run")
    if a.long_lived:
        text = long_lived_scenario(a.long_lived, int(a.duration), a.seed)
        if a.write_only:
            sys.stdout.write(text)
            return
        out = Path(a.out) / f"{a.long_lived}-seed{a.seed}"
        out.mkdir(parents=True, exist_ok=True)
        path = out.with_suffix(".yaml")
        path.write_text(text)
        subprocess.run([a.ccp_sim, "run", str(path), "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
        long_lived_report(a.long_lived, out)
        return
    if not (a.model and a.workload):
        ap.error("--model and --workload are required (or give --long-lived)")
    cdf = Path(a.data).resolve() / "workloads" / f"{a.workload}.csv"
    if not cdf.is_file():
        sys.exit(f"no workload CDF at {cdf} (give --data)")
    out = Path(a.out) / f"{a.model}-{a.workload}"
    loads = [float(x) for x in a.loads.split(",")]
    seeds = [int(x) for x in a.seeds.split(",")]
    if a.no_run:
        # Only runs of this very scenario (model, workload, load, seed, duration) are tabulated.
        for load in loads:
            for seed in seeds:
                path = out / f"load{load}-seed{seed}.yaml"
                text = scenario(a.model, cdf, load, a.duration, seed)
                if not path.is_file() or path.read_text() != text:
                    sys.exit(f"--no-run: no run of these arguments at {path} "
                             f"(run without --no-run first, with the same --duration)")
                if not (out / f"load{load}-seed{seed}" / "flows.csv").is_file():
                    sys.exit(f"--no-run: the run of {path} did not finish")
    out.mkdir(parents=True, exist_ok=True)
    print(f"| load | class | FCT overall / small / medium / big (x BE) | "
          f"deadline met overall / small / medium / big | flows (done) |")
    print("|---|---|---|---|---|")
    split_rows = []
    for load in loads:
        runs = []
        for seed in seeds:
            d = out / f"load{load}-seed{seed}"
            if not a.no_run:
                path = out / f"load{load}-seed{seed}.yaml"
                path.write_text(scenario(a.model, cdf, load, a.duration, seed))
                subprocess.run([a.ccp_sim, "run", str(path), "--out", str(d)], check=True,
                               stdout=subprocess.DEVNULL)
            runs.append(d / "flows.csv")
        stats = analyse(runs, a.model)

        def mean_of(key, c, b):
            v = stats.get((c, b), {key: []})[key]
            return sum(v) / len(v) if v else float("nan")

        def mean_fct(c, b):
            return mean_of("fct", c, b)

        for c in ("be", "ds", "mrg"):
            cells = []
            for label, _ in BIG_SPLITS:
                n = len(stats.get((c, label), {"fct": []})["fct"])
                cells.append(f"{n}, {mean_of('size', c, label) / 1e6:.3g} MB, "
                             f"{mean_fct(c, label) / mean_fct('be', label):.2f}")
            split_rows.append(f"| {load:.0%} | {c.upper()} | {' | '.join(cells)} |")

        for c in ("be", "ds", "mrg"):
            fcts = " / ".join(f"{mean_fct(c, b) / mean_fct('be', b):.2f}"
                              for b in ("overall", "small", "medium", "big"))
            dmr = " / ".join(
                f"{100 * stats[(c, b)]['met'] / stats[(c, b)]['n']:.0f} %"
                if (c, b) in stats else "-" for b in ("overall", "small", "medium", "big"))
            s = stats.get((c, "overall"), {"n": 0, "fct": []})
            print(f"| {load:.0%} | {c.upper()} | {fcts} | {dmr} | {s['n']} ({len(s['fct'])}) |")
        sys.stdout.flush()
    print()
    print("| load | class | " + " | ".join(
        f"big {label}: flows done, mean size, FCT (x BE)" for label, _ in BIG_SPLITS) + " |")
    print("|---|---|" + "---|" * len(BIG_SPLITS))
    for row in split_rows:
        print(row)


if __name__ == "__main__":
    main()
