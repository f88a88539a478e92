#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A network with real round-trip latency for the benchmarks: two network namespaces joined by
a packet delay line.

The kernel here has no `netem` qdisc (CONFIG_NET_SCH_NETEM is off, and no delay-capable qdisc
such as fq or etf either), so latency is added one level down from an HTTP proxy: every IP
packet (SYN, data, ACK, FIN) that leaves one namespace is held for the one-way delay and then
handed to the other. Each namespace has a TUN device; this file's delay process holds both
devices' file descriptors and moves packets between them after `delay` seconds, in order. TCP
therefore sees a real RTT of 2 x delay (slow start, window growth, delayed ACKs, the handshake of
every new connection), and nothing parses or copies HTTP. The devices have Ethernet's 1500-byte
MTU, so TCP grows its window in 1448-byte segments as on a real link, but with segmentation
offload on (IFF_VNET_HDR, TUNSETOFFLOAD) the kernel hands the loop up to 64 KiB per read: a
256 MiB transfer is ~10,000 reads, far below what the loop can move (measured here: one curl
over it, no delay, ~1.2 GB/s; at 10 ms RTT ~0.8 GB/s).

    with DelayedNet(rtt_ms=10) as net:           # namespaces tfsbench-<pid>-{c,s}
        server = subprocess.Popen(net.server_cmd(["s3rver", "-a", net.server_ip, ...]))
        client = subprocess.run(net.client_cmd(["curl", f"http://{net.server_ip}:PORT/"]))

A per-connection cap (set_conn_rate, off by default) models what real S3 does and a loopback
server does not: one request, on one connection, gets tens of MB/s however fast the link is, so
a client reaches the link's speed only with many connections. Each TCP flow from server to client
then also waits for its own share: a packet of L bytes leaves L / rate after the flow's previous
one (other flows pass it; nothing is dropped, so TCP sees the cap as a slower path, not loss).

Addresses: a /30 (10.213.0.1 client, 10.213.0.2 server) that exists only on the two TUN devices
inside the two namespaces this process creates; nothing is routed anywhere else (neither
namespace has any other interface than its own `lo` and its TUN device). Commands enter a
namespace with `nsenter --net` (network namespace only, unlike `ip netns exec`, which also
unshares the mount namespace): a FUSE mount started in the client namespace is therefore
visible to, and readable by, processes in the root namespace.

