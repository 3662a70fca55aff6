"""The SSRF guard (service.paging.ssrf) on IPv6 forms that carry an IPv4 address."""

from __future__ import annotations

from ipaddress import ip_address, ip_network

import pytest

from service.paging.ssrf import UnsafeUrl, check_url, refusal

# (address, refusal): every IPv6 transition form carrying a loopback, link-local (metadata),
# private or otherwise non-global IPv4 address is refused for it; the same forms carrying a
# public IPv4 address are judged as IPv6 addresses (6to4 of a public address is accepted).
CASES = [
    # 6to4, 2002::/16 (RFC 3056): the IPv4 address is bits 16..47
    ("2002:7f00:1::", "loopback (127.0.0.1 in 6to4)"),
    ("2002:7f00:1::1", "loopback (127.0.0.1 in 6to4)"),
    ("2002:a9fe:a9fe::", "link-local (169.254.169.254 in 6to4)"),
    ("2002:a00:1::", "private (10.0.0.1 in 6to4)"),
    ("2002:c0a8:101:1::1", "private (192.168.1.1 in 6to4)"),
    ("2002::", "unspecified (0.0.0.0 in 6to4)"),
    ("2002:6440:1::", "non-global (100.64.0.1 in 6to4)"),
    ("2002:e000:1::", "multicast (224.0.0.1 in 6to4)"),
    ("2002:5db8:d822::1", None),
    # NAT64 well-known prefix 64:ff9b::/96 (RFC 6052) and local-use 64:ff9b:1::/48 (RFC 8215)
    ("64:ff9b::7f00:1", "loopback (127.0.0.1 in NAT64)"),
    ("64:ff9b::a9fe:a9fe", "link-local (169.254.169.254 in NAT64)"),
    ("64:ff9b::c0a8:1", "private (192.168.0.1 in NAT64)"),
    ("64:ff9b:1::7f00:1", "loopback (127.0.0.1 in NAT64)"),
    ("64:ff9b:1::a9fe:a9fe", "link-local (169.254.169.254 in NAT64)"),
    ("64:ff9b:1::5db8:d822", "non-global"),
    # Teredo 2001::/32 (RFC 4380): server in bits 32..63, client inverted in the last 32 bits
    ("2001:0:7f00:1::", "loopback (127.0.0.1 in Teredo server)"),
    ("2001:0:a9fe:a9fe::", "link-local (169.254.169.254 in Teredo server)"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback (127.0.0.1 in Teredo client)"),
    ("2001:0:4136:e378:8000:63bf:5601:5601", "link-local (169.254.169.254 in Teredo client)"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private (10.0.0.1 in Teredo client)"),
    # IPv4-mapped ::ffff:0:0/96 (judged as the IPv4 address) and IPv4-compatible ::/96
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:169.254.169.254", "link-local"),
    ("::ffff:93.184.216.34", None),
    ("::127.0.0.1", "loopback (127.0.0.1 in IPv4-compatible)"),
    ("::169.254.169.254", "link-local (169.254.169.254 in IPv4-compatible)"),
    ("::10.1.2.3", "private (10.1.2.3 in IPv4-compatible)"),
    # the plain forms keep their own reasons
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fd00::1", "private"),
    ("2606:4700:4700::1111", None),
]


@pytest.mark.parametrize(("address", "why"), CASES)
def test_transition_forms_are_judged_by_the_ipv4_address_they_carry(address: str, why: str | None):
    assert refusal(ip_address(address)) == why


@pytest.mark.parametrize(("address", "allow", "why"), [
    # an allow-listed IPv4 network covers it in every form that carries it
    ("2002:a00:1::", "10.0.0.0/8", None),
    ("::ffff:10.0.0.1", "10.0.0.0/8", None),
    # allow-listing the IPv6 range itself accepts it as it is
    ("64:ff9b:1::a00:1", "64:ff9b:1::/48", None),
    # an allowed network elsewhere changes nothing
    ("2002:7f00:1::", "10.0.0.0/8", "loopback (127.0.0.1 in 6to4)"),
])
def test_allow_list(address: str, allow: str, why: str | None):
    assert refusal(ip_address(address), [ip_network(allow)]) == why


@pytest.mark.parametrize("host", ["[2002:7f00:1::]", "[2002:a9fe:a9fe::]", "[64:ff9b::a9fe:a9fe]",
                                  "[2001:0:4136:e378:8000:63bf:80ff:fffe]"])
async def test_check_url_refuses_transition_forms(host: str):
    with pytest.raises(UnsafeUrl, match=r"resolves to .* address \(not allowed"):
        await check_url(f"http://{host}:8080/hook")
