"""Verification in one place: evidence goes in unverified, verified facts come out.

Everything that decides whether a signature counts lives here or in the format it names; callers (the
policy evaluator in :mod:`policies`, the evidence-package checker in ``trtguard.audit.package.verify``,
``verify-engine``) hand over what they found and get back facts, or one typed refusal:

* :func:`verify_statement` (copies of one in-toto statement, a :class:`StatementTrust`) →
  :class:`VerifiedStatement`, or :class:`StatementRefused`. Each registered format checks only its own
  signed content; the threshold is counted once, over distinct *keys* (never signer names) across formats
  and copies; ``subject=`` binds the statement to an artifact digest.
* Typed loaders built on it: :func:`verify_manifest` (one rule for a valid build manifest: its
  ``output_engine.sha256`` is the statement's subject), :func:`verify_predicate` (SBOMs, scans),
  :func:`verify_approval`, :func:`verify_verification`, :func:`verify_attestation`, returning
  :class:`VerifiedManifest` and its siblings, each with ``valid_until`` (when a counted signature stops
  verifying), which bounds how long a cache may keep the answer.
* Image signatures: :func:`image_trust` (a rule's signers → :class:`TrustPolicy`) and :func:`verify_image`
  (cosign classic and bundles, DSSE ``cosign/sign`` statements, Notation) → :class:`VerificationResult`.
* Model signatures (OpenSSF Model Signing, ``verifier/model_signing``): a registered format, and
  :func:`verify_model_statement` → :class:`VerifiedModelStatement` (who signed which files).
* The trust material a policy's signers carry (:class:`PublicKey`, :class:`OpenPGPKey`,
  :class:`KeylessIdentity`, :class:`TrustRoot`, Notation's trust, :class:`ModelSigningKey`,
  :class:`ModelSigningCertificates` and :class:`ModelSigningKeyless`), re-exported so that :mod:`policies`
  loads signers without importing a cryptographic module.

Adding a statement signature format
-----------------------------------
A format is one object with the five members of ``StatementFormat`` (``_contract.py``), typed
structurally: it imports nothing from this room (so a format in its own folder makes no import cycle).

* ``label: str`` — its name in messages and in ``StatementTrust.material`` (``"DSSE"``, ``"OpenPGP"``);
* ``material(signer) -> object | None`` — the trust material of this format that a policy's signer
  carries (an attribute of :class:`policies.signers.Signer`, read with ``getattr``), or None;
* ``identity(material) -> str`` — what a threshold counts for that material: the key itself (a digest of
  its canonical encoding, or a fingerprint in one case, prefixed with the format), so one key under two
  names or in two encodings counts once; the room counts by it, never by signer names;
* ``carries(copy) -> bool`` — whether a found copy (a :class:`verifier.evidence.Attestation`) holds a
  signature of this format at all: in its envelope (DSSE), its ``openpgp_signatures``, its Sigstore
  ``bundle``, or, for a new detached format, its ``detached`` signatures of the format's kind (an evidence
  folder files them as ``X.json.<kind>`` beside the statement ``X.json``, naming no format);
* ``check(copy, trusted) -> (signed, problems)`` — which of ``trusted`` (signer name → material) signed
  the copy's exact bytes: ``signed`` lists ``(name, valid_until)`` (``valid_until``: when that signature
  stops verifying on its own, e.g. its expiry, else None), ``problems`` says why others did not, as text.
  It never raises for a bad signature, and imports heavy libraries inside the function (start-up time,
  issue 15).

Write it in its own folder (``verifier/<format>/``, as ``verifier/model_signing/``: the table loads every
format, and ``verify-engine`` must not load ``verifier.signatures``; exported by that folder's front door)
and register it with ONE line, in the ``FORMATS`` tuple of ``verifier/verification/_table.py``::

    from verifier.model_signing import MODEL_SIGNING  # the import that line needs
    FORMATS: tuple[StatementFormat, ...] = (DSSE, OPENPGP, MODEL_SIGNING)

mypy then checks the object against the protocol. Nothing else in verification changes: thresholds,
copies, subject binding, the refusal and ``valid_until`` come with it, for every caller of
:func:`verify_statement` and its loaders (``tests/verifier/verification/test_adding_a_format.py`` proves
it with a format made in a test). What is not verification's, and a real format adds where it needs it:

* the policy language: a TrustedKeys field (``policies/_trusted_keys.py``) and, in ``policies/signers.py``,
  the :class:`~policies.signers.Signer` attribute ``material`` reads, its loading, ``kind`` and
  ``fingerprint``, and where ``signer_list_problems`` lets it be listed (``policies/loader.py`` says which
  rules admit which formats); without them a signer of the new kind cannot be written down;
* evidence transport beyond a folder: a registry layout (``verifier/registry/evidence.py``, and its writer
  in ``trtguard/release``) and the evidence package's file list (``trtguard/audit/package``: ``export.py``,
  ``contents.py``, ``verify/attestations.py`` carry OpenPGP signatures only);
* ``verify-engine``, which takes DSSE keys alone (:meth:`StatementTrust.with_keys`).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
