"""Reading ccp-sim output directories (flows.csv, flow_series.csv), shared by the scripts here."""
import csv
import os
import sys


def fail(tool, msg):
    sys.exit(f"{tool}: {msg}")


def read_csv(tool, path):
    """The rows of a CSV file as dicts; exits with the path and the reason if it cannot be read."""
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        fail(tool, f"cannot read {path}: {e.strerror}")


def flows_and_goodput(tool, run, t_from, t_to):
    """(flows.csv rows with their line numbers, {flow: goodput in bit/s over [t_from, t_to]})
    for the run directory `run`, from each flow's delivered bytes at the two sample times."""
    flows_csv = os.path.join(run, "flows.csv")
    flows = [(line, r) for line, r in enumerate(read_csv(tool, flows_csv), start=2)]
    for line, r in flows:
        if "flow" not in r or "class" not in r:
            fail(tool, f"{flows_csv}:{line}: no `flow` or `class` column; is this a ccp-sim output?")
    series_csv = os.path.join(run, "flow_series.csv")
    want = {round(t_from * 1e9): "from", round(t_to * 1e9): "to"}
    at = {}
    for r in read_csv(tool, series_csv):
        t = int(r["time_ns"])
        if t in want:
            at[(r["flow"], want[t])] = int(r["delivered_bytes"])
    goodput = {}
    for _, r in flows:
        f = r["flow"]
        if (f, "from") in at and (f, "to") in at:
            goodput[f] = (at[(f, "to")] - at[(f, "from")]) * 8 / (t_to - t_from)
    return flows, goodput


def missing(tool, run, flow, t_from, t_to):
    fail(tool, f"{os.path.join(run, 'flow_series.csv')}: flow {flow} has no sample at {t_from} s "
         f"and {t_to} s (output.flow_series must list it, and the run last that long)")


def add_window_args(ap):
    """The goodput window's --from and --to (seconds; 10 and 30 by default)."""
    ap.add_argument("--from", dest="t_from", type=float, default=10.0,
                    help="start of the goodput window, seconds (default 10)")
    ap.add_argument("--to", dest="t_to", type=float, default=30.0,
                    help="end of the goodput window, seconds (default 30)")


def check_window(tool, a):
    if not a.t_from < a.t_to:
        fail(tool, f"--from {a.t_from} must be before --to {a.t_to}")
