"""The cosign "simple signing" payload of a classic image signature.

``{"critical": {"identity": {"docker-reference": …}, "image": {"docker-manifest-digest": "sha256:…"},
"type": "cosign container image signature"}, "optional": {…} | null}`` (cosign ``specs/SIGNATURE_SPEC.md``,
containers/image ``docs/containers-signature.5.md``). Only called after the signature over these exact bytes
has verified.
"""

from __future__ import annotations

import json
from typing import Any, Final

from verifier.base import ImageReference, InputError, VerificationError

SIGNATURE_TYPE: Final = "cosign container image signature"


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise VerificationError(f"the signed payload's {what} is not an object")
    return value


def check_payload(payload: bytes, *, image_digest: str, repository: str | None) -> None:
    """Raise :class:`VerificationError` unless the payload signs ``image_digest`` (and ``repository``).

    ``repository`` is a normalised ``registry/repository`` name (``ImageReference.name``); the payload's
    ``docker-reference`` may carry a tag (containers/image writes one), which is ignored.
    """
    try:
        document = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as error:
        raise VerificationError("the signed payload is not JSON") from error
    except RecursionError as error:
        raise VerificationError("the signed payload is nested too deeply") from error
    critical = _object(_object(document, "top level").get("critical"), "critical section")
    if critical.get("type") != SIGNATURE_TYPE:
        raise VerificationError(
            f"the signed payload's type is {critical.get('type')!r}, not {SIGNATURE_TYPE!r}"
        )
    signed_digest = _object(critical.get("image"), "critical.image").get("docker-manifest-digest")
    if signed_digest != image_digest:
        raise VerificationError(
            f"the signature is for {signed_digest}, not for the image digest {image_digest}",
            hint="the signature belongs to another image (or the manifest changed after signing)",
        )
    if repository is None:
        return
    reference = _object(critical.get("identity"), "critical.identity").get("docker-reference")
    if not isinstance(reference, str):
        raise VerificationError("the signed payload names no docker-reference")
    try:
        signed_name = ImageReference.parse(reference).name
    except InputError as error:
        raise VerificationError(
            f"the signed docker-reference {reference!r} is not a valid reference"
        ) from error
    if signed_name != repository:
        raise VerificationError(
            f"the signature is for repository {signed_name}, not {repository}",
            hint="the image was signed under another name; sign it where it is deployed from",
        )