close() (also on exit from the `with`, and from the bench's signal handlers) stops the delay
process, which destroys the TUN devices, then deletes the namespaces. Processes started inside a
namespace must be stopped by the caller first.

Run as a script it is the delay process itself (started by DelayedNet; not for direct use):
    netdelay.py --ns-a NS --dev-a DEV --ns-b NS --dev-b DEV --delay-ms D [--rate-mbps R]
It prints "ready" once both devices exist, reads "delay MS" lines on stdin to change the delay
(0 for setup work; answers "ok"), "rate MBPS" lines to cap each TCP connection from server to
client (0: no cap; answers "ok") and "stats" lines (answers its counters as JSON), writes its
counters as JSON on SIGTERM / stdin EOF and exits."""

import argparse
import ctypes
import fcntl
import heapq
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time

TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
IFF_VNET_HDR = 0x4000
TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6 = 0x01, 0x02, 0x04
CLONE_NEWNET = 0x40000000
MTU = 1500          # what TCP sees: MSS 1448, slow start in 1448-byte segments as on Ethernet
VHDR = 10  # struct virtio_net_hdr in front of every packet
READ_MAX = 65536 + 64  # one segmentation-offload packet (up to 64 KiB) plus its virtio header
CLIENT_IP, SERVER_IP, PREFIX = "10.213.0.1", "10.213.0.2", 30


def _die_with_parent():
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _sh(*argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip() or r.returncode}")
    return r.stdout


def remove_stale(prefix="tfsbench-"):
    """Delete namespaces <prefix><pid>-c/-s left by a run that was killed (SIGKILL leaves no
    chance to clean up) whose process is gone. Returns the names removed."""
    gone = []
    for ln in subprocess.run(["ip", "netns", "list"], capture_output=True,
                             text=True).stdout.splitlines():
        name = ln.split()[0] if ln.strip() else ""
        rest = name[len(prefix):] if name.startswith(prefix) else ""
        pid, _, side = rest.partition("-")
        if pid.isdigit() and side in ("c", "s") and not os.path.exists(f"/proc/{pid}"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            gone.append(name)
    return gone


class DelayedNet:
    """Client and server namespaces joined by a delay line of rtt_ms/2 each way."""

    def __init__(self, rtt_ms=10.0, tag=None):
        tag = tag or f"tfsbench-{os.getpid()}"
        self.ns_c, self.ns_s = f"{tag}-c", f"{tag}-s"
        self.dev_c, self.dev_s = "tfsd-c", "tfsd-s"
        self.client_ip, self.server_ip = CLIENT_IP, SERVER_IP
        self.rtt_ms = float(rtt_ms)
        self.proc = None
        self.counters = {}
        self._made = []
        try:
            for ns in (self.ns_c, self.ns_s):
                _sh("ip", "netns", "add", ns)
                self._made.append(ns)
                _sh("ip", "-n", ns, "link", "set", "lo", "up")
            self.proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--ns-a", self.ns_c, "--dev-a",
                 self.dev_c, "--ns-b", self.ns_s, "--dev-b", self.dev_s, "--delay-ms",
                 str(self.rtt_ms / 2)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                preexec_fn=_die_with_parent)
            line = self.proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"delay line did not start: {line!r}")
            for ns, dev, ip in ((self.ns_c, self.dev_c, self.client_ip),
                                (self.ns_s, self.dev_s, self.server_ip)):
                _sh("ip", "-n", ns, "link", "set", dev, "mtu", str(MTU), "txqueuelen", "10000",
                    "up")
                _sh("ip", "-n", ns, "addr", "add", f"{ip}/{PREFIX}", "dev", dev)
            # TCP buffers large enough for the bandwidth-delay product of a fast link at this RTT
            # (the defaults cap one connection at ~4 MiB in flight).
            for ns in (self.ns_c, self.ns_s):
                _sh("ip", "netns", "exec", ns, "sysctl", "-q",
                    "net.ipv4.tcp_rmem=4096 131072 33554432",
                    "net.ipv4.tcp_wmem=4096 65536 33554432")
        except BaseException:
            self.close()
            raise

    def server_cmd(self, argv):
        return ["nsenter", f"--net=/run/netns/{self.ns_s}", "--"] + list(argv)

    def client_cmd(self, argv):
        return ["nsenter", f"--net=/run/netns/{self.ns_c}", "--"] + list(argv)

    def set_rtt(self, rtt_ms):
        """Change the delay (0: no added latency, for setup work). Packets already queued keep
        their order."""
        self.proc.stdin.write(f"delay {float(rtt_ms) / 2}\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise RuntimeError("delay line did not acknowledge the new delay")

    def set_conn_rate(self, mbps):
        """Cap every TCP connection's server-to-client direction at `mbps` MB/s (0: no cap), as
        S3 caps what one request delivers: a client gets more only with more connections."""
        self.proc.stdin.write(f"rate {float(mbps)}\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise RuntimeError("delay line did not acknowledge the new rate")

    def stats(self):
        """The loop's counters now: packets and bytes moved (bytes_a_to_b: client to server,
        bytes_b_to_a: server to client, IP packets with a 10-byte virtio header each;
        tcp_connects: SYNs without ACK, i.e. TCP connections opened, in either direction)."""
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def measured_rtt_ms(self, port, count=5):
        """TCP connect time from the client namespace to server_ip:port (one SYN / SYN-ACK
        round trip), median of `count`, in ms: the RTT as TCP sees it."""
        prog = ("import socket,sys,time\n"
                "t=[]\n"
                f"for _ in range({int(count)}):\n"
                "    s=socket.socket(); a=time.perf_counter()\n"
                f"    s.connect(({self.server_ip!r},{int(port)}))\n"
                "    t.append(time.perf_counter()-a)\n"
                "    s.close()\n"
                "t.sort(); print(t[len(t)//2]*1e3)\n")
        return float(_sh(*self.client_cmd([sys.executable, "-c", prog])).strip())

    def close(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    self.proc.stdin.close()  # EOF: the loop writes its counters and exits
                except OSError:
                    pass
                try:
                    out = self.proc.stdout.read()
                    self.proc.wait(timeout=5)
                    self.counters = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
                except (subprocess.TimeoutExpired, ValueError, IndexError, OSError):
                    self.proc.kill()
                    self.proc.wait(timeout=5)
            self.proc = None
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._made = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# The delay process ------------------------------------------------------------------------------

def _open_tun_in(ns, name):
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(there, CLONE_NEWNET):
            raise OSError(ctypes.get_errno(), f"setns {ns}")
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(),
                                               IFF_TUN | IFF_NO_PI | IFF_VNET_HDR))
        # Segmentation and checksum offload: TCP hands the device 64 KiB super-packets (GSO)
        # cut into MTU-sized segments only on paper, each read carrying a virtio_net_hdr that
        # the peer device takes as is; the loop moves ~45x fewer packets than at 1500 bytes.
        fcntl.ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)
    finally:
        if libc.setns(home, CLONE_NEWNET):
            raise OSError(ctypes.get_errno(), "setns back")
        os.close(home)
        os.close(there)
    return fd


def _tcp_flow(pkt):
    """(source port, destination port) of an IPv4 TCP packet after its virtio header, or None;
    and whether it is a SYN without ACK (a new connection)."""
    if len(pkt) < VHDR + 40 or pkt[VHDR] >> 4 != 4 or pkt[VHDR + 9] != 6:
        return None, False
    t = VHDR + (pkt[VHDR] & 15) * 4
    return (pkt[t] << 8 | pkt[t + 1], pkt[t + 2] << 8 | pkt[t + 3]), pkt[t + 13] & 0x12 == 0x02


def _loop(fd_a, fd_b, delay_s, rate_bps=0.0):
    # One queue per direction, ordered by due time (a heap; seq keeps arrival order among equal
    # times). Without a rate, due times never decrease within a direction (a new delay applies
    # to packets read from now on, without overtaking queued ones). With a rate, each TCP flow
    # from b to a (server to client) also waits for its own share of the link: a packet of L
    # bytes leaves no earlier than L / rate after the flow's previous one, so one connection
    # cannot carry more than `rate` bytes a second, while other connections pass it.
    q = {fd_a: [], fd_b: []}
    peer = {fd_a: fd_b, fd_b: fd_a}
    last_due = {fd_a: 0.0, fd_b: 0.0}
    flow_free = {}  # (sport, dport) -> time the flow's next packet may leave
    seq = 0
    n = {"packets": 0, "bytes": 0, "dropped": 0, "max_queued": 0,
         "bytes_a_to_b": 0, "bytes_b_to_a": 0, "tcp_connects": 0}
    dir_key = {fd_a: "bytes_a_to_b", fd_b: "bytes_b_to_a"}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    ctl = sys.stdin.fileno()
    ctl_buf = b""
    rd = [fd_a, fd_b, ctl]
    mono = time.monotonic
    while not stop:
        now = mono()
        for src, heap in q.items():
            out = peer[src]
            while heap and heap[0][0] <= now:
                pkt = heapq.heappop(heap)[2]
                try:
                    os.write(out, pkt)
                    n["packets"] += 1
                    n["bytes"] += len(pkt)
                    n[dir_key[src]] += len(pkt)
                except OSError:
                    n["dropped"] += 1
        due = [h[0][0] for h in q.values() if h]
        timeout = max(0.0, min(due) - mono()) if due else None
        try:
            ready, _, _ = select.select(rd, [], [], timeout)
        except InterruptedError:
            continue
        now = mono()
        for fd in ready:
            if fd == ctl:
                chunk = os.read(ctl, 4096)
                if not chunk:
                    stop.append(1)
                    break
                ctl_buf += chunk
                while b"\n" in ctl_buf:
                    ln, ctl_buf = ctl_buf.split(b"\n", 1)
                    parts = ln.split()
                    if len(parts) == 2 and parts[0] == b"delay":
                        delay_s = float(parts[1]) / 1000.0
                        print("ok", flush=True)
                    elif len(parts) == 2 and parts[0] == b"rate":
                        rate_bps = float(parts[1]) * 1e6
                        flow_free.clear()
                        print("ok", flush=True)
                    elif parts == [b"stats"]:
                        print(json.dumps(n), flush=True)
                continue
            heap = q[fd]
            for _ in range(256):  # drain what is there, then serve the other side
                try:
                    pkt = os.read(fd, READ_MAX)
                except BlockingIOError:
                    break
                flow, syn = _tcp_flow(pkt)
                if syn:
                    n["tcp_connects"] += 1
                if rate_bps and fd == fd_b and flow:
                    d = max(now + delay_s, flow_free.get(flow, 0.0))
                    flow_free[flow] = d + (len(pkt) - VHDR) / rate_bps
                else:
                    d = last_due[fd] = max(now + delay_s, last_due[fd])
                heapq.heappush(heap, (d, seq, pkt))
                seq += 1
            if len(heap) > n["max_queued"]:
                n["max_queued"] = len(heap)
    try:
        print(json.dumps(n), flush=True)
    except BrokenPipeError:  # the parent is gone (killed); nobody to tell
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ns-a", required=True)
    ap.add_argument("--dev-a", required=True)
    ap.add_argument("--ns-b", required=True)
    ap.add_argument("--dev-b", required=True)
    ap.add_argument("--delay-ms", type=float, required=True, help="one-way delay")
    ap.add_argument("--rate-mbps", type=float, default=0.0, help="cap of each TCP connection "
                    "from b to a, in MB/s (0: none)")
    a = ap.parse_args()
    fd_a = _open_tun_in(a.ns_a, a.dev_a)
    fd_b = _open_tun_in(a.ns_b, a.dev_b)
    print("ready", flush=True)
    _loop(fd_a, fd_b, a.delay_ms / 1000.0, a.rate_mbps * 1e6)


if __name__ == "__main__":
    main()
