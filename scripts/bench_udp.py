#!/usr/bin/env python3
"""Single-flow loopback goodput of ccp-udp under CCP control, next to kernel TCP (iperf3) and
iperf3 UDP blasting, measured in one run; and ccp-udp with per-ACK against per-RTT reports.

Usage: scripts/bench_udp.py [--seconds 10] [--alg cubic]
Needs: target/release/{ccp-agent,ccp-udp} (make build), iperf3 and GNU time
(`apt-get install iperf3 time`).

CPU per Gbit/s is (user + system CPU seconds of every process of the setup) / (Gbit delivered):
for ccp-udp the sender, the receiver and the agent; for iperf3 its client and server.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
TIME = shutil.which("time") and "/usr/bin/time"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def timed(cmd, out):
    """Wrap cmd with GNU time writing 'user sys' to out."""
    return [TIME, "-f", "%U %S", "-o", out] + cmd


def cpu(path):
    with open(path) as f:
        last = f.read().strip().splitlines()[-1]
    u, s = last.split()
    return float(u) + float(s)


def wait_for(pred, timeout=10):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.02)
    return False


def iperf_tcp(secs, work):
    port = free_port()
    srv = subprocess.Popen(timed(["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"], f"{work}/tcp-srv.cpu"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    out = subprocess.run(timed(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(secs), "-C", "cubic", "-J"],
                               f"{work}/tcp-cli.cpu"), capture_output=True, text=True, check=True)
    srv.wait(timeout=30)
    j = json.loads(out.stdout)
    bps = j["end"]["sum_received"]["bits_per_second"]
    secs_run = j["end"]["sum_received"]["seconds"]
    return bps, cpu(f"{work}/tcp-srv.cpu") + cpu(f"{work}/tcp-cli.cpu"), secs_run


def iperf_udp(secs, work, length=None):
    port = free_port()
    srv = subprocess.Popen(timed(["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"], f"{work}/udp-srv.cpu"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    extra = ["-l", str(length)] if length else []
    out = subprocess.run(timed(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(secs), "-u", "-b", "0", "-J"]
                               + extra, f"{work}/udp-cli.cpu"), capture_output=True, text=True, check=True)
    srv.wait(timeout=30)
    j = json.loads(out.stdout)
    s = j["end"]["sum"]
    delivered = s["bits_per_second"] * (1 - s.get("lost_percent", 0.0) / 100.0)
    return delivered, cpu(f"{work}/udp-srv.cpu") + cpu(f"{work}/udp-cli.cpu"), s["seconds"], s.get("lost_percent", 0.0)


def ccp_udp(secs, alg, report, work, tag, mss=1448):
    sock = f"{work}/agent-{tag}.sock"
    agent = subprocess.Popen(timed([f"{BIN}/ccp-agent", "--socket", sock, "--report", report, "--log-level", "warn"],
                                   f"{work}/{tag}-agent.cpu"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_for(lambda: os.path.exists(sock)):
        sys.exit("ccp-agent did not start")
    errf = open(f"{work}/{tag}-recv.err", "w")
    recv = subprocess.Popen(timed([f"{BIN}/ccp-udp", "recv", "--listen", "127.0.0.1:0", "--flows", "1",
                                   "--json", f"{work}/{tag}-recv.json"], f"{work}/{tag}-recv.cpu"),
                            stdout=subprocess.DEVNULL, stderr=errf)
    addr = []

    def bound():
        m = re.search(r"listening on (\S+)", open(f"{work}/{tag}-recv.err").read())
        if m:
            addr.append(m.group(1))
        return bool(m)

    if not wait_for(bound):
        sys.exit("receiver did not start")
    subprocess.run(timed([f"{BIN}/ccp-udp", "send", "--to", addr[0], "--time", f"{secs}s", "--alg", alg,
                          "--agent", sock, "--json", f"{work}/{tag}-send.json", "--log-level", "warn",
                          "--mss", str(mss)],
                         f"{work}/{tag}-send.cpu"), check=True, stdout=subprocess.DEVNULL)
    recv.wait(timeout=30)
    # Stop the agent itself (the Popen is GNU time, which reports once its child exits).
    child = subprocess.run(["pgrep", "-P", str(agent.pid)], capture_output=True, text=True).stdout.split()
    for pid in child:
        os.kill(int(pid), signal.SIGTERM)
    agent.wait(timeout=10)
    r = json.load(open(f"{work}/{tag}-recv.json"))["flows"][0]
    s = json.load(open(f"{work}/{tag}-send.json"))
    assert r["intact"], r
    total_cpu = sum(cpu(f"{work}/{tag}-{p}.cpu") for p in ("agent", "recv", "send"))
    return r["goodput_mbps"] * 1e6, total_cpu, r["duration_s"], s["ccp"]["sent"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--alg", default="cubic")
    a = ap.parse_args()
    if not TIME or not shutil.which("iperf3"):
        sys.exit("needs iperf3 and GNU time: apt-get install iperf3 time")
    work = tempfile.mkdtemp(prefix="ccp-bench-")
    rows = []
    tcp = iperf_tcp(a.seconds, work)
    rows.append(("kernel TCP (iperf3 -C cubic)", tcp[0], tcp[1], tcp[2], ""))
    udp = iperf_udp(a.seconds, work)
    rows.append(("iperf3 -u -b 0 (64 KB datagrams)", udp[0], udp[1], udp[2], f"delivered; {udp[3]:.1f} % lost"))
    udp1448 = iperf_udp(a.seconds, work, 1448)
    rows.append(("iperf3 -u -b 0 -l 1448", udp1448[0], udp1448[1], udp1448[2], f"delivered; {udp1448[3]:.1f} % lost"))
    for report in ("per-rtt", "per-ack"):
        g, c, d, msgs = ccp_udp(a.seconds, a.alg, report, work, report)
        rows.append((f"ccp-udp {a.alg}, {report} reports", g, c, d, f"{msgs / d:.0f} reports/s"))
    g, c, d, msgs = ccp_udp(a.seconds, a.alg, "per-rtt", work, "jumbo", mss=8948)
    rows.append((f"ccp-udp {a.alg}, per-rtt, mss 8948", g, c, d, f"{msgs / d:.0f} reports/s; lo's MTU is 64 KB"))
    print(f"{'setup':<36} {'Gbit/s':>8} {'CPU s/Gbit':>11}  note")
    for name, bps, cpu_s, dur, note in rows:
        gbit = bps * dur / 1e9
        print(f"{name:<36} {bps / 1e9:>8.2f} {cpu_s / gbit:>11.3f}  {note}")
    ccp = rows[3][1]
    print(f"ccp-udp (per-RTT) / kernel TCP = {ccp / tcp[0]:.2f}   (goal >= 0.5)")
    print(f"ccp-udp (per-RTT) / iperf3 UDP delivered, 1448-byte datagrams = {ccp / udp1448[0]:.2f}   (goal >= 1.5)")
    print(f"ccp-udp (per-RTT) / iperf3 UDP delivered, 64 KB datagrams = {ccp / udp[0]:.2f}")
    print(f"ccp-udp per-ACK / per-RTT goodput = {rows[4][1] / ccp:.2f}")
    print(f"ccp-udp (per-RTT, mss 8948) / kernel TCP = {rows[5][1] / tcp[0]:.2f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
