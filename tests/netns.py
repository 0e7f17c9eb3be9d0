"""Network namespaces for tests: a private LAN of hosts joined by veth pairs to one bridge, so load generators, the
master and the server talk over real (virtual) links that a test can cut or slow down.

Layout made by :class:`Lan` (every name carries the test process's pid, so concurrent sessions never collide)::

    namespace <prefix>-sw          bridge "br0", and the switch end of every host's veth pair
    namespace <prefix>-<host>      veth "eth0" at 10.213.0.<n>/24 (n = 1, 2, ... in the order given), and lo

Addresses are private to the namespaces (nothing is routed to or from the machine's own network, which never sees
them), so the same 10.213.0.0/24 serves every session. :meth:`Lan.close` (also the context manager's exit) kills
any process still running in those namespaces and deletes them, which deletes their links; it runs even when the
test failed; namespaces left by a session that was killed are removed by the next (:func:`remove_stale`).

Needs root and ``ip`` (iproute2); :func:`missing` says in one line what is missing where they cannot be made.
The kernel may lack ``netem`` (a Firecracker VM's does): :mod:`tests.delay_relay` then adds latency in user space.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from types import TracebackType

__all__ = ["SUBNET", "Lan", "missing", "remove_stale"]

#: The LAN's /24 (host n is ``SUBNET.n``); private to the namespaces.
SUBNET = "10.213.0"
_SETHOST = "import os, socket, sys; socket.sethostname(sys.argv[1]); os.execvp(sys.argv[2], sys.argv[2:])"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS``; raises RuntimeError with ip's stderr when it fails and ``check``."""
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if check and res.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {res.stderr.strip() or res.returncode}")
    return res


def missing() -> str | None:
    """One line naming what stops this machine from making network namespaces (not root, no ``ip``, the kernel
    refuses a namespace or a veth pair), or None when :class:`Lan` can be built."""
    if os.geteuid() != 0:
        return f"network namespaces need root (this process runs as uid {os.geteuid()})"
    if shutil.which("ip") is None:
        return "network namespaces need the `ip` command (iproute2), not found on PATH"
    name = f"llmload-probe-{os.getpid()}"
    try:
        made = _ip("netns", "add", name, check=False)
        if made.returncode != 0:
            return f"`ip netns add` failed: {made.stderr.strip()}"
        veth = _ip("-n", name, "link", "add", "a0", "type", "veth", "peer", "name", "b0", check=False)
        if veth.returncode != 0:
            return f"`ip link add ... type veth` failed: {veth.stderr.strip()}"
    finally:
        _ip("netns", "del", name, check=False)
    return None


