"""Which IP addresses a webhook callback may reach: the one place that decides.

An address is public when it is globally routable unicast. An IPv6 address that carries an IPv4
address which a translator, relay or tunnel delivers to is judged by that IPv4 address alone
(every one it carries, when the form leaves the position open): ``64:ff9b::7f00:1`` reaches
127.0.0.1 through a NAT64 gateway, so it is as private as 127.0.0.1, whatever Python's
``is_global`` says of the IPv6 form. The forms:

- IPv4-mapped ``::ffff:a.b.c.d`` (unmapped by ``ip``, so an IPv4 entry of the allow-list
  covers it) and IPv4-translated (SIIT) ``::ffff:0:a.b.c.d``;
- IPv4-compatible ``::a.b.c.d`` (deprecated, still routed by some stacks);
- NAT64: the well-known prefix ``64:ff9b::/96`` and the local-use ``64:ff9b:1::/48``, whose
  operator may embed the IPv4 address at any RFC 6052 position from /48 to /96 (all are read);
- 6to4 ``2002:AABB:CCDD::/48`` and Teredo ``2001:0::/32`` (its server and its client);
- ISATAP: any prefix with the interface identifier ``[02]00:5efe:a.b.c.d``.
"""

import ipaddress

_MAPPED_TRANSLATED_COMPAT_NAT64 = [ipaddress.ip_network(n) for n in ("::ffff:0:0:0/96", "::/96", "64:ff9b::/96")]
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_ISATAP_IDS = {0x00005EFE, 0x01005EFE, 0x02005EFE, 0x03005EFE}


def ip(text):
    """An IP address (IPv4-mapped IPv6 addresses as IPv4), or None."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    return address.ipv4_mapped or address if address.version == 6 else address


def _v4(number):
    return ipaddress.IPv4Address(number & 0xFFFFFFFF)


def _translated(address):
    """The IPv4 addresses a translation prefix (mapped, SIIT, compatible, NAT64, 6to4, Teredo)
    says ``address`` goes to, or []: for these the prefix is the route, so they alone decide."""
    if address.version != 6:
        return []
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    n = int(address)
    if any(address in net for net in _MAPPED_TRANSLATED_COMPAT_NAT64):
        return [_v4(n)]
    if address in _NAT64_LOCAL:  # RFC 6052 section 2.2: the u octet (bits 64-71) is skipped
        return [
            _v4(((n >> 64) & 0xFFFF) << 16 | (n >> 40) & 0xFFFF),  # /48
            _v4(((n >> 64) & 0xFF) << 24 | (n >> 32) & 0xFFFFFF),  # /56
            _v4(n >> 24),  # /64
            _v4(n),  # /96
        ]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def _isatap(address):
    """The IPv4 address in an ISATAP interface identifier, or []: its prefix is any prefix, so
    the IPv6 address must be public too."""
    n = int(address)
    return [_v4(n)] if address.version == 6 and (n >> 32) & 0xFFFFFFFF in _ISATAP_IDS else []


def embedded_ipv4(address):
    """The IPv4 addresses an IPv6 ``address`` carries and may be delivered to (see the module
    doc); [] for an address of no such form (and for IPv4 addresses)."""
    return _translated(address) or _isatap(address)


def is_public(address):
    """True for a globally routable unicast address (not loopback, private, link-local...);
    an IPv6 translation form is judged by the IPv4 addresses it carries alone."""
    translated = _translated(address)
    if translated:
        return all(is_public(v4) for v4 in translated)
    return address.is_global and not address.is_multicast and all(is_public(v4) for v4 in _isatap(address))


def describe(address):
    """What ``address`` is, for a message: "a loopback address", "private (it carries...)"."""
    if isinstance(address, str):
        return "no address"
    embedded = [v4 for v4 in embedded_ipv4(address) if not is_public(v4)]
    if embedded:
        return f"which carries the IPv4 address {embedded[0]}, {describe(embedded[0])}"
    for attribute in ("is_loopback", "is_link_local", "is_private", "is_multicast", "is_reserved"):
        if getattr(address, attribute, False):
            return f"a {attribute[3:].replace('_', '-')} address"
    return "a non-public address"
