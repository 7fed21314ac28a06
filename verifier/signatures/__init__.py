"""Offline verification of cosign-compatible signatures and attestations.

What the registry client fetches is handed in as plain values; nothing here touches the network:

* classic cosign image signatures (:class:`CosignSignature`, one per layer of the ``sha256-<digest>.sig``
  manifest): simple-signing payload, key or keyless (Fulcio certificate + Rekor SET) signers;
* classic cosign blob signatures (``cosign sign-blob``: a signature over the artifact, optionally with a
  certificate and the legacy Rekor bundle);
* Sigstore bundles v0.1-v0.3 (cosign v3 image signatures and attestations, ``cosign sign-blob --bundle``,
  ``cosign attest``): signed with a key, or keyless against a pinned trusted root;
* DSSE attestation envelopes signed with keys.

Every transparency log entry, whichever kind of signature carries it, goes through one check
(``_private/rekor_entry.verify_entry``): the entry records this signature, its signed entry timestamp and its
inclusion proof with the signed checkpoint verify with a trusted log key. ``tlog_verified`` in a result is
True only when that check ran and passed for every counted signature.

A :class:`TrustPolicy` says who may sign and how many distinct signers are needed. Results are
:class:`VerificationResult`; failures raise :class:`VerificationError` (:class:`NoSignatures` when there is
nothing to verify at all) whose message names what failed on each signature.

Everything here is synchronous and CPU-bound (a key signature costs about one ECDSA verification, a keyless
one about 10 ms for the certificate chain): async callers run it with ``asyncio.to_thread``.

The names below load on first use (module ``__getattr__``): a policy that trusts only keys never imports the
Sigstore, Notation or RFC 3161 code, which keeps ``trtguard check`` quick to start (issue 15).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
