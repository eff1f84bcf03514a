// SPDX-License-Identifier: GPL-2.0
//
// ccp_bpf: a TCP congestion control (struct_ops tcp_congestion_ops) whose decisions come from
// ccp-agent through the userspace daemon `ccp-bpf daemon`.
//
// On every ACK `cong_control` streams one sample (the kernel's rate_sample plus the socket's
// gauges) into the ring buffer `samples`, and applies the window and pacing rate the daemon last
// wrote into `ctl` for this socket. When the daemon's entry is missing or older than
// `fallback_ns` (the daemon is gone or stuck), the socket runs Reno here instead, from its
// current window; it returns to the daemon's values as soon as fresh ones appear.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

char _license[] SEC("license") = "GPL";

#define TCP_CA_Open 0
#define TCP_CA_Recovery 3
#define TCP_CA_Loss 4
#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define SK_PACING_NEEDED 1
#define USEC_PER_SEC 1000000ULL

// Sample kinds.
#define KIND_ACK 0
#define KIND_RELEASE 2

// Sample flags.
#define F_APP_LIMITED 1
#define F_FALLBACK 2
#define F_RECOVERY 4 // TCP_CA_Recovery (fast retransmit)
#define F_LOSS 8     // TCP_CA_Loss (retransmission timeout)

// Counter indices (per-CPU array `counters`).
#define C_SAMPLES 0
#define C_DROPPED 1
#define C_APPLIED 2
#define C_FALLBACK 3
#define C_SOCKETS 4
#define C_RELEASED 5
#define N_COUNTERS 8

// How long a daemon entry stays valid, ns (set by the loader before load).
const volatile __u64 fallback_ns = 100000000ULL;

// One ACK of one socket; the daemon's `Sample` has the same layout.
struct ccp_sample {
	__u64 ts_ns;
	__u32 id;
	__u32 kind;
	__u32 saddr; // host order
	__u32 daddr; // host order
	__u16 sport; // host order
	__u16 dport; // host order
	__u32 mss;
	__u32 snd_cwnd;	     // packets
	__u32 acked_sacked;  // packets newly acked or sacked by this ACK
	__u32 sacked_out;    // packets currently sacked
	__s32 delivered;     // packets delivered over the rate sample's interval
	__s32 delivered_ce;  // of them, ECN-CE marked
	__u32 snd_interval_us;
	__u32 rcv_interval_us;
	__u32 pad0;
	__s64 interval_us;
	__s64 rtt_us;	     // -1: no sample
	__s32 losses;	     // packets newly marked lost
	__u32 in_flight;     // packets in flight after this ACK
	__u32 bytes_pending; // write_seq - snd_una
	__u32 flags;
	__u64 bytes_acked;   // cumulative (tcp_sock.bytes_acked)
	__u64 pacing_rate;   // bytes/s
};

// What the daemon wants for one socket.
struct ccp_ctl {
	__u32 cwnd_bytes; // 0: keep the window
	__u32 pad;
	__u64 rate;	  // bytes/s; 0: no pacing of ours
	__u64 updated_ns; // CLOCK_MONOTONIC of the write
};

// Per-socket state in icsk_ca_priv (at most 104 bytes).
struct ccp_priv {
	__u32 id;
	__u32 cwnd_cnt; // Reno additive increase, acked packets
	__u8 ca_state;
	__u8 in_fallback;
	__u8 pacing;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct ccp_ctl);
} ctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, N_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

