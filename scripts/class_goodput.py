#!/usr/bin/env python3
"""Mean goodput per flow of each class, and ratios between classes, from ccp-sim runs.

For each run directory (the output of `ccp-sim run`: flows.csv and flow_series.csv) reads every
flow's delivered bytes at FROM and TO seconds and prints, per class, the mean goodput of its
flows in Mbit/s over that window; each `--ratio A/B` prints mean(A) / mean(B) per run, then
the range over the runs.

  scripts/class_goodput.py results/run1 results/run2 [--from 10] [--to 30] [--ratio new/cubic]
"""
import argparse

from sim_output import add_window_args, check_window, fail as _fail, flows_and_goodput, missing

TOOL = "class_goodput"


def fail(msg):
    _fail(TOOL, msg)


def class_means(run, t_from, t_to):
    """{class: mean goodput per flow, Mbit/s} of the run directory `run`."""
    flows, goodput = flows_and_goodput(TOOL, run, t_from, t_to)
    sums = {}
    for _, r in flows:
        if r["flow"] not in goodput:
            missing(TOOL, run, r["flow"], t_from, t_to)
        s = sums.setdefault(r["class"] or r.get("alg", ""), [0.0, 0])
        s[0] += goodput[r["flow"]] / 1e6
        s[1] += 1
    return {c: total / n for c, (total, n) in sums.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="ccp-sim output directories")
    add_window_args(ap)
    ap.add_argument("--ratio", action="append", default=[], metavar="A/B",
                    help="print mean goodput of class A over class B (repeatable)")
    a = ap.parse_args()
    check_window(TOOL, a)
    pairs = []
    for r in a.ratio:
        num, sep, den = r.partition("/")
        if not sep or not num or not den:
            fail(f"--ratio {r!r}: expected two class names as A/B")
        pairs.append((num, den))
    ratios = {p: [] for p in pairs}
    for run in a.runs:
        means = class_means(run, a.t_from, a.t_to)
        print(run + ": " + ", ".join(f"{c} {m:.2f}" for c, m in sorted(means.items())) +
              " Mbit/s per flow")
        for num, den in pairs:
            for c in (num, den):
                if c not in means:
                    fail(f"{run}: no class {c!r} (classes: {', '.join(sorted(means))})")
            ratios[(num, den)].append(means[num] / means[den] if means[den] > 0 else float("inf"))
    for (num, den), v in ratios.items():
        print(f"{num}/{den}: " + " ".join(f"{x:.2f}" for x in v) +
              (f" (range {min(v):.2f}-{max(v):.2f})" if len(v) > 1 else ""))


if __name__ == "__main__":
    main()
