"""SSRF guard: refuse receiver URLs that point into the service's own network.

A receiver URL is user input that the notifier will POST to. Without a guard,
anyone allowed to create a receiver could make the service call its own
Redis, a cloud metadata endpoint (``169.254.169.254``) or any host of the
private network [1]_. So a URL is accepted only when it is http(s) and
**every** address its host resolves to is a public (global unicast) address,
or lies in a network the operator allowed (``FLEETWATCH_RECEIVER_ALLOW_NETS``,
CIDRs, default none).

Refused, in the order reported: unspecified (``0.0.0.0``, ``::``), loopback,
link-local (which holds the metadata endpoints), multicast, private
(RFC 1918, unique-local ``fc00::/7``, ...), reserved, and any other
non-global address (shared address space ``100.64.0.0/10``, documentation
ranges, ...).

IPv6 addresses that carry an IPv4 address are judged by it too, so a
transition form cannot reach what the IPv4 address itself may not
(``2002:7f00:1::`` is 6to4 for 127.0.0.1, ``2002:a9fe:a9fe::`` for the
metadata endpoint). The forms (:func:`carried_ipv4`):

- IPv4-mapped ``::ffff:0:0/96``: judged as the IPv4 address alone (the
  connection goes to it);
- IPv4-compatible ``::/96`` (deprecated, RFC 4291), NAT64 ``64:ff9b::/96``
  (RFC 6052) and ``64:ff9b:1::/48`` (RFC 8215, local use, so also refused as
  non-global by itself), 6to4 ``2002::/16`` (RFC 3056) and Teredo
  ``2001::/32`` (RFC 4380: its server address and its client address, which
  is stored inverted): refused when the carried IPv4 address is, and
  otherwise judged as an IPv6 address.

The check runs when a receiver is created and again before every delivery,
so a name that later resolves somewhere else (DNS rebinding) is refused at
send time. The connection then resolves the name once more; the window
between the check and the connection is small but not zero (closing it
needs pinning the checked address into the connection, which httpx does not
offer for https with SNI).

References
----------
.. [1] OWASP, "Server Side Request Forgery Prevention Cheat Sheet",
   https://cheatsheetseries.owasp.org/cheatsheets/Server_Side_Request_Forgery_Prevention_Cheat_Sheet.html
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), _NAT64_LOCAL)
_COMPATIBLE = ipaddress.ip_network("::/96")

_REFUSED = (("unspecified", "is_unspecified"), ("loopback", "is_loopback"),
            ("link-local", "is_link_local"), ("multicast", "is_multicast"),
            ("private", "is_private"), ("reserved", "is_reserved"))


class UnsafeUrl(ValueError):
    """The URL is not an acceptable destination (scheme, or an address refused)."""


def carried_ipv4(address: IPAddress) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, each with the form that carries it.

    Parameters
    ----------
    address : IPv4Address or IPv6Address

    Returns
    -------
    list of (str, IPv4Address)
        Forms ``"IPv4-mapped"``, ``"IPv4-compatible"``, ``"NAT64"``,
        ``"6to4"``, ``"Teredo server"``, ``"Teredo client"``; empty for an IPv4
        address or an IPv6 address of no such form. ``::`` and ``::1`` carry
        none (they are the unspecified and loopback addresses). NAT64
        addresses are read at the ``/96`` position (RFC 6052, section 2.2).

    Examples
    --------
    >>> from ipaddress import ip_address
    >>> carried_ipv4(ip_address("2002:7f00:1::"))
    [('6to4', IPv4Address('127.0.0.1'))]
    >>> carried_ipv4(ip_address("2001:0:4136:e378:8000:63bf:80ff:fffe"))
    [('Teredo server', IPv4Address('65.54.227.120')), ('Teredo client', IPv4Address('127.0.0.1'))]
    >>> carried_ipv4(ip_address("64:ff9b::a9fe:a9fe")), carried_ipv4(ip_address("::1"))
    ([('NAT64', IPv4Address('169.254.169.254'))], [])
    """
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return [("IPv4-mapped", address.ipv4_mapped)]
    if address.sixtofour is not None:
        return [("6to4", address.sixtofour)]
    if address.teredo is not None:
        server, client = address.teredo
        return [("Teredo server", server), ("Teredo client", client)]
    if any(address in net for net in _NAT64):
        return [("NAT64", low32)]
    if address in _COMPATIBLE and int(address) > 1:
        return [("IPv4-compatible", low32)]
    return []


