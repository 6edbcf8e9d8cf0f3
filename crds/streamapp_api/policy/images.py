"""Image references as container runtimes read them (the distribution reference grammar of Docker and
containerd): ``streamapp/runtime:1`` is ``docker.io/streamapp/runtime:1``, ``ubuntu`` is
``docker.io/library/ubuntu``. Policy prefixes and an app's image are compared in that form. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_REGISTRY = "docker.io"
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_DOMAIN = re.compile(r"^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
                     r"(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$", re.ASCII)
_DIGEST = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")


@dataclass(frozen=True)
class ImageRef:
    registry: str  # lower-case, docker.io for Docker Hub
    path: str  # library/ubuntu
    tag: str | None
    digest: str | None
    qualified: bool  # the reference named its registry

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.path}"

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse_image(reference: str) -> ImageRef:
    """The canonical reference; ValueError says what breaks the grammar."""
    slash = reference.find("/")
    first = reference[:slash]
    if slash == -1 or (not any(c in first for c in ".:") and first != "localhost" and first.lower() == first):
        registry, rest, qualified = DEFAULT_REGISTRY, reference, False
    else:
        registry, rest, qualified = first, reference[slash + 1:], True
        if not _DOMAIN.match(registry):
            raise ValueError(f"{registry!r} is not a registry host")
        registry = registry.lower()
        if registry == "index.docker.io":
            registry = DEFAULT_REGISTRY
    rest, _, digest = rest.partition("@")
    last = rest.rfind("/")
    colon = rest.rfind(":")
    tag = None
    if colon > last:
        rest, tag = rest[:colon], rest[colon + 1:]
        if not _TAG.match(tag):
            raise ValueError(f"{tag!r} is not a tag")
    if digest and not _DIGEST.match(digest):
        raise ValueError(f"{digest!r} is not a digest (algorithm:hex)")
    components = rest.split("/")
    if not all(_COMPONENT.match(c) for c in components):
        raise ValueError("a repository path is lower-case letters and digits, separated by '.', '_', '__', '-' "
                         "and '/'")
    if len(registry) + 1 + len(rest) > 255:
        raise ValueError("a repository name has at most 255 characters")
    if registry == DEFAULT_REGISTRY and len(components) == 1:
        rest = f"library/{rest}"
    return ImageRef(registry, rest, tag, digest or None, qualified)


def canonical_prefix(prefix: str) -> str:
    """A policy prefix in canonical form: a repository (``docker.io/streamapp/runtime``), a registry or
    project ending in '/', or a repository ending in ':' or '@' (any tag, any digest)."""
    if prefix == "*":
        return prefix
    if prefix.endswith("/"):
        return parse_image(prefix.rstrip("/") + "/x").name[:-1]
    if prefix.endswith((":", "@")):
        return parse_image(prefix[:-1]).name + prefix[-1]
    ref = parse_image(prefix)
    return str(ref)


def image_allowed(image: str, prefixes: tuple[str, ...]) -> bool:
    """``streamapp/runtime`` allows ``docker.io/streamapp/runtime:1.0`` and ``streamapp/runtime@sha256:…``,
    never ``streamapp/runtime-other``; a prefix ending in '/' (a registry or project) allows what is
    under it; both sides compared canonical."""
    try:
        ref = parse_image(image)
    except ValueError:
        return "*" in prefixes
    for prefix in prefixes:
        try:
            allowed = canonical_prefix(prefix)
        except ValueError:
            continue
        if allowed == "*" or str(ref) == allowed or ref.name == allowed:
            return True
        if allowed.endswith(("/", ":", "@")) and str(ref).startswith(allowed):
            return True
    return False
