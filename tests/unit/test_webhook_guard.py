"""Target guard: which webhook endpoints a delivery may reach, and how it is pinned.

Every test resolves names with a stub (an async function returning fixed
addresses), so nothing is looked up and nothing is sent anywhere.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest

from conveyor.webhooks.guard import Target, TargetRefused, address_problem, approve

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


def stub(*addresses: str, calls: list[tuple[str, int]] | None = None) -> Callable[[str, int], Awaitable[list[str]]]:
    """A resolver that answers every name with *addresses* (and records the question)."""

    async def resolve(host: str, port: int) -> list[str]:
        if calls is not None:
            calls.append((host, port))
        return list(addresses)

    return resolve


def failing(exc: BaseException) -> Callable[[str, int], Awaitable[list[str]]]:
    async def resolve(host: str, port: int) -> list[str]:
        raise exc

    return resolve


def run_approve(url: str, resolver=None, *, allow_private: bool = False, allow_http: bool = False) -> Target:
    resolver = resolver or stub(PUBLIC_V4)
    return asyncio.run(approve(url, allow_private=allow_private, allow_http=allow_http, resolver=resolver))


# -- address_problem -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("169.254.0.1", "link-local"),
        ("fe80::1", "link-local"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
    ],
)
def test_address_problem_names_each_internal_range(address, problem):
    assert address_problem(address) == problem


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
    ],
)
def test_an_ipv4_mapped_ipv6_address_is_judged_by_its_ipv4_address(address, problem):
    assert address_problem(address) == problem


def test_shared_address_space_is_not_a_public_target():
    # 100.64.0.0/10 (carrier-grade NAT) is neither private nor global.
    assert address_problem("100.64.0.1") is not None


@pytest.mark.parametrize("address", [PUBLIC_V4, "8.8.8.8", PUBLIC_V6, "::ffff:93.184.216.34"])
def test_public_addresses_have_no_problem(address):
    assert address_problem(address) is None


# -- approve: refusals -------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "[::1]",
        "169.254.169.254",
        "[fe80::1]",
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "[fc00::1]",
        "224.0.0.1",
        "[ff02::1]",
        "0.0.0.0",
        "[::]",
        "[::ffff:10.0.0.1]",
    ],
)
def test_a_url_with_an_internal_ip_literal_is_refused_without_resolving(host):
    calls: list[tuple[str, int]] = []

    with pytest.raises(TargetRefused, match="private targets are not allowed"):
        run_approve(f"https://{host}/hook", stub(PUBLIC_V4, calls=calls))

    assert calls == []


def test_a_hostname_resolving_to_loopback_is_refused():
    with pytest.raises(TargetRefused, match=r"hooks\.example\.com resolves to 127\.0\.0\.1, a loopback address"):
        run_approve("https://hooks.example.com/tasks", stub("127.0.0.1"))


def test_a_hostname_resolving_to_the_metadata_address_is_refused():
    with pytest.raises(TargetRefused, match=r"169\.254\.169\.254, a link-local address"):
        run_approve("https://metadata.example.com/", stub("169.254.169.254"))


@pytest.mark.parametrize("private", ["10.0.0.1", "::1", "fd00::5"])
def test_a_hostname_with_one_private_address_among_public_ones_is_refused(private):
    with pytest.raises(TargetRefused, match=f"resolves to {private}"):
        run_approve("https://hooks.example.com/", stub(PUBLIC_V4, private, PUBLIC_V6))


def test_http_is_refused_unless_allowed():
    with pytest.raises(TargetRefused, match="http:// endpoints are refused"):
        run_approve("http://hooks.example.com/tasks")


@pytest.mark.parametrize(
    "url", ["ftp://hooks.example.com/", "file:///etc/passwd", "hooks.example.com/tasks", "https:///x"]
)
def test_a_url_that_is_not_absolute_http_is_refused(url):
    with pytest.raises(TargetRefused, match="not an http"):
        run_approve(url, allow_http=True)


def test_a_name_that_does_not_resolve_is_refused():
    with pytest.raises(TargetRefused, match=r"cannot resolve hooks\.example\.com"):
        run_approve("https://hooks.example.com/", failing(socket.gaierror(-2, "Name or service not known")))


def test_a_name_the_resolver_cannot_even_encode_is_refused():
    # getaddrinfo raises UnicodeError (not OSError) for an IDNA label over 63 characters.
    host = "a" * 64 + ".example.com"
    error = UnicodeEncodeError("idna", host, 0, 64, "label too long")

    with pytest.raises(TargetRefused, match="cannot resolve"):
        run_approve(f"https://{host}/", failing(error))


def test_a_name_resolving_to_nothing_is_refused():
    with pytest.raises(TargetRefused, match="resolves to no address"):
        run_approve("https://hooks.example.com/", stub())


@pytest.mark.parametrize(
    "url", ["https://hooks.example.com:99999/", "https://hooks.example.com:port/", "https://[::1/"]
)
def test_a_url_with_a_bad_port_or_bracket_is_refused_not_crashed(url):
    with pytest.raises(TargetRefused):
        run_approve(url, allow_private=True)


# -- approve: what gets through, and how it is pinned --------------------------------------


def test_allow_private_lets_internal_addresses_through():
    target = run_approve("https://hooks.internal/x", stub("10.0.0.1", "127.0.0.1"), allow_private=True)

    assert target.url == "https://10.0.0.1/x"


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "169.254.169.254", "[fc00::1]"])
def test_allow_private_lets_internal_ip_literals_through(host):
    target = run_approve(f"http://{host}:9090/tasks", allow_private=True, allow_http=True)

    assert target.url == f"http://{host}:9090/tasks"
    assert target.sni_hostname is None


def test_http_is_accepted_when_allowed():
    target = run_approve("http://hooks.example.com/tasks", allow_http=True)

    assert target == Target(url=f"http://{PUBLIC_V4}/tasks", host_header="hooks.example.com", sni_hostname=None)


def test_https_target_is_pinned_to_the_approved_address_with_host_header_and_sni():
    calls: list[tuple[str, int]] = []

    target = run_approve("https://Hooks.Example.com/tasks?x=1#frag", stub(PUBLIC_V4, calls=calls))

    assert calls == [("hooks.example.com", 443)]
    assert target.url == f"https://{PUBLIC_V4}/tasks?x=1"
    assert target.host_header == "Hooks.Example.com"
    assert target.sni_hostname == "hooks.example.com"


def test_an_explicit_port_is_kept_in_the_pinned_url_and_the_host_header():
    calls: list[tuple[str, int]] = []

    target = run_approve("https://hooks.example.com:8443", stub(PUBLIC_V4, calls=calls))

    assert calls == [("hooks.example.com", 8443)]
    assert target.url == f"https://{PUBLIC_V4}:8443/"
    assert target.host_header == "hooks.example.com:8443"


def test_an_ipv6_address_is_pinned_in_brackets():
    target = run_approve("https://hooks.example.com:8443/t", stub(PUBLIC_V6))

    assert target.url == f"https://[{PUBLIC_V6}]:8443/t"
    assert target.sni_hostname == "hooks.example.com"


def test_the_first_approved_address_is_the_one_pinned():
    target = run_approve("https://hooks.example.com/", stub(PUBLIC_V6, PUBLIC_V4))

    assert target.url == f"https://[{PUBLIC_V6}]/"


def test_an_https_ip_literal_sends_no_sni_name():
    target = run_approve(f"https://{PUBLIC_V4}/x")

    assert target.sni_hostname is None
    assert target.host_header == PUBLIC_V4


def test_credentials_in_the_url_stay_out_of_the_host_header_and_the_pinned_url():
    target = run_approve("https://user:pw@hooks.example.com/x")

    assert target.host_header == "hooks.example.com"
    assert "pw" not in target.url
