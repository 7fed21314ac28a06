"""Glob patterns over normalised image references.

A pattern has the shape of a reference: ``NAME[:TAG][@DIGEST]`` where each part may use ``*`` and ``?``.
``NAME`` is matched against ``registry/repository`` of the normalised reference: in the repository ``*`` is
any run of characters, ``/`` included; in the registry host it never crosses a ``/``, so
``*.example.com/app`` cannot match ``evil.io/x.example.com/app``. ``:TAG`` when given must match the tag
(``:*`` also admits a digest-only reference, which has no tag); ``@DIGEST`` when given must match the
digest. Patterns must themselves be normalised (``docker.io/library/nginx``, not ``nginx``): a short name
would silently never match.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from verifier.base import ImageReference

_HOST = re.compile(r"^(\*|[a-z0-9*?]([a-z0-9.*?-]*[a-z0-9*?])?(:[0-9*?]+)?)$")


class PatternError(ValueError):
    """A pattern that cannot match anything the way its author meant."""


@dataclass(frozen=True, slots=True)
class ImagePattern:
    """One compiled glob pattern."""

    text: str
    name: re.Pattern[str]
    tag: re.Pattern[str] | None
    tag_is_wildcard: bool
    digest: re.Pattern[str] | None

    @classmethod
    def compile(cls, text: str) -> ImagePattern:
        """Compile ``text``; raise :class:`PatternError` with the reason when it is not normalised."""
        if not text or text != text.strip() or not text.isascii():
            raise PatternError(f"pattern {text!r} must be non-empty ASCII without surrounding spaces")
        rest, _, digest = text.partition("@")
        slash = rest.rfind("/")
        colon = rest.rfind(":")
        if colon > slash:
            name, tag = rest[:colon], rest[colon + 1 :]
        else:
            name, tag = rest, None
        if name != name.lower():
            raise PatternError(
                f"pattern {text!r} has upper-case letters in its name; references are lower-case"
            )
        host = name.split("/", 1)[0]
        if "/" not in name and name != "*":
            raise PatternError(
                f"pattern {text!r} is not normalised: write the registry and repository, "
                f"e.g. 'docker.io/library/{name}'"
            )
        if name != "*" and not (host.startswith("*") or "." in host or ":" in host or host == "localhost"):
            raise PatternError(
                f"pattern {text!r} does not start with a registry host; "
                f"write 'docker.io/{name}' for Docker Hub images"
            )
        if not _HOST.match(host):
            raise PatternError(f"pattern {text!r} has an invalid registry host {host!r}")
        path = name.partition("/")[2]
        if host == "index.docker.io" or (host == "docker.io" and not any(c in path for c in "/*?")):
            raise PatternError(
                f"pattern {text!r} is not normalised: Docker Hub references read "
                f"'docker.io/library/<name>' or 'docker.io/<user>/<name>'"
            )
        if tag == "" or text.endswith("@"):
            raise PatternError(
                f"pattern {text!r} has an empty tag or digest; write ':*' or '@sha256:*' for any"
            )
        return cls(
            text=text,
            name=re.compile(_name_regex(name)),
            tag=re.compile(fnmatch.translate(tag)) if tag else None,
            tag_is_wildcard=tag == "*",
            digest=re.compile(fnmatch.translate(digest)) if digest else None,
        )

    def matches(self, reference: ImageReference) -> bool:
        """True when ``reference`` (normalised) matches this pattern."""
        if not self.name.match(reference.name):
            return False
        if (
            self.tag is not None
            and not self.tag_is_wildcard
            and (reference.tag is None or not self.tag.match(reference.tag))
        ):
            return False
        if self.digest is not None:
            return reference.digest is not None and self.digest.match(reference.digest) is not None
        return True


def _name_regex(name: str) -> str:
    """``fnmatch`` over the repository; in the host, wildcards stop at the first ``/``."""
    if name == "*":
        return fnmatch.translate(name)
    host, path = name.split("/", 1)
    host_regex = "".join({"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c)) for c in host)
    return f"{host_regex}/{fnmatch.translate(path)}"


def matches_any(patterns: tuple[ImagePattern, ...], reference: ImageReference) -> bool:
    """True when some pattern matches ``reference``."""
    return any(p.matches(reference) for p in patterns)
