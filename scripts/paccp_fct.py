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
Prints a Markdown table: mean FCT per class and size normalised to BE, and deadline-meet rates.
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
        "  host_link: {rate: 1gbit, delay: 100us, buffer: 100pkts}",
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


def size_bucket(size):
    return "small" if size <= 100_000 else ("medium" if size <= 1_000_000 else "big")


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
        for bucket in ("overall", size_bucket(r["size"])):
            s = stats.setdefault((r["class"], bucket), {"fct": [], "met": 0, "n": 0})
            s["n"] += 1
            if done:
                s["fct"].append(fct)
                if fct <= deadline:
                    s["met"] += 1
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["vbp", "fbp"], required=True)
    ap.add_argument("--workload", choices=["websearch", "datamining"], required=True)
    ap.add_argument("--loads", default="0.3,0.5,0.8")
    ap.add_argument("--duration", type=float, default=2.0, help="seconds of arrivals")
    ap.add_argument("--seeds", default="1", help="seeds per load; their flows are pooled")
    ap.add_argument("--ccp-sim", default="ccp-sim")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent / "../../shared/data"),
                    help="the shared data directory (holds workloads/*.csv)")
    ap.add_argument("--out", default="results/paccp-fct")
    a = ap.parse_args()
    cdf = Path(a.data).resolve() / "workloads" / f"{a.workload}.csv"
    if not cdf.is_file():
        sys.exit(f"no workload CDF at {cdf} (give --data)")
    out = Path(a.out) / f"{a.model}-{a.workload}"
    out.mkdir(parents=True, exist_ok=True)
    print(f"| load | class | FCT overall / small / medium / big (x BE) | "
          f"deadline met overall / small / medium / big | flows (done) |")
    print("|---|---|---|---|---|")
    for load in [float(x) for x in a.loads.split(",")]:
        runs = []
        for seed in [int(x) for x in a.seeds.split(",")]:
            d = out / f"load{load}-seed{seed}"
            path = out / f"load{load}-seed{seed}.yaml"
            path.write_text(scenario(a.model, cdf, load, a.duration, seed))
            subprocess.run([a.ccp_sim, "run", str(path), "--out", str(d)], check=True,
                           stdout=subprocess.DEVNULL)
            runs.append(d / "flows.csv")
        stats = analyse(runs, a.model)

        def mean_fct(c, b):
            v = stats.get((c, b), {"fct": []})["fct"]
            return sum(v) / len(v) if v else float("nan")

        for c in ("be", "ds", "mrg"):
            fcts = " / ".join(f"{mean_fct(c, b) / mean_fct('be', b):.2f}"
                              for b in ("overall", "small", "medium", "big"))
            dmr = " / ".join(
                f"{100 * stats[(c, b)]['met'] / stats[(c, b)]['n']:.0f} %"
                if (c, b) in stats else "-" for b in ("overall", "small", "medium", "big"))
            s = stats.get((c, "overall"), {"n": 0, "fct": []})
            print(f"| {load:.0%} | {c.upper()} | {fcts} | {dmr} | {s['n']} ({len(s['fct'])}) |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