__u32 next_id = 0;

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);
	if (c)
		*c += 1;
}

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct ccp_priv *priv(const struct sock *sk)
{
	return (struct ccp_priv *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline __u32 in_flight(const struct tcp_sock *tp)
{
	__u32 left = tp->sacked_out + tp->lost_out;
	__u32 out = tp->packets_out;
	return (out > left ? out - left : 0) + tp->retrans_out;
}

static __always_inline void fill_ids(struct ccp_sample *s, const struct sock *sk)
{
	s->saddr = bpf_ntohl(sk->__sk_common.skc_rcv_saddr);
	s->daddr = bpf_ntohl(sk->__sk_common.skc_daddr);
	s->sport = sk->__sk_common.skc_num;
	s->dport = bpf_ntohs(sk->__sk_common.skc_dport);
}

SEC("struct_ops")
void BPF_PROG(ccp_init, struct sock *sk)
{
	struct ccp_priv *p = priv(sk);

	p->id = __sync_fetch_and_add(&next_id, 1) + 1;
	p->cwnd_cnt = 0;
	p->ca_state = TCP_CA_Open;
	p->in_fallback = 1;
	p->pacing = 0;
	count(C_SOCKETS);
}

SEC("struct_ops")
void BPF_PROG(ccp_release, struct sock *sk)
{
	struct ccp_priv *p = priv(sk);
	struct ccp_sample *s;
	__u32 id = p->id;

	bpf_map_delete_elem(&ctl, &id);
	count(C_RELEASED);
	s = bpf_ringbuf_reserve(&samples, sizeof(*s), 0);
	if (!s) {
		count(C_DROPPED);
		return;
	}
	__builtin_memset(s, 0, sizeof(*s));
	s->ts_ns = bpf_ktime_get_ns();
	s->id = id;
	s->kind = KIND_RELEASE;
	fill_ids(s, sk);
	bpf_ringbuf_submit(s, 0);
}

SEC("struct_ops")
__u32 BPF_PROG(ccp_ssthresh, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	__u32 half = tp->snd_cwnd >> 1;

	return half > 2 ? half : 2;
}

SEC("struct_ops")
__u32 BPF_PROG(ccp_undo_cwnd, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	__u32 twice = tp->snd_ssthresh << 1;

	return tp->snd_cwnd > twice ? tp->snd_cwnd : twice;
}

SEC("struct_ops")
void BPF_PROG(ccp_set_state, struct sock *sk, __u8 new_state)
{
	priv(sk)->ca_state = new_state;
}

// Reno on this ACK (the fallback): slow start below ssthresh, one packet per window above it,
// and the window held at ssthresh while recovering.
static __always_inline void reno(struct sock *sk, struct ccp_priv *p, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cwnd = tp->snd_cwnd;

	if (p->ca_state >= TCP_CA_Recovery) {
		if (cwnd > tp->snd_ssthresh && tp->snd_ssthresh > 0)
			cwnd = tp->snd_ssthresh;
	} else if (cwnd < tp->snd_ssthresh) {
		cwnd += acked;
		if (cwnd > tp->snd_ssthresh)
			cwnd = tp->snd_ssthresh;
	} else {
		p->cwnd_cnt += acked;
		if (p->cwnd_cnt >= cwnd) {
			p->cwnd_cnt -= cwnd;
			cwnd += 1;
		}
	}
	if (cwnd < 2)
		cwnd = 2;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = cwnd;
}

// The kernel's own pacing rate for a window-based flow (tcp_update_pacing_rate): 200% of
// cwnd/srtt in slow start, 120% after.
static __always_inline void window_pacing(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	__u64 rate = (__u64)tp->mss_cache * ((USEC_PER_SEC / 100) << 3);
	__u32 srtt = tp->srtt_us;

	rate *= tp->snd_cwnd < tp->snd_ssthresh / 2 ? 200 : 120;
	rate *= tp->snd_cwnd > tp->packets_out ? tp->snd_cwnd : tp->packets_out;
	if (srtt)
		rate /= srtt;
	if (rate > sk->sk_max_pacing_rate)
		rate = sk->sk_max_pacing_rate;
	sk->sk_pacing_rate = rate;
}

SEC("struct_ops")
void BPF_PROG(ccp_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	struct ccp_sample *s;
	struct ccp_ctl *c;
	__u64 now = bpf_ktime_get_ns();
	__u32 id = p->id;
	__u32 acked = rs->acked_sacked;

	c = bpf_map_lookup_elem(&ctl, &id);
	if (c && c->updated_ns + fallback_ns >= now) {
		__u32 mss = tp->mss_cache ? tp->mss_cache : 1;
		if (c->cwnd_bytes) {
			__u32 cwnd = c->cwnd_bytes / mss;
			if (cwnd < 2)
				cwnd = 2;
			if (cwnd > tp->snd_cwnd_clamp)
				cwnd = tp->snd_cwnd_clamp;
			tp->snd_cwnd = cwnd;
		}
		if (c->rate) {
			if (!p->pacing) {
				sk->sk_pacing_status = SK_PACING_NEEDED;
				p->pacing = 1;
			}
			sk->sk_pacing_rate = c->rate < sk->sk_max_pacing_rate ? c->rate : sk->sk_max_pacing_rate;
		} else {
			window_pacing(sk);
		}
		p->in_fallback = 0;
		p->cwnd_cnt = 0;
		count(C_APPLIED);
	} else {
		reno(sk, p, acked);
		window_pacing(sk);
		p->in_fallback = 1;
		count(C_FALLBACK);
	}

	s = bpf_ringbuf_reserve(&samples, sizeof(*s), 0);
	if (!s) {
		count(C_DROPPED);
		return;
	}
	s->ts_ns = now;
	s->id = id;
	s->kind = KIND_ACK;
	s->pad0 = 0;
	fill_ids(s, sk);
	s->mss = tp->mss_cache;
	s->snd_cwnd = tp->snd_cwnd;
	s->acked_sacked = acked;
	s->sacked_out = tp->sacked_out;
	s->delivered = rs->delivered;
	s->delivered_ce = rs->delivered_ce;
	s->snd_interval_us = rs->snd_interval_us;
	s->rcv_interval_us = rs->rcv_interval_us;
	s->interval_us = rs->interval_us;
	s->rtt_us = rs->rtt_us;
	s->losses = rs->losses;
	s->in_flight = in_flight(tp);
	s->bytes_pending = tp->write_seq - tp->snd_una;
	s->flags = (rs->is_app_limited ? F_APP_LIMITED : 0) | (p->in_fallback ? F_FALLBACK : 0) |
		   (p->ca_state == TCP_CA_Recovery ? F_RECOVERY : 0) |
		   (p->ca_state == TCP_CA_Loss ? F_LOSS : 0);
	s->bytes_acked = tp->bytes_acked;
	s->pacing_rate = sk->sk_pacing_rate;
	bpf_ringbuf_submit(s, 0);
	count(C_SAMPLES);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ccp_bpf = {
	.init = (void *)ccp_init,
	.release = (void *)ccp_release,
	.ssthresh = (void *)ccp_ssthresh,
	.undo_cwnd = (void *)ccp_undo_cwnd,
	.set_state = (void *)ccp_set_state,
	.cong_control = (void *)ccp_cong_control,
	.name = "ccp_bpf",
};
