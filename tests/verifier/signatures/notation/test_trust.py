"""Trusted identities as Notation matches them (RFC 4514 DNs, escaping, ``ST`` vs ``S``); trust settings."""

from __future__ import annotations

import pytest

from tests.support.notary_pki import issue, make_pki, subject
from verifier.base._errors import InputError
from verifier.signatures.notation._trust import (
    NotationTrust,
    TrustedIdentity,
    certificate_subject,
    parse_distinguished_name,
)


def test_a_dn_parses_with_spaces_and_the_s_alias() -> None:
    assert parse_distinguished_name("C=US, S=WA , L=Seattle,O=Notary, CN=alpine") == {
        "C": "US",
        "ST": "WA",
        "L": "Seattle",
        "O": "Notary",
        "CN": "alpine",
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (r"C=US,ST=WA,O=Acme\, Inc.", "Acme, Inc."),
        (r"C=US,ST=WA,O=Acme\2C Inc.", "Acme, Inc."),
        (r"C=US,ST=WA,O=a\+b", "a+b"),
        (r"C=US,ST=WA,O=\#hash", "#hash"),
        ("C=US,ST=WA,O=caf\\C3\\A9", "café"),
    ],
)
def test_escapes_are_resolved(text: str, value: str) -> None:
    assert parse_distinguished_name(text)["O"] == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("C=US,ST=WA", "lacks O"),
        ("C=US,O=Acme", "lacks ST"),
        ("C=US,ST=WA,O=Acme,O=Other", "given twice"),
        ("C=US,ST=WA,O=Acme+OU=Builds", "multi-valued"),
        ("C=US,ST=WA,O=#0403", '"=#"'),
        ("C=US,ST=WA,O=Acme, Inc.", "not TYPE=VALUE"),
        ("C=US,ST=WA,O=a\\", "unfinished escape"),
    ],
)
def test_what_notation_refuses_is_refused(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_distinguished_name(text)


def test_an_identity_matches_a_subset_of_the_subject_with_equal_values() -> None:
    certificate = issue(subject("Release Signer", organization="Acme, Inc.", unit="Builds")).certificate
    names = certificate_subject(certificate)
    assert TrustedIdentity.parse(r"x509.subject: C=US, S=WA, O=Acme\, Inc.").admits(names)
    assert TrustedIdentity.parse(
        r"x509.subject: C=US, ST=WA, O=Acme\, Inc., OU=Builds, CN=Release Signer"
    ).admits(names)
    assert not TrustedIdentity.parse("x509.subject: C=US, ST=WA, O=Acme").admits(
        names
    )  # a prefix is not a match
    assert not TrustedIdentity.parse(r"x509.subject: C=US, ST=WA, O=acme\, inc.").admits(
        names
    )  # values are exact
    assert not TrustedIdentity.parse(r"x509.subject: C=US, ST=WA, O=Acme\, Inc., OU=Other").admits(names)


@pytest.mark.parametrize(
    "text",
    ["x509.subject", "x509.subject:", "x509.subject: CN=only", "email: a@example.com", "C=US,ST=WA,O=Acme"],
)
def test_malformed_identities_are_input_errors(text: str) -> None:
    with pytest.raises(InputError):
        TrustedIdentity.parse(text)


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"stores": {"tsa": ()}}, "needs a 'ca' or 'signingAuthority' trust store"),
        ({"identities": ()}, "needs trustedIdentities"),
        (
            {
                "identities": (
                    TrustedIdentity.parse("*"),
                    TrustedIdentity.parse("x509.subject: C=US,ST=WA,O=A"),
                )
            },
            "'\\*' must be the only",
        ),
        ({"scopes": ("*", "r.example/a")}, "'\\*' must be the only registry scope"),
        ({"scopes": ("r.example/a:latest",)}, "without tag, digest or glob"),
        ({"scopes": ("r.example/*",)}, "without tag, digest or glob"),
        ({"level": "skip"}, "'skip' verifies nothing"),
    ],
)
def test_trust_settings_are_checked(options: dict[str, object], reason: str) -> None:
    root = make_pki().root.certificate
    settings: dict[str, object] = {
        "stores": {"ca": (root,)},
        "identities": (TrustedIdentity.parse("*"),),
    } | options
    with pytest.raises(InputError, match=reason):
        NotationTrust(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("scope", ["localhost", "r.io/Upper", "-r.io/x", "r.io/a___b", "https://r.io/a"])
def test_registry_scopes_follow_notations_grammar(scope: str) -> None:
    with pytest.raises(InputError, match="is not valid"):
        NotationTrust(
            stores={"ca": (make_pki().root.certificate,)},
            identities=(TrustedIdentity.parse("*"),),
            scopes=(scope,),
        )


def test_the_scope_grammar_does_not_backtrack() -> None:
    # Go's regexp is linear; Python's is not, so the grammar is written without ambiguity (a ReDoS otherwise).
    trust = NotationTrust(
        stores={"ca": (make_pki().root.certificate,)}, identities=(TrustedIdentity.parse("*"),)
    )
    for scope in ("r.io/" + "a" * 5000 + "!", "r.io/" + "a-" * 5000 + "!", "a" * 5000 + "-!/x"):
        with pytest.raises(InputError, match="is not valid"):
            NotationTrust(stores=trust.stores, identities=trust.identities, scopes=(scope,))
