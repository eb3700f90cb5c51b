"""Target guard: webhook deliveries never reach internal addresses by surprise.

An operator registers a URL; the server fetches it. So that an admin token
cannot turn the server into a probe of its own network, a delivery refuses
hosts that resolve to loopback, link-local (169.254.169.254 included),
private, multicast, reserved or unspecified addresses, unless private
targets are allowed. The host is resolved at delivery time and the request
goes to the approved address itself (Host header and TLS name kept), so DNS
cannot be re-pointed between the check and the connection.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

Resolver = Callable[[str, int], Awaitable[list[str]]]


class TargetRefused(Exception):
    """The delivery may not go to this URL; the message says why."""


def address_problem(address: str) -> str | None:
    """Why *address* is not a public target, or None when it is."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for name in ("loopback", "link_local", "multicast", "unspecified", "private", "reserved"):
        if getattr(ip, f"is_{name}"):
            return name.replace("_", "-")
    if not ip.is_global:
        return "non-global"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


@dataclass(frozen=True)
class Target:
    """Where to connect: the URL with the approved address, and the names to keep."""

    url: str
    host_header: str
    sni_hostname: str | None
    # The host's other approved addresses, tried in order if one refuses.
    alternates: tuple[str, ...] = ()

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.url, *self.alternates)


async def approve(url: str, *, allow_private: bool, allow_http: bool, resolver: Resolver = system_resolver) -> Target:
    """Resolve and check *url*; return the pinned target or raise TargetRefused."""
    try:
        parts = urlsplit(url)
        explicit_port = parts.port
    except ValueError as exc:  # a bad port or an unclosed IPv6 bracket
        raise TargetRefused(f"not a valid URL: {url}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetRefused(f"not an http(s) URL: {url}")
    if parts.scheme == "http" and not allow_http:
        raise TargetRefused("http:// endpoints are refused outside dev / unauthenticated mode; use https://")
    host = parts.hostname
    port = explicit_port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = [host] if _is_ip(host) else await resolver(host, port)
    except (OSError, UnicodeError) as exc:
        # getaddrinfo raises UnicodeError, not OSError, for a name IDNA cannot
        # encode (a label over 63 characters, say).
        raise TargetRefused(f"cannot resolve {host}: {exc}") from None
    if not addresses:
        raise TargetRefused(f"{host} resolves to no address")
    if not allow_private:
        for address in addresses:
            problem = address_problem(address)
            if problem is not None:
                raise TargetRefused(
                    f"{host} resolves to {address}, a {problem} address (private targets are not allowed)"
                )

    def pinned(address: str) -> str:
        netloc_host = f"[{address}]" if ":" in address else address
        netloc = f"{netloc_host}:{explicit_port}" if explicit_port else netloc_host
        return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))

    urls = [pinned(a) for a in addresses]
    return Target(
        url=urls[0],
        host_header=parts.netloc.rsplit("@", 1)[-1],
        sni_hostname=host if parts.scheme == "https" and not _is_ip(host) else None,
        alternates=tuple(urls[1:]),
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