def remove_stale() -> list[str]:
    """Delete the namespaces a killed test session left (``llmload-<pid>-...`` of a pid no longer running), killing
    what still runs in them; returns their names. A session's own clean-up cannot run when it is SIGKILLed."""
    gone: list[str] = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(r"llmload-(\d+)-\w+", name)
        if m is None or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        for pid in _ip("netns", "pids", name, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        _ip("netns", "del", name, check=False)
        gone.append(name)
    return gone


class Lan:
    """Hosts on one bridged /24, each in its own network namespace.

    ``hosts``: host names in address order (``hosts[0]`` is ``SUBNET.1``). Raises RuntimeError (with ip's message)
    when a namespace or link cannot be made; what was made is deleted first.
    """

    def __init__(self, hosts: list[str], prefix: str | None = None) -> None:
        self.prefix = prefix or f"llmload-{os.getpid()}"
        remove_stale()
        self.hosts = list(hosts)
        self._made: list[str] = []
        #: Hosts whose link :meth:`cut` took down.
        self.down: set[str] = set()
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- names and addresses ------------------------------------------------------------------------------
    def ns(self, host: str) -> str:
        """The namespace name of ``host`` (``sw`` is the switch's)."""
        return f"{self.prefix}-{host}"

    def addr(self, host: str) -> str:
        """The IPv4 address of ``host`` on the LAN."""
        return f"{SUBNET}.{self.hosts.index(host) + 1}"

    def _switch_port(self, host: str) -> str:
        return f"p{self.hosts.index(host) + 1}"  # inside the switch namespace: short and unique

    def _build(self) -> None:
        sw = self.ns("sw")
        _ip("netns", "add", sw)
        self._made.append(sw)
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "link", "set", "br0", "up")
        for host in self.hosts:
            ns, port = self.ns(host), self._switch_port(host)
            _ip("netns", "add", ns)
            self._made.append(ns)
            _ip("-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", sw, "link", "set", port, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.addr(host)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    # -- running things -----------------------------------------------------------------------------------
    def argv(self, host: str, cmd: list[str], hostname: str | None = None) -> list[str]:
        """``cmd`` run in ``host``'s namespace (``ip netns exec``); with ``hostname``, also in a UTS namespace of
        its own with that host name (Locust puts the host name in a worker's client id)."""
        if hostname is not None:
            cmd = ["unshare", "--uts", sys.executable, "-c", _SETHOST, hostname, *cmd]
        return ["ip", "netns", "exec", self.ns(host), *cmd]

    def run(self, host: str, cmd: list[str], timeout: float = 30) -> str:
        """Run ``cmd`` in ``host``'s namespace and return its stdout; RuntimeError with its stderr if it fails."""
        res = subprocess.run(self.argv(host, cmd), capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise RuntimeError(f"{cmd} in {host}: exit {res.returncode}: {res.stderr.strip()[-2000:]}")
        return res.stdout

    def http_get(self, host: str, url: str, timeout: float = 10) -> str:
        """GET ``url`` from ``host``'s namespace; the body as text (RuntimeError on any failure)."""
        code = ("import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], "
                f"timeout={timeout!r}).read().decode())")
        return self.run(host, [sys.executable, "-c", code, url], timeout=timeout + 10)

    # -- faults ---------------------------------------------------------------------------------------------
    def cut(self, host: str) -> None:
        """Take ``host``'s link down in its namespace (``ip link set eth0 down``): nothing in or out from now."""
        _ip("-n", self.ns(host), "link", "set", "eth0", "down")
        self.down.add(host)

    def restore(self, host: str) -> None:
        """Bring ``host``'s link back up after :meth:`cut` (its connected route to the LAN comes back with it)."""
        _ip("-n", self.ns(host), "link", "set", "eth0", "up")
        self.down.discard(host)

    def add_local_address(self, host: str, address: str) -> None:
        """Give ``host``'s loopback the extra address ``address``/32 (a local relay can then stand in for a remote
        host of that address: the host's own connections to it stay local). The host then answers ARP only for
        the addresses of the link asked on (``arp_ignore=1``, ``arp_announce=2``): by default Linux answers for any
        of its addresses, which would draw the other hosts' traffic for ``address`` to this one."""
        for key, value in (("arp_ignore", "1"), ("arp_announce", "2")):
            for dev in ("all", "eth0"):
                self.run(host, ["sh", "-c", f"echo {value} > /proc/sys/net/ipv4/conf/{dev}/{key}"])
        _ip("-n", self.ns(host), "addr", "add", f"{address}/32", "dev", "lo")

    def add_alias(self, host: str, address: str) -> None:
        """Give ``host``'s LAN link the extra address ``address``/24."""
        _ip("-n", self.ns(host), "addr", "add", f"{address}/24", "dev", "eth0")

    # -- clean-up ---------------------------------------------------------------------------------------------
    def pids(self) -> list[int]:
        """Processes still running in this LAN's namespaces."""
        out: list[int] = []
        for ns in self._made:
            res = _ip("netns", "pids", ns, check=False)
            out += [int(p) for p in res.stdout.split() if p.isdigit()]
        return out

    def close(self) -> None:
        """Kill (SIGKILL) what still runs in the namespaces, then delete them and so their links. Idempotent."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for ns in reversed(self._made):
            _ip("netns", "del", ns, check=False)
        self._made = []

    def __enter__(self) -> Lan:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
