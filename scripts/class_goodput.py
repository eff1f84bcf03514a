#!/usr/bin/env python3
"""Mean goodput per flow of each class, and ratios between classes, from ccp-sim runs.

For each run directory (the output of `ccp-sim run`: flows.csv and flow_series.csv) reads every
flow's delivered bytes at FROM and TO seconds and prints, per class, the mean goodput of its
flows in Mbit/s over that window; each `--ratio A/B` prints mean(A) / mean(B) per run, then
the range over the runs.

  scripts/class_goodput.py results/run1 results/run2 [--from 10] [--to 30] [--ratio new/cubic]
"""
import argparse
import csv
import os
import sys


def fail(msg):
    sys.exit(f"class_goodput: {msg}")


def read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")


def class_means(run, t_from, t_to):
    """{class: mean goodput per flow, Mbit/s} of the run directory `run`."""
    flows_csv = os.path.join(run, "flows.csv")
    cls = {}
    for line, r in enumerate(read_csv(flows_csv), start=2):
        if "flow" not in r or "class" not in r:
            fail(f"{flows_csv}:{line}: no `flow` or `class` column; is this a ccp-sim output?")
        cls[r["flow"]] = r["class"] or r.get("alg", "")
    series_csv = os.path.join(run, "flow_series.csv")
    want = {round(t_from * 1e9): "from", round(t_to * 1e9): "to"}
    at = {}
    for r in read_csv(series_csv):
        t = int(r["time_ns"])
        if t in want:
            at[(r["flow"], want[t])] = int(r["delivered_bytes"])
    sums = {}
    for flow, c in cls.items():
        if (flow, "from") not in at or (flow, "to") not in at:
            fail(f"{series_csv}: flow {flow} has no sample at {t_from} s and {t_to} s "
                 "(output.flow_series must include it, and the run last that long)")
        mbps = (at[(flow, "to")] - at[(flow, "from")]) * 8 / (t_to - t_from) / 1e6
        s = sums.setdefault(c, [0.0, 0])
        s[0] += mbps
        s[1] += 1
    return {c: total / n for c, (total, n) in sums.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="ccp-sim output directories")
    ap.add_argument("--from", dest="t_from", type=float, default=10.0,
                    help="start of the goodput window, seconds (default 10)")
    ap.add_argument("--to", dest="t_to", type=float, default=30.0,
                    help="end of the goodput window, seconds (default 30)")
    ap.add_argument("--ratio", action="append", default=[], metavar="A/B",
                    help="print mean goodput of class A over class B (repeatable)")
    a = ap.parse_args()
    if not a.t_from < a.t_to:
        fail(f"--from {a.t_from} must be before --to {a.t_to}")
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
