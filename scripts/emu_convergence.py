#!/usr/bin/env python3
"""Convergence after a bandwidth step, from the sender traces of an emulator (ccp-udp) or
simulator run.

For every run of a ccp-exp results directory (e.g. of experiments/recipes/polycc/emu-halving.yaml
or halving.yaml) reads raw/send.json (emulator: each flow's trace samples the bytes in flight and
the in-order bytes delivered every 10 ms, counted from the end of the handshake) or
raw/flow_series.csv (simulator: the same every 10 ms of the run's clock), and prints per flow:

  convergence  seconds from the step until every 500-ms mean of the bytes in flight stays at most
               LIMIT bytes to the end of the trace (docs/results/polycc.md, scenario 2);
  goodput      in-order bytes from the step to END seconds, Mbit/s.

The step is given on the link's clock (the recipe's trace: 5 s); an emulator flow's trace starts
one handshake later, so there the step is placed at STEP minus the flow's handshake RTT.

  scripts/emu_convergence.py results/polycc-emu-halving [--step 5] [--limit 187500] [--end 15.5]
  scripts/emu_convergence.py results/polycc-halving
"""
import argparse
import csv
import glob
import json
import os
import sys


def convergence(trace, at, limit):
    after = [s for s in trace if s[0] >= at]
    if not after:
        return None
    end = after[-1][0]
    settled = at
    for i, s in enumerate(after):
        if s[0] + 0.5 > end:
            break
        window = [u[1] for u in after[i:] if u[0] < s[0] + 0.5]
        if sum(window) / len(window) > limit:
            settled = s[0] + 0.5
    return settled - at


def traces(raw, step):
    """(flow, step on the trace's clock, [(t s, bytes in flight, bytes delivered)]) per flow."""
    send = os.path.join(raw, "send.json")
    if os.path.exists(send):
        with open(send) as f:
            for fl in json.load(f)["flows"]:
                trace = [(s["t_s"], s["bytes_in_flight"], s["delivered_bytes"]) for s in fl["trace"]]
                yield fl["flow"], step - fl["handshake_rtt_ms"] / 1e3, trace
        return
    series = os.path.join(raw, "flow_series.csv")
    if not os.path.exists(series):
        sys.exit(f"{raw}: neither send.json nor flow_series.csv")
    by_flow = {}
    with open(series) as f:
        for r in csv.DictReader(f):
            by_flow.setdefault(int(r["flow"]), []).append(
                (int(r["time_ns"]) / 1e9, int(r["inflight_bytes"]), int(r["delivered_bytes"])))
    for flow, trace in sorted(by_flow.items()):
        yield flow, step, trace


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a ccp-exp results directory")
    ap.add_argument("--step", type=float, default=5.0, help="the step on the link's clock, s (default 5)")
    ap.add_argument("--limit", type=float, default=1.5 * 10e6 / 8 * 0.1,
                    help="bytes in flight counted as converged (default 1.5 x the 10 Mbit/s, 100 ms BDP)")
    ap.add_argument("--end", type=float, default=15.5, help="end of the goodput window, s (default 15.5)")
    a = ap.parse_args()
    runs = sorted(glob.glob(os.path.join(a.results, "runs", "*", "*", "r*", "raw")))
    if not runs:
        sys.exit(f"{a.results}: no runs/*/*/r*/raw (a ccp-exp results directory?)")
    for raw in runs:
        run = os.path.relpath(os.path.dirname(raw), os.path.join(a.results, "runs"))
        for flow, at, trace in traces(raw, a.step):
            c = convergence(trace, at, a.limit)
            inside = [s for s in trace if at <= s[0] <= a.end]
            g = ((inside[-1][2] - inside[0][2]) * 8 / (inside[-1][0] - inside[0][0]) / 1e6
                 if len(inside) >= 2 and inside[-1][0] > inside[0][0] else float("nan"))
            cs = "n/a" if c is None else f"{c:.2f} s"
            print(f"{run} flow {flow}: step at {at:.2f} s, convergence {cs}, goodput after {g:.2f} Mbit/s")


if __name__ == "__main__":
    main()
