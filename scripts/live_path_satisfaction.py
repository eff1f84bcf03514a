#!/usr/bin/env python3
"""Satisfaction per protocol from a run of experiments/recipes/hercules/live-path.yaml.

The recipe runs twelve independent paths side by side; each flow's class is
<path>-r<requirement>, the path being the algorithm's first letter and the capacity in Mbit/s
(h95, c120, b135, v95, ...), the requirement a rate such as 100mbit or 10kbit. For each flow of
the `flows` group this reads its delivered bytes at FROM and TO seconds (flow_series.csv) and
divides the goodput between them by the requirement. It prints, per protocol, the 100 Mbit/s
flow's satisfaction at each capacity and the worst over every flow and capacity, and the ratio
of Hercules's worst case to the best other protocol's (docs/results/hercules.md, "The paper's
path").

  ccp-sim run experiments/recipes/hercules/live-path.yaml --out results/hercules-live-path
  scripts/live_path_satisfaction.py results/hercules-live-path [--from 10] [--to 30]
"""
import argparse
import os
import re

from sim_output import add_window_args, check_window, fail as _fail, flows_and_goodput, missing

TOOL = "live_path_satisfaction"
NAMES = {"h": "hercules", "c": "cubic", "b": "bbr", "v": "vivace"}
UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def fail(msg):
    _fail(TOOL, msg)


def parse_rate(text, where):
    m = re.fullmatch(r"([0-9.]+)([kmg]?bit)", text.lower())
    if not m:
        fail(f"{where}: requirement {text!r} is not a rate such as 100mbit")
    return float(m.group(1)) * UNITS[m.group(2)]


def satisfaction(run, t_from, t_to):
    """{path: {requirement text: satisfaction}} for the run directory `run`."""
    flows_csv = os.path.join(run, "flows.csv")
    flows, goodput = flows_and_goodput(TOOL, run, t_from, t_to)
    out = {}
    for line, r in flows:
        if r.get("group") != "flows":
            continue
        cls = r["class"]
        m = re.fullmatch(r"([hcbv]\d+)-r(\S+)", cls)
        if not m:
            fail(f"{flows_csv}:{line}: class {cls!r} is not <path>-r<requirement> (h95-r100mbit)")
        if r["flow"] not in goodput:
            missing(TOOL, run, r["flow"], t_from, t_to)
        rate = parse_rate(m.group(2), f"{flows_csv}:{line}")
        out.setdefault(m.group(1), {})[m.group(2)] = goodput[r["flow"]] / rate
    if not out:
        fail(f"{flows_csv}: no flow of the group `flows`; is this a live-path.yaml run?")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="ccp-sim output directories of live-path.yaml")
    add_window_args(ap)
    a = ap.parse_args()
    check_window(TOOL, a)
    for run in a.runs:
        sat = satisfaction(run, a.t_from, a.t_to)
        print(run)
        print(f"  {'protocol':<10} {'100 Mbit/s flow (per capacity)':<36} worst")
        worst = {}
        for letter, name in NAMES.items():
            paths = sorted((p for p in sat if p[0] == letter), key=lambda p: int(p[1:]))
            if not paths:
                continue
            worst[letter] = min(min(sat[p].values()) for p in paths)
            big = " / ".join(
                f"{sat[p]['100mbit']:.3f}" if "100mbit" in sat[p] else "-" for p in paths
            )
            caps = ", ".join(p[1:] for p in paths)
            print(f"  {name:<10} {big + ' (' + caps + ')':<36} {worst[letter]:.3f}")
        others = [w for k, w in worst.items() if k != "h"]
        if "h" in worst and others and max(others) > 0:
            print(f"  hercules worst / best other: {worst['h'] / max(others):.2f}x")


if __name__ == "__main__":
    main()
