#!/usr/bin/env python3
"""CPU cost of ccp-quic's precise sender timer, on loopback: the same flow alternately on the
precise timer without slack, with the default 100 us slack, and on s2n-quic's own millisecond
timer (--coarse-timer), round after round under one agent.

Usage: scripts/bench_quic_timer.py [--rounds 3] [--flow SPEC ...]
Needs: target/release/{ccp-agent,ccp-quic} (make build) and GNU time (`apt-get install time`).

Default flows: a bounded hercules flow paced at about 28 Mbit/s and one at about 377 Mbit/s
(the agent sets the pacing rate; the window never limits on loopback), 5 s each. Prints, per
flow and timer, the goodput and the sender's user + system CPU seconds (median, range).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
MODES = {
    "precise, no slack": ["--pacing-slack", "0us"],
    "precise, 100us slack (default)": [],
    "millisecond timer": ["--coarse-timer"],
}
FLOWS = [
    "alg=hercules:min=20mbit;max=30mbit;bounded=true,time=5s",
    "alg=hercules:min=300mbit;max=400mbit;bounded=true,time=5s",
]


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def one(tmp, agent_sock, spec, extra):
    port = free_port()
    cert = os.path.join(tmp, "cert.pem")
    if os.path.exists(cert):
        os.remove(cert)
    recv = subprocess.Popen(
        [os.path.join(BIN, "ccp-quic"), "recv", "--listen", f"127.0.0.1:{port}", "--flows", "1",
         "--cert-out", cert],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = os.path.join(tmp, "send.json")
    timing = os.path.join(tmp, "time.txt")
    try:
        subprocess.run(
            ["/usr/bin/time", "-f", "%U %S", "-o", timing, os.path.join(BIN, "ccp-quic"), "send",
             "--to", f"127.0.0.1:{port}", "--cert", cert, "--agent", agent_sock, "--flow", spec,
             "--json", summary] + extra,
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        recv.wait(timeout=30)
    flow = json.load(open(summary))["flows"][0]
    user, sys_ = open(timing).read().split()[-2:]
    if flow["controllers"] != ["ccp-agent"]:
        sys.exit(f"the flow left the agent: {flow['controllers']}")
    return flow["goodput_mbps"], float(user) + float(sys_)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--flow", action="append", help="ccp-quic --flow spec (repeatable)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        agent_sock = os.path.join(tmp, "agent.sock")
        agent = subprocess.Popen([os.path.join(BIN, "ccp-agent"), "--socket", agent_sock],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(50):
                if os.path.exists(agent_sock):
                    break
                time.sleep(0.1)
            for spec in a.flow or FLOWS:
                got = {m: [] for m in MODES}
                for _ in range(a.rounds):
                    for mode, extra in MODES.items():
                        got[mode].append(one(tmp, agent_sock, spec, extra))
                print(spec)
                for mode, rows in got.items():
                    g = [r[0] for r in rows]
                    c = [r[1] for r in rows]
                    print(f"  {mode:32} goodput {statistics.median(g):7.1f} Mbit/s "
                          f"({min(g):.1f}-{max(g):.1f}), sender CPU {statistics.median(c):.2f} s "
                          f"({min(c):.2f}-{max(c):.2f}), {len(rows)} runs")
        finally:
            agent.terminate()
            agent.wait()


if __name__ == "__main__":
    main()
