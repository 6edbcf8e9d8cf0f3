"""Where an app keeps its state and whom it asks for it: checkpoint locations and S3 endpoints, each put
in one canonical form before any decision. Pure (no name is resolved: a name that resolves to a
metadata address is for the app's NetworkPolicy to stop).
"""

from __future__ import annotations

import ipaddress
import re
from fnmatch import fnmatchcase

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
# Cloud metadata services by name, and by address where it is not link-local (Alibaba, Azure's wire
# server, AWS's IPv6 one).
METADATA_HOSTS = ("metadata", "metadata.google.internal", "metadata.goog", "instance-data",
                  "instance-data.ec2.internal", "metadata.azure.com", "metadata.tencentyun.com")
METADATA_ADDRESSES = (ipaddress.ip_address("100.100.100.200"), ipaddress.ip_address("168.63.129.16"),
                      ipaddress.ip_address("fd00:ec2::254"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOST_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_NUMBER = re.compile(r"^(0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*)$")
_SEGMENT = re.compile(r"^[A-Za-z0-9._=+-]+$")


class NotAHost(ValueError):
    """A host that no canonical form can be given (the message says what is wrong)."""


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """An IPv4 address in any spelling inet_aton takes (2852039166, 0xA9FEA9FE, 0251.0376.0251.0376,
    169.254.43518), or None when ``host`` is not all numbers."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMBER.match(p) for p in parts):
        return None
    numbers = [int(p, 16) if p.startswith("0x") else int(p, 8) if p.startswith("0") and p != "0" else int(p)
               for p in (p if p != "0x" else "0x0" for p in parts)]
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise NotAHost(f"{host!r} is not an address: a number is too large")
    value = 0
    for n in head:
        value = value * 256 + n
    return ipaddress.IPv4Address(value * 256 ** (4 - len(head)) + last)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, 6to4, NAT64, Teredo's server side)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if int(ip) >> 32 == 0 and int(ip) > 1:  # ::a.b.c.d, IPv4-compatible
        return ipaddress.IPv4Address(int(ip))
    return None


def canonical_host(host: str) -> tuple[str, IP | None]:
    """``host`` as a client connects to it: lower-case, without a trailing dot, an address in its one
    spelling (an IPv6 address carrying an IPv4 one as the latter). NotAHost says what is wrong."""
    host = host.lower()
    if host.startswith("["):
        if not host.endswith("]") or "%" in host:
            raise NotAHost(f"{host!r} is not an IPv6 address in brackets")
        try:
            ip6 = ipaddress.IPv6Address(host[1:-1])
        except ValueError as exc:
            raise NotAHost(f"{host!r} is not an IPv6 address") from exc
        ip: IP = _embedded_ipv4(ip6) or ip6
        return (str(ip) if ip.version == 4 else f"[{ip}]"), ip
    if host.endswith("."):
        host = host[:-1]
    v4 = _inet_aton(host)
    if v4 is not None:
        return str(v4), v4
    if not _HOST_NAME.match(host):
        raise NotAHost(f"{host!r} is not a host name: write it in ASCII letters, digits, '-' and '.' (an "
                       "internationalised name in its xn-- form)")
    return host, None


def never_reason(host: str, ip: IP | None) -> str | None:
    """Why a canonical host is never an endpoint unless an admin names it: link-local (the cloud
    metadata service, 169.254.169.254), loopback, unspecified, a metadata name."""
    if ip is not None:
        if ip.is_link_local:
            return "a link-local address (the cloud metadata service answers at 169.254.169.254)"
        if ip.is_loopback:
            return "a loopback address (the driver's own pod)"
        if ip.is_unspecified or (ip.version == 4 and ip in ipaddress.ip_network("0.0.0.0/8")):
            return "an unspecified address (the driver's own pod)"
        if ip in METADATA_ADDRESSES:
            return "a cloud metadata address"
        if ip.is_multicast or (ip.version == 4 and ip.is_reserved):
            return "not a unicast address"
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return "a loopback name (the driver's own pod)"
    if host in METADATA_HOSTS:
        return "the name of a cloud metadata service"
    return None


def split_endpoint(endpoint: str) -> tuple[str, str]:
    """``(host, port)`` of ``http(s)://host[:port][/path]``. NotAHost for user info, encodings and the
    characters parsers read differently (backslash, '?', '#')."""
    rest = endpoint.split("://", 1)[1]
    authority = re.split(r"[/]", rest, maxsplit=1)[0]
    for char, what in (("@", "user info"), ("%", "a %-encoded character"), ("\\", "a backslash"),
                       ("?", "a '?'"), ("#", "a '#'")):
        if char in authority:
            raise NotAHost(f"the host part holds {what}, which URL parsers read differently")
    if authority.startswith("["):
        host, _, port = authority.partition("]")
        host, port = host + "]", port.removeprefix(":") if port.startswith(":") else port
        if port and not port.isdigit():
            raise NotAHost(f"{authority!r}: expected [address]:port")
    else:
        host, _, port = authority.partition(":")
    if port and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise NotAHost(f"{authority!r}: the port is not a number from 1 to 65535")
    return host, port


def endpoint_refusal(endpoint: str, allow: tuple[str, ...]) -> str | None:
    """Why an author's S3 endpoint is refused under the policy's ``endpoints.allow``, or None."""
    try:
        host, port = split_endpoint(endpoint)
        canonical, ip = canonical_host(host)
    except NotAHost as exc:
        return f"endpoint {endpoint!r} is refused: {exc}"
    listed = set()
    for entry in allow:
        try:
            listed.add(canonical_host(entry)[0])
        except NotAHost:
            continue  # a glob
    never = never_reason(canonical, ip)
    if never is not None and canonical not in listed:
        return (f"endpoint {endpoint!r} is refused: its host {canonical} is {never}; an admin who means it lists "
                "that host by name in the operator policy 'endpoints.allow'")
    hostport = f"{canonical}:{port}" if port else canonical
    if not any(fnmatchcase(canonical, p.lower()) or fnmatchcase(hostport, p.lower()) for p in allow):
        return (f"endpoint {endpoint!r} is refused: host {canonical} is not among the operator policy's "
                f"'endpoints.allow' ({', '.join(allow) or 'none'})")
    return None


def location_refusal(location: str, namespace: str, name: str, templates: tuple[str, ...]) -> str | None:
    """Why an author's checkpoint location (s3a://bucket/path, as the API's pattern admits it) is
    refused, or None: its path, canonical, must end with /<namespace>/<name> and lie under one of the
    admin's ``templates`` ({namespace} and {name} filled in) when there are any."""
    bucket, _, path = location.removeprefix("s3a://").partition("/")
    segments = path.removesuffix("/").split("/") if path.removesuffix("/") else []
    for segment in segments:
        if segment in ("", ".", ".."):
            return (f"location {location!r} has an empty, '.' or '..' path segment; write the path without them "
                    "(object stores and Hadoop fold them differently)")
        if not _SEGMENT.match(segment):
            return (f"location {location!r} has a path segment with other characters than ASCII letters, digits, "
                    "'.', '_', '-', '=' and '+' (no %-encoding, backslash, '?' or '#')")
    own = f"/{namespace}/{name}"
    canonical = f"s3a://{bucket}/{'/'.join(segments)}"
    if segments[-2:] != [namespace, name]:
        return (f"location {location!r} is not the app's own: its path must end with {own} (metadata.namespace, "
                f"metadata.name), e.g. s3a://{bucket}/streamapps{own}, so that no app reads or overwrites "
                "another's state")
    expanded = [t.replace("{namespace}", namespace).replace("{name}", name).rstrip("/") for t in templates]
    if expanded and not any(canonical == t or canonical.startswith(t + "/") for t in expanded):
        return (f"location {location!r} is not under a checkpoint location this cluster allows: "
                f"{', '.join(expanded)} (operator policy 'checkpoints.locations')")
    return None


def table_refusal(path: str, namespace: str, name: str, templates: tuple[str, ...]) -> str | None:
    """Why an author's s3a:// table path (a parquet or delta sink's, canonical by the API's pattern) is
    refused under the admin's ``tables.locations`` ({namespace} and {name} filled in; a table must be one
    of them or under one, '*' matching any characters), or None. None listed: every s3a:// table is
    refused, as an app's S3 identity (a node's or a shared pod identity's) may reach other teams' data."""
    expanded = [t.replace("{namespace}", namespace).replace("{name}", name).rstrip("/") for t in templates]
    if any(path == t or path.startswith(t + "/") or fnmatchcase(path, t) or fnmatchcase(path, t + "/*")
           for t in expanded):
        return None
    where = (f"not under a table location this cluster allows: {', '.join(expanded)}" if expanded else
             "refused: this cluster lists no s3a:// table locations")
    return (f"table {path!r} is {where} (operator policy 'tables.locations'); or give a relative path, kept "
            "under the app's own storage")
