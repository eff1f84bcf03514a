#!/usr/bin/env python3
"""The ccp-sim benchmark's dumbbell, in ns-3 (PyPI `ns3`, cppyy bindings), for comparison.

Same scenario as `benches/sim.rs`: N senders (default 2), each behind a 1 Gbit/s, 1 ms access
link to switch `left`; a 100 Mbit/s, 8 ms bottleneck `left -> right` with a drop-tail queue of
one BDP (250 KB at a 20 ms base RTT); receivers behind 1 Gbit/s, 1 ms links. TCP NewReno with
SACK, 1448-byte segments (52-byte headers with timestamps), initial window 10, an ACK per
segment, minimum RTO 200 ms, large socket buffers; bulk senders from t = 0.

Prints one JSON object: wall seconds spent in Simulator::Run (not counting the bindings'
import), simulated seconds, and the mean goodput of every flow and in total (bits/s).

    python3 datapath/sim/bench/ns3_dumbbell.py --duration 30 --flows 2
"""

import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=30.0, help="simulated seconds")
    ap.add_argument("--flows", type=int, default=2)
    ap.add_argument("--rate", default="100Mbps", help="bottleneck rate")
    ap.add_argument("--buffer", default="250000B", help="bottleneck queue (1 BDP)")
    args = ap.parse_args()

    t_import = time.time()
    from ns import ns  # noqa: E402  (slow: cppyy compiles the headers)

    import_s = time.time() - t_import

    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.StringValue("ns3::TcpNewReno"))
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(1448))
    ns.Config.SetDefault("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(10))
    ns.Config.SetDefault("ns3::TcpSocket::DelAckCount", ns.UintegerValue(1))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(1 << 26))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(1 << 26))
    ns.Config.SetDefault("ns3::TcpSocketBase::Sack", ns.BooleanValue(True))
    ns.Config.SetDefault("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.MilliSeconds(200)))

    n = args.flows
    senders = ns.NodeContainer()
    senders.Create(n)
    receivers = ns.NodeContainer()
    receivers.Create(n)
    switches = ns.NodeContainer()
    switches.Create(2)
    left, right = switches.Get(0), switches.Get(1)

    stack = ns.InternetStackHelper()
    stack.Install(senders)
    stack.Install(receivers)
    stack.Install(switches)

    access = ns.PointToPointHelper()
    access.SetDeviceAttribute("DataRate", ns.StringValue("1Gbps"))
    access.SetChannelAttribute("Delay", ns.StringValue("1ms"))
    bottleneck = ns.PointToPointHelper()
    bottleneck.SetDeviceAttribute("DataRate", ns.StringValue(args.rate))
    bottleneck.SetChannelAttribute("Delay", ns.StringValue("8ms"))
    bottleneck.SetQueue("ns3::DropTailQueue", "MaxSize", ns.QueueSizeValue(ns.QueueSize(args.buffer)))

    addr = ns.Ipv4AddressHelper()
    tch = ns.TrafficControlHelper()
    sink_ifaces = []
    net = 1

    def link(helper, a, b):
        nonlocal net
        devs = helper.Install(a, b)
        addr.SetBase(ns.Ipv4Address(f"10.{net // 256}.{net % 256}.0"), ns.Ipv4Mask("255.255.255.0"))
        net += 1
        ifaces = addr.Assign(devs)
        # Address assignment installs a default queue disc (FqCoDel); remove it so that the
        # device's drop-tail queue is the only queue, as in ccp-sim.
        tch.Uninstall(devs)
        return ifaces

    for i in range(n):
        link(access, senders.Get(i), left)
    link(bottleneck, left, right)
    for i in range(n):
        sink_ifaces.append(link(access, receivers.Get(i), right))
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    port = 5001
    sinks = []
    for i in range(n):
        sink = ns.PacketSinkHelper(
            "ns3::TcpSocketFactory",
            ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo(),
        )
        apps = sink.Install(receivers.Get(i))
        apps.Start(ns.Seconds(0.0))
        sinks.append(apps.Get(0))
        bulk = ns.BulkSendHelper(
            "ns3::TcpSocketFactory",
            ns.InetSocketAddress(sink_ifaces[i].GetAddress(0), port).ConvertTo(),
        )
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
        bulk.SetAttribute("SendSize", ns.UintegerValue(1448 * 10))
        s = bulk.Install(senders.Get(i))
        s.Start(ns.Seconds(0.0))

    ns.Simulator.Stop(ns.Seconds(args.duration))
    t0 = time.time()
    ns.Simulator.Run()
    wall = time.time() - t0
    rx = [ns.DynamicCast[ns.PacketSink](s).GetTotalRx() for s in sinks]
    ns.Simulator.Destroy()
    out = {
        "simulator": "ns-3",
        "flows": n,
        "sim_seconds": args.duration,
        "wall_seconds": wall,
        "import_seconds": import_s,
        "goodput_bps": [8 * b / args.duration for b in rx],
        "total_goodput_bps": 8 * sum(rx) / args.duration,
    }
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
