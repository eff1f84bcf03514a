#!/usr/bin/env bash
# The quickstart behind `make run`: a ccp-agent, a ccp-udp receiver and two ccp-udp senders on
# loopback, one flow asking the agent for reno and one for cubic, sharing loopback for 3 s each
# (DURATION=10s to change). Prints each flow's summary; everything it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release
duration=${DURATION:-3s}
work=$(mktemp -d /tmp/ccp-quickstart.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

"$bin/ccp-agent" --socket "$work/agent.sock" --log-level warn 2>"$work/agent.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$work/agent.sock" ] && break; sleep 0.05; done
[ -S "$work/agent.sock" ] || { cat "$work/agent.log"; echo "ccp-agent did not start" >&2; exit 1; }

"$bin/ccp-udp" recv --listen 127.0.0.1:0 --flows 2 --json "$work/recv.json" >"$work/recv.out" 2>"$work/recv.err" &
recv=$!
pids+=($recv)
for _ in $(seq 100); do grep -q "listening on" "$work/recv.err" 2>/dev/null && break; sleep 0.05; done
addr=$(sed -n 's/^listening on //p' "$work/recv.err" | head -1)
[ -n "$addr" ] || { cat "$work/recv.err"; echo "receiver did not start" >&2; exit 1; }

echo "ccp-agent at $work/agent.sock, receiver at $addr; two $duration flows: reno and cubic"
"$bin/ccp-udp" send --to "$addr" --time "$duration" --alg reno --agent "$work/agent.sock" \
  --socket "$work/reno.sock" --log-level warn >"$work/reno.out" &
s1=$!
"$bin/ccp-udp" send --to "$addr" --time "$duration" --alg cubic --agent "$work/agent.sock" \
  --socket "$work/cubic.sock" --log-level warn >"$work/cubic.out" &
s2=$!
wait "$s1" "$s2"
wait "$recv" || true
echo "--- senders"
cat "$work/reno.out" "$work/cubic.out"
echo "--- receiver"
cat "$work/recv.out"
