"""OCI image references: the distribution reference grammar and docker-style normalisation.

The grammar is that of ``github.com/distribution/reference`` (``reference.go``, ``regexp.go``,
``normalize.go``)::

    reference        := name [ ":" tag ] [ "@" digest ]
    name             := [ domain "/" ] path-component [ "/" path-component ]*
    domain           := host [ ":" port ]
    host             := domain-name | IPv4 address | "[" IPv6 address "]"
    domain-component := /[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]/
    path-component   := /[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*/
    tag              := /[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}/

Normalisation follows the docker CLI: the first component names a registry only when it contains ``.`` or
``:`` or is ``localhost``; otherwise the registry is ``docker.io``, and a one-component Docker Hub path gets
``library/`` in front. ``index.docker.io`` and ``registry-1.docker.io`` fold into ``docker.io``; registry
host names are lower-cased (they compare case-insensitively); ``latest`` is filled in only when neither a
tag nor a digest is given.

Where trtguard is stricter than docker, on purpose (a policy must never match a guess):

* only ``sha256`` digests of 64 lower-case hex characters are accepted;
* an upper-case first component (``Docker/app``) is *not* taken for a registry: it is an error, because
  repository paths are lower case;
* non-ASCII text (look-alike letters such as U+0435 CYRILLIC SMALL LETTER IE, full-width characters),
  whitespace and control characters are rejected with the character named;
* a bare 64-hex string (an image ID, not a name) is rejected;
* the normalised name ``registry/repository`` may not exceed 255 characters, and a port must be 1-65535.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Literal

from verifier.base._errors import InputError

__all__ = ["DOCKER_HUB", "ImageReference", "InvalidReference"]

#: The registry name that Docker Hub references normalise to.
DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
_OFFICIAL_PREFIX = "library/"
_DEFAULT_TAG = "latest"
_NAME_MAX = 255
# name (255) + ":" + tag (128) + "@sha256:" + 64 hex: anything longer cannot be valid, so refuse it before
# doing any further work on it.
_TEXT_MAX = _NAME_MAX + 1 + 128 + 8 + 64
_SHOWN_MAX = 120

# Character classes are spelled out in ASCII: Python's \w and \d would accept non-ASCII letters and digits.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[[a-fA-F0-9:]+\]"
_DOMAIN_RE = re.compile(rf"(?P<host>{_DOMAIN_NAME}|{_IPV6})(?::(?P<port>[0-9]+))?")
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH_COMPONENT_RE = re.compile(_PATH_COMPONENT)
_PATH_RE = re.compile(rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")
_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_SHA256_HEX_RE = re.compile(r"[0-9a-f]{64}")
_HEX_RE = re.compile(r"[0-9a-fA-F]*")
# The general digest grammar, used only to tell "unsupported algorithm" from "not a digest at all".
_ANY_DIGEST_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
_BAD_CHAR_RE = re.compile(r"[\x00-\x20\x7f]")

Part = Literal["reference", "registry", "repository", "tag", "digest"]

_PATH_RULE = (
    "repository path components are lower-case letters a-z and digits, separated by one '.', one or two "
    "'_', or any number of '-', and may not start or end with a separator"
)
_DIGEST_RULE = "a digest is 'sha256:' followed by 64 lower-case hexadecimal characters"


class InvalidReference(InputError):
    """An image reference that breaks the reference grammar. It never matches any policy rule.

    ``reference`` is the text as given; ``part`` names the offending part ("registry", "repository",
    "tag", "digest", or "reference" for the text as a whole).
    """

    def __init__(self, reference: object, part: Part, message: str, *, hint: str) -> None:
        # ascii() shows a look-alike letter as its \u escape; long input is cut so messages stay readable.
        shown = ascii(reference)
        if len(shown) > _SHOWN_MAX:
            shown = shown[: _SHOWN_MAX - 4] + "...'"
        super().__init__(message, location=f"image {shown}", hint=hint)
        self.reference = reference
        self.part = part


@dataclass(frozen=True, slots=True)
class ImageReference:
    """A parsed, normalised OCI image reference. Build one with :meth:`parse`."""

    registry: str
    """Lower-case ``host[:port]``; ``docker.io`` for Docker Hub."""
    repository: str
    """The path inside the registry, e.g. ``library/nginx``."""
    tag: str | None
    """The tag, or None; ``latest`` is filled in only when neither tag nor digest is given."""
    digest: str | None
    """``sha256:<64 hex>`` or None."""
    # Admission hashes, prints and names the same few references on every look-up: the reference is
    # immutable, so each is worked out once, when it is built (no part of equality, order or repr).
    _hash: int = field(init=False, repr=False, compare=False)
    _text: str = field(init=False, repr=False, compare=False)
    _name: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name = f"{self.registry}/{self.repository}"
        text = name
        if self.tag is not None:
            text += f":{self.tag}"
        if self.digest is not None:
            text += f"@{self.digest}"
        object.__setattr__(self, "_hash", hash((self.registry, self.repository, self.tag, self.digest)))
        object.__setattr__(self, "_text", text)
        object.__setattr__(self, "_name", name)

    def __hash__(self) -> int:
        # The hash a frozen dataclass of the four fields has.
        return self._hash

    def __reduce__(self) -> tuple[type[ImageReference], tuple[str, str, str | None, str | None]]:
        # Built again where it is loaded: a str hash differs from one process to the next.
        return (ImageReference, (self.registry, self.repository, self.tag, self.digest))

    @classmethod
    def parse(cls, text: str) -> ImageReference:
        """Parse and normalise ``text``; raise :class:`InvalidReference` for anything the grammar rejects."""
        if not isinstance(text, str):
            raise InvalidReference(
                text,
                "reference",
                f"an image reference must be a string, not {type(text).__name__}",
                hint="write the image as a string such as 'registry.example.com/team/app:1.0'",
            )
        return _parse(text)

    @property
    def name(self) -> str:
        """``registry/repository``, without tag or digest."""
        return self._name

    def __str__(self) -> str:
        return self._text

    def with_digest(self, digest: str) -> ImageReference:
        """This reference pinned to ``digest`` (the tag is kept); raises :class:`InvalidReference`."""
        if digest == self.digest:
            return self  # already pinned there (its digest was checked when it was parsed)
        _check_digest(f"{self}@{digest}", digest)
        return replace(self, digest=digest)


# Admission sees the same few image strings over and over; results are immutable, so caching is safe and
# bounded. Errors are not cached (lru_cache does not store exceptions).
@lru_cache(maxsize=4096)
def _parse(text: str) -> ImageReference:
    if not text:
        raise InvalidReference(
            text, "reference", "the image reference is empty", hint="give an image such as 'nginx:1.27'"
        )
    if len(text) > _TEXT_MAX:
        raise InvalidReference(
            text,
            "reference",
            f"the image reference is {len(text)} characters long; the longest valid one is {_TEXT_MAX}",
            hint="a name is at most 255 characters, a tag at most 128",
        )
    _check_characters(text)

    name_and_tag, at, digest = text.partition("@")
    if "@" in digest:
        raise InvalidReference(
            text,
            "digest",
            "the reference has more than one '@'",
            hint=f"write name[:tag][@digest]; {_DIGEST_RULE}",
        )
    if at:
        _check_digest(text, digest)
    if name_and_tag.startswith("[") and "/" not in name_and_tag:
        raise InvalidReference(
            text,
            "repository",
            f"{name_and_tag!r} is a registry address with no repository after it",
            hint="write the repository after the registry, e.g. '[2001:db8::1]:5000/team/app:1.0'",
        )
    tag: str | None = None
    colon = name_and_tag.rfind(":")
    if colon > name_and_tag.rfind("/"):
        tag = name_and_tag[colon + 1 :]
        name_and_tag = name_and_tag[:colon]
        if _TAG_RE.fullmatch(tag) is None:
            raise InvalidReference(
                text,
                "tag",
                f"tag {tag!r} is not valid" if tag else "the tag after ':' is empty",
                hint="a tag is 1-128 characters of letters, digits, '_', '.' and '-', "
                "and does not start with '.' or '-'",
            )
    if not name_and_tag:
        raise InvalidReference(text, "repository", "the reference has no repository name", hint=_PATH_RULE)

    registry, path = _split_registry(text, name_and_tag)
    if _PATH_RE.fullmatch(path) is None:
        for component in path.split("/"):
            _check_path_component(text, path, component)
    if registry == DOCKER_HUB and "/" not in path:
        path = _OFFICIAL_PREFIX + path
    if len(registry) + 1 + len(path) > _NAME_MAX:
        raise InvalidReference(
            text,
            "repository",
            f"the name (registry/repository) is {len(registry) + 1 + len(path)} characters long; "
            f"at most {_NAME_MAX} are allowed",
            hint="use a shorter repository path",
        )
    if tag is None and not at:
        tag = _DEFAULT_TAG
    return ImageReference(registry=registry, repository=path, tag=tag, digest=digest if at else None)


def _check_characters(text: str) -> None:
    if not text.isascii():
        position, char = next((i, c) for i, c in enumerate(text) if not c.isascii())
        raise InvalidReference(
            text,
            "reference",
            f"character {position + 1} is {char!r} (U+{ord(char):04X} "
            f"{unicodedata.name(char, 'unnamed character')}), which is not ASCII",
            hint="image references are ASCII only; a look-alike letter from another alphabet names a "
            "different image, so retype the reference",
        )
    bad = _BAD_CHAR_RE.search(text)
    if bad is not None:
        raise InvalidReference(
            text,
            "reference",
            f"character {bad.start() + 1} is {bad.group()!r}: whitespace and control characters are not "
            "allowed in an image reference",
            hint="remove the whitespace; an image reference is one word such as 'nginx:1.27'",
        )


def _check_digest(text: str, digest: str) -> None:
    if digest.startswith("sha256:"):
        if _SHA256_HEX_RE.fullmatch(digest, 7) is not None:
            return
        hex_part = digest[7:]
        if _SHA256_HEX_RE.fullmatch(hex_part.lower()) is not None:
            problem = "has upper-case hexadecimal characters"
        elif _HEX_RE.fullmatch(hex_part) is not None:
            problem = f"has {len(hex_part)} hexadecimal characters where 64 are expected"
        else:
            problem = "is not hexadecimal"
        raise InvalidReference(text, "digest", f"digest {digest!r} {problem}", hint=_DIGEST_RULE)
    if _ANY_DIGEST_RE.fullmatch(digest) is not None:
        algorithm = digest.partition(":")[0]
        raise InvalidReference(
            text,
            "digest",
            f"digest algorithm {algorithm!r} is not supported: trtguard accepts only sha256 digests",
            hint=f"pin the image by its sha256 manifest digest; {_DIGEST_RULE}",
        )
    raise InvalidReference(
        text,
        "digest",
        f"{digest!r} after '@' is not a digest" if digest else "the digest after '@' is empty",
        hint=_DIGEST_RULE,
    )


def _split_registry(text: str, name: str) -> tuple[str, str]:
    """Split ``name`` into (normalised registry, path) the way the docker CLI does."""
    first, slash, rest = name.partition("/")
    if not slash or not ("." in first or ":" in first or first.lower() == "localhost"):
        if _SHA256_HEX_RE.fullmatch(name) is not None:
            raise InvalidReference(
                text,
                "repository",
                "a 64-character hexadecimal name is an image ID, not an image name",
                hint="name the image by repository and digest, e.g. 'registry.example.com/app@sha256:…'",
            )
        return DOCKER_HUB, name
    match = _DOMAIN_RE.fullmatch(first)
    if match is None:
        raise InvalidReference(
            text,
            "registry",
            f"registry {first!r} is not a valid host name, IPv4 address or bracketed IPv6 address "
            "with an optional port",
            hint="a registry is written like 'registry.example.com', 'localhost:5000' or '[::1]:5000'",
        )
    host, port = match.group("host"), match.group("port")
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise InvalidReference(
                text,
                "registry",
                f"registry {first!r} does not hold a valid IPv6 address",
                hint="write an IPv6 registry in brackets, e.g. '[2001:db8::1]:5000' (no zone, no IPv4 tail)",
            ) from None
    if port is not None and not 1 <= int(port) <= 65535:
        raise InvalidReference(
            text,
            "registry",
            f"port {port} of registry {first!r} is outside 1-65535",
            hint="give the registry's real port",
        )
    registry = first.lower()
    if registry in _DOCKER_HUB_ALIASES:
        registry = DOCKER_HUB
    return registry, rest


def _check_path_component(text: str, path: str, component: str) -> None:
    if _PATH_COMPONENT_RE.fullmatch(component) is not None:
        return
    if not component:
        message = f"repository path {path!r} has an empty component"
    elif component != component.lower() and _PATH_COMPONENT_RE.fullmatch(component.lower()) is not None:
        message = f"repository path component {component!r} has upper-case letters"
    else:
        message = f"repository path component {component!r} is not valid"
    raise InvalidReference(
        text,
        "repository",
        message,
        hint=f"{_PATH_RULE}; only the registry host name may use upper case",
    )
