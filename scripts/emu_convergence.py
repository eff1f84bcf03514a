#!/usr/bin/env python3
"""Convergence after a bandwidth step, from the sender traces of an emulator (ccp-udp) run.

For every run of a ccp-exp results directory (e.g. of experiments/recipes/polycc/emu-halving.yaml)
reads raw/send.json, whose flows carry a trace sample (bytes in flight, in-order bytes delivered)
every 10 ms counted from the end of the handshake, and prints per flow:

  convergence  seconds from the step until every 500-ms mean of the bytes in flight stays at most
               LIMIT bytes to the end of the trace (docs/results/polycc.md, scenario 2);
  goodput      in-order bytes from the step to END seconds, Mbit/s.

The step is given on the link's clock (the recipe's trace: 5 s); the flow's trace starts one
handshake later, so the step is placed at STEP minus the flow's handshake RTT.

  scripts/emu_convergence.py results/polycc-emu-halving [--step 5] [--limit 187500] [--end 15.5]
"""
import argparse
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a ccp-exp results directory")
    ap.add_argument("--step", type=float, default=5.0, help="the step on the link's clock, s (default 5)")
    ap.add_argument("--limit", type=float, default=1.5 * 10e6 / 8 * 0.1,
                    help="bytes in flight counted as converged (default 1.5 x the 10 Mbit/s, 100 ms BDP)")
    ap.add_argument("--end", type=float, default=15.5, help="end of the goodput window, s (default 15.5)")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.results, "runs", "*", "*", "r*", "raw", "send.json")))
    if not files:
        sys.exit(f"{a.results}: no runs/*/*/r*/raw/send.json (an emulator results directory?)")
    for path in files:
        run = os.path.relpath(os.path.dirname(os.path.dirname(path)), os.path.join(a.results, "runs"))
        with open(path) as f:
            flows = json.load(f)["flows"]
        for fl in flows:
            trace = [(s["t_s"], s["bytes_in_flight"], s["delivered_bytes"]) for s in fl["trace"]]
            at = a.step - fl["handshake_rtt_ms"] / 1e3
            c = convergence(trace, at, a.limit)
            inside = [s for s in trace if at <= s[0] <= a.end]
            g = ((inside[-1][2] - inside[0][2]) * 8 / (inside[-1][0] - inside[0][0]) / 1e6
                 if len(inside) >= 2 and inside[-1][0] > inside[0][0] else float("nan"))
            cs = "n/a" if c is None else f"{c:.2f} s"
            print(f"{run} flow {fl['flow']}: step at {at:.2f} s, convergence {cs}, goodput after {g:.2f} Mbit/s")


if __name__ == "__main__":
    main()