def _allowed(address: IPAddress, allow: list[IPNetwork]) -> bool:
    return any(address.version == net.version and address in net for net in allow)


def refusal(address: IPAddress, allow: Iterable[IPNetwork] = ()) -> str | None:
    """Why ``address`` is refused as a destination, or None when it is acceptable.

    Parameters
    ----------
    address : IPv4Address or IPv6Address
    allow : iterable of IPv4Network or IPv6Network
        Networks accepted whatever their kind (the operator's allow-list).

    Returns
    -------
    str or None
        ``"unspecified"``, ``"loopback"``, ``"link-local"``, ``"multicast"``,
        ``"private"``, ``"reserved"``, ``"non-global"``; for an IPv6 address
        refused for the IPv4 address it carries (:func:`carried_ipv4`), the
        reason of that address with the form, e.g.
        ``"loopback (127.0.0.1 in 6to4)"``. None for a global address or
        one inside ``allow``.

    Examples
    --------
    >>> from ipaddress import ip_address, ip_network
    >>> [refusal(ip_address(a)) for a in ("127.0.0.1", "169.254.169.254", "10.1.2.3", "93.184.216.34")]
    ['loopback', 'link-local', 'private', None]
    >>> refusal(ip_address("::ffff:127.0.0.1")), refusal(ip_address("100.64.0.1"))
    ('loopback', 'non-global')
    >>> refusal(ip_address("2002:a9fe:a9fe::")), refusal(ip_address("2002:5db8:d822::1"))
    ('link-local (169.254.169.254 in 6to4)', None)
    >>> refusal(ip_address("127.0.0.1"), [ip_network("127.0.0.0/8")]) is None
    True
    """
    allow = list(allow)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if _allowed(address, allow):
        return None
    for form, ipv4 in carried_ipv4(address):
        why = refusal(ipv4, allow)
        if why is not None:
            return f"{why} ({ipv4} in {form})"
    if address in _NAT64_LOCAL:
        return "non-global"
    for name, attr in _REFUSED:
        if getattr(address, attr):
            return name
    return None if address.is_global else "non-global"


def http_host(url: str) -> tuple[str, int]:
    """The host and port of an http(s) URL (the port its scheme's default when none is given).

    Raises
    ------
    UnsafeUrl
        Not http(s), an invalid port, or no host.

    Examples
    --------
    >>> http_host("https://hooks.example.com/x"), http_host("http://10.0.0.1:8080")
    (('hooks.example.com', 443), ('10.0.0.1', 8080))
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise UnsafeUrl("only http and https URLs are allowed")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise UnsafeUrl(f"invalid URL: {exc}") from None
    if not host:
        raise UnsafeUrl("the URL has no host")
    return host, port or (443 if parts.scheme == "https" else 80)


async def check_url(url: str, allow: Iterable[IPNetwork] = ()) -> list[IPAddress]:
    """Resolve the URL's host and refuse it unless every address is acceptable.

    Parameters
    ----------
    url : str
        An http or https URL.
    allow : iterable of IPv4Network or IPv6Network
        The allow-list (``Settings.receiver_allow_nets``).

    Returns
    -------
    list of IPv4Address or IPv6Address
        The addresses the host resolves to (all acceptable).

    Raises
    ------
    UnsafeUrl
        Not http(s), no host, or an address refused (the message names the
        address and why).
    OSError
        The host does not resolve (``socket.gaierror``); may be transient.

    Examples
    --------
    >>> import asyncio
    >>> try:
    ...     asyncio.run(check_url("http://127.0.0.1:8080/hook"))
    ... except UnsafeUrl as exc:
    ...     print(str(exc).split(" (")[0])
    host 127.0.0.1 resolves to 127.0.0.1, a loopback address
    >>> asyncio.run(check_url("https://93.184.216.34/hook"))
    [IPv4Address('93.184.216.34')]
    """
    host, port = http_host(url)
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    allow = list(allow)
    addresses: list[IPAddress] = []
    for *_rest, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        why = refusal(address, allow)
        if why is not None:
            raise UnsafeUrl(f"host {host} resolves to {address}, a {why} address "
                            f"(not allowed by FLEETWATCH_RECEIVER_ALLOW_NETS)")
        if address not in addresses:
            addresses.append(address)
    return addresses
