"""verifier.base references: the distribution reference grammar, docker normalisation, and what is refused."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from verifier.base._errors import InputError
from verifier.base._references import ImageReference, InvalidReference

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "ab" * 32

# (text, registry, repository, tag, digest)
VALID = [
    # docker CLI normalisation
    ("nginx", "docker.io", "library/nginx", "latest", None),
    ("nginx:1.27", "docker.io", "library/nginx", "1.27", None),
    ("user/app", "docker.io", "user/app", "latest", None),
    ("docker.io/ubuntu", "docker.io", "library/ubuntu", "latest", None),
    ("docker.io/library/ubuntu", "docker.io", "library/ubuntu", "latest", None),
    ("index.docker.io/ubuntu", "docker.io", "library/ubuntu", "latest", None),
    ("index.docker.io/fooo/bar", "docker.io", "fooo/bar", "latest", None),
    ("registry-1.docker.io/library/redis:7", "docker.io", "library/redis", "7", None),
    ("library/foo/bar", "docker.io", "library/foo/bar", "latest", None),
    ("docker.io/" + "1a" * 32, "docker.io", "library/" + "1a" * 32, "latest", None),
    # registries: dots, ports, localhost, IPv4, IPv6, case folding
    ("localhost/app", "localhost", "app", "latest", None),
    ("localhost:5000/a/b@" + D1, "localhost:5000", "a/b", None, D1),
    ("LocalHost:5000/a", "localhost:5000", "a", "latest", None),
    ("test:5000/repo", "test:5000", "repo", "latest", None),
    ("test-com:8080/foo", "test-com:8080", "foo", "latest", None),
    ("Registry.Example.COM/team/x", "registry.example.com", "team/x", "latest", None),
    ("REGISTRY.example.com:443/team/app:TAG", "registry.example.com:443", "team/app", "TAG", None),
    ("xn--n3h.com/myimage:xn--n3h.com", "xn--n3h.com", "myimage", "xn--n3h.com", None),
    (
        "sub-dom1.foo.com/bar/baz/quux:some-long-tag",
        "sub-dom1.foo.com",
        "bar/baz/quux",
        "some-long-tag",
        None,
    ),
    (
        "b.gcr.io/test.example.com/my-app:test.example.com",
        "b.gcr.io",
        "test.example.com/my-app",
        "test.example.com",
        None,
    ),
    ("192.168.1.1/repo", "192.168.1.1", "repo", "latest", None),
    ("192.168.1.1:5000/repo:5050", "192.168.1.1:5000", "repo", "5050", None),
    ("[2001:db8::1]/repo", "[2001:db8::1]", "repo", "latest", None),
    ("[2001:DB8::1]:5000/repo:tag@" + D1, "[2001:db8::1]:5000", "repo", "tag", D1),
    ("[::1]:5000/repo", "[::1]:5000", "repo", "latest", None),
    ("registry.corp/" + "a" * 241, "registry.corp", "a" * 241, "latest", None),
    # one-component names that look like hosts stay Docker Hub names (the docker CLI does the same)
    ("test.com:5000", "docker.io", "library/test.com", "5000", None),
    ("localhost:5000", "docker.io", "library/localhost", "5000", None),
    ("192.168.1.1", "docker.io", "library/192.168.1.1", "latest", None),
    ("foo_bar.com:8080", "docker.io", "library/foo_bar.com", "8080", None),
    ("test_com/foo", "docker.io", "test_com/foo", "latest", None),
    # path component separators
    ("docker---rules/docker", "docker.io", "docker---rules/docker", "latest", None),
    ("dock__er/docker", "docker.io", "dock__er/docker", "latest", None),
    ("x/a.b_c-d", "docker.io", "x/a.b_c-d", "latest", None),
    ("d/docker", "docker.io", "d/docker", "latest", None),
    # tags and digests
    ("lowercase:Uppercase", "docker.io", "library/lowercase", "Uppercase", None),
    ("app:_under", "docker.io", "library/app", "_under", None),
    ("app:" + "t" * 128, "docker.io", "library/app", "t" * 128, None),
    ("busybox@" + D2, "docker.io", "library/busybox", None, D2),
    ("busybox:latest@" + D2, "docker.io", "library/busybox", "latest", D2),
    ("nvcr.io/nvidia/tensorrt:24.08-py3@" + D1, "nvcr.io", "nvidia/tensorrt", "24.08-py3", D1),
]

# (text, part, words the message must contain)
INVALID = [
    ("", "reference", "empty"),
    # case: upper case is allowed only in the registry host and the tag
    ("Uppercase:tag", "repository", "'Uppercase' has upper-case"),
    ("Docker/docker", "repository", "'Docker' has upper-case"),
    ("DOCKER/docker", "repository", "'DOCKER' has upper-case"),
    ("docker/Docker", "repository", "'Docker' has upper-case"),
    ("test:5000/Uppercase/lowercase:tag", "repository", "'Uppercase' has upper-case"),
    ("nvcr.io/NVIDIA/tensorrt:24.08", "repository", "'NVIDIA' has upper-case"),
    # unicode look-alikes, full-width characters, invisible characters
    ("ngin\u0445", "reference", "U+0445 CYRILLIC SMALL LETTER HA"),
    (
        "registry.corp/inf\u0435rence/app:1",
        "reference",
        "character 18 is '\u0435' (U+0435 CYRILLIC SMALL LETTER IE)",
    ),
    ("\uff4eginx", "reference", "U+FF4E FULLWIDTH LATIN SMALL LETTER N"),
    ("nginx:1.27\u200b", "reference", "U+200B ZERO WIDTH SPACE"),
    ("registry.corp\u2024io/app", "reference", "ONE DOT LEADER"),
    ("nginx:lat\u0435st", "reference", "not ASCII"),
    # whitespace and control characters
    (" nginx", "reference", "character 1 is ' '"),
    ("nginx ", "reference", "whitespace"),
    ("nginx\n", "reference", "'\\n'"),
    ("ngi\tnx", "reference", "'\\t'"),
    ("nginx\x00", "reference", "control"),
    # empty and malformed components
    ("a//b", "repository", "empty component"),
    ("docker.io/docker///docker", "repository", "empty component"),
    ("/nginx", "repository", "empty component"),
    ("nginx/", "repository", "empty component"),
    ("docker/", "repository", "empty component"),
    ("-docker", "repository", "'-docker' is not valid"),
    ("docker-/docker", "repository", "'docker-' is not valid"),
    ("____/____", "repository", "is not valid"),
    ("_docker/_docker", "repository", "is not valid"),
    ("x/dock..er", "repository", "'dock..er' is not valid"),
    ("x/dock_.er", "repository", "'dock_.er' is not valid"),
    ("dock..er/docker", "registry", "registry 'dock..er' is not a valid host"),
    ("aa/asdf$$^/aa", "repository", "is not valid"),
    (":justtag", "repository", "no repository"),
    ("@" + D1, "repository", "no repository"),
    ("1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a", "repository", "image ID"),
    # registries
    ("https://github.com/docker/docker", "registry", "registry 'https:'"),
    ("-docker.io/docker/docker", "registry", "not a valid host"),
    ("a.b_c-d/e", "registry", "registry 'a.b_c-d' is not a valid host"),
    ("[fe80::1%eth0]:5000/debian", "registry", "not a valid host"),
    ("[2001:db8:3:4::192.0.2.33]:5000/debian", "registry", "not a valid host"),
    ("[:::::]:5000/repo", "registry", "valid IPv6"),
    ("fc00::1:5000/debian", "registry", "not a valid host"),
    ("registry.corp:99999/app", "registry", "port 99999"),
    ("registry.corp:0/app", "registry", "port 0"),
    ("[2001:db8::1]", "repository", "registry address with no repository"),
    ("[fc00::1]:5000", "repository", "registry address with no repository"),
    # tags
    ("nginx:", "tag", "empty"),
    ("nginx:-dash", "tag", "'-dash' is not valid"),
    ("nginx:.dot", "tag", "'.dot' is not valid"),
    ("nginx:" + "t" * 129, "tag", "is not valid"),
    ("nginx:a+b", "tag", "is not valid"),
    # digests: sha256 with 64 lower-case hex only
    ("nginx@", "digest", "empty"),
    ("repo@sha256:ffffffffffffffffffffffffffffffffff", "digest", "34 hexadecimal characters where 64"),
    ("repo@sha256:" + "F" * 64, "digest", "upper-case hexadecimal"),
    ("repo@sha256:" + "g" * 64, "digest", "not hexadecimal"),
    ("repo@sha256:" + "f" * 65, "digest", "65 hexadecimal characters"),
    ("repo@sha512:" + "f" * 128, "digest", "algorithm 'sha512' is not supported"),
    ("validname@invaliddigest:" + "f" * 64, "digest", "algorithm 'invaliddigest' is not supported"),
    ("repo@" + "f" * 64, "digest", "is not a digest"),
    ("repo@sha256:" + "1" * 64 + "@" + D1, "digest", "more than one '@'"),
    ("a@b@c", "digest", "more than one '@'"),
    ("repo@latest", "digest", "is not a digest"),
    # length: the normalised name is at most 255 characters
    ("a/" * 128 + "a:tag", "repository", "at most 255"),
    ("registry.corp/" + "a" * 242, "repository", "256 characters long"),
    ("registry.corp/" + "a" * 2000, "reference", "characters long"),
]


@pytest.mark.parametrize(("text", "registry", "repository", "tag", "digest"), VALID)
def test_valid_references_parse_and_normalise(
    text: str, registry: str, repository: str, tag: str | None, digest: str | None
) -> None:
    ref = ImageReference.parse(text)
    assert ref == ImageReference(registry=registry, repository=repository, tag=tag, digest=digest)
    expected = f"{registry}/{repository}" + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
    assert str(ref) == expected
    assert ref.name == f"{registry}/{repository}"
    assert ImageReference.parse(str(ref)) == ref


@pytest.mark.parametrize(("text", "part", "words"), INVALID)
def test_invalid_references_name_the_offending_part(text: str, part: str, words: str) -> None:
    with pytest.raises(InvalidReference) as caught:
        ImageReference.parse(text)
    error = caught.value
    assert error.part == part
    assert words in error.message
    assert error.reference == text
    assert error.hint
    assert isinstance(error, InputError)
    assert error.exit_code == 2


def test_locations_show_look_alikes_escaped_and_long_input_cut() -> None:
    with pytest.raises(InvalidReference) as caught:
        ImageReference.parse("registry.corp/inf\u0435rence/app:1")
    assert caught.value.location == "image 'registry.corp/inf\\u0435rence/app:1'"
    with pytest.raises(InvalidReference) as caught:
        ImageReference.parse("a" * 5000)
    assert caught.value.location is not None
    assert len(caught.value.location) == len("image ") + 120
    assert caught.value.location.endswith("aaa...'")


def test_error_diagnostics_show_location_message_and_hint() -> None:
    with pytest.raises(InvalidReference) as caught:
        ImageReference.parse("registry.corp/Team/app:1")
    text = caught.value.diagnostics()
    assert text.startswith("image 'registry.corp/Team/app:1': repository path component 'Team'")
    assert "\n  hint: repository path components are lower-case letters" in text


@pytest.mark.parametrize("value", [None, 5, ["nginx"], {"image": "nginx"}, b"nginx"])
def test_non_string_input_is_an_error_not_a_crash(value: Any) -> None:
    with pytest.raises(InvalidReference, match="must be a string") as caught:
        ImageReference.parse(value)
    assert caught.value.part == "reference"


def test_registry_host_names_compare_case_insensitively() -> None:
    assert ImageReference.parse("NVCR.IO/nvidia/tensorrt:24.08-py3") == ImageReference.parse(
        "nvcr.io/nvidia/tensorrt:24.08-py3"
    )
    assert ImageReference.parse("Index.Docker.IO/library/nginx") == ImageReference.parse("nginx")


def test_tag_and_digest_are_both_kept() -> None:
    ref = ImageReference.parse("securesystemsengineering/alice-image:test@" + D1)
    assert (ref.tag, ref.digest) == ("test", D1)
    assert str(ref) == f"docker.io/securesystemsengineering/alice-image:test@{D1}"


def test_latest_is_filled_in_only_without_tag_and_digest() -> None:
    assert ImageReference.parse("nginx").tag == "latest"
    assert ImageReference.parse("nginx@" + D1).tag is None
    assert ImageReference.parse("nginx:1.0").tag == "1.0"


def test_with_digest_keeps_the_tag_and_validates_the_digest() -> None:
    ref = ImageReference.parse("nvcr.io/nvidia/tensorrt:24.08-py3")
    pinned = ref.with_digest(D2)
    assert str(pinned) == f"nvcr.io/nvidia/tensorrt:24.08-py3@{D2}"
    assert ref.digest is None  # frozen: the original is unchanged
    with pytest.raises(InvalidReference, match="algorithm 'sha512'") as caught:
        ref.with_digest("sha512:" + "f" * 128)
    assert caught.value.part == "digest"
    assert caught.value.location is not None
    assert caught.value.location.startswith("image 'nvcr.io/nvidia/tensorrt:24.08-py3@sha512:ffff")
    with pytest.raises(InvalidReference, match="upper-case"):
        ref.with_digest("sha256:" + "A" * 64)
    assert pinned.with_digest(D2) == pinned  # pinning again to its own digest changes nothing
    assert str(pinned.with_digest(D1)) == f"nvcr.io/nvidia/tensorrt:24.08-py3@{D1}"


def test_references_are_hashable_and_frozen() -> None:
    ref = ImageReference.parse("nginx")
    assert {ref, ImageReference.parse("docker.io/library/nginx:latest")} == {ref}
    with pytest.raises(AttributeError):
        ref.tag = "other"  # type: ignore[misc]


def _as_written(ref: ImageReference) -> str:
    """The text of ``ref`` worked out from its four fields, as the reference did before it kept it."""
    text = f"{ref.registry}/{ref.repository}"
    text += f":{ref.tag}" if ref.tag is not None else ""
    return text + (f"@{ref.digest}" if ref.digest is not None else "")


def _kept_as_built(ref: ImageReference) -> None:
    fields = (ref.registry, ref.repository, ref.tag, ref.digest)
    assert hash(ref) == hash(fields)  # the hash of a frozen dataclass of the four fields
    assert str(ref) == _as_written(ref)
    assert ref.name == f"{ref.registry}/{ref.repository}"
    twin = ImageReference(*fields)
    assert twin == ref and hash(twin) == hash(ref) and str(twin) == str(ref) and twin is not ref


def test_hash_text_and_name_are_kept_for_every_way_of_building_one() -> None:
    ref = ImageReference.parse("Registry.example.com:5000/team/app:1.0")
    _kept_as_built(ref)
    pinned = ref.with_digest(D1)  # built by dataclasses.replace
    _kept_as_built(pinned)
    assert str(pinned) == f"registry.example.com:5000/team/app:1.0@{D1}"
    bare = ImageReference("localhost", "app", None, None)
    _kept_as_built(bare)
    assert str(bare) == "localhost/app" and bare != ImageReference("localhost", "app", "latest", None)
    unpickled = pickle.loads(pickle.dumps(pinned))  # noqa: S301 - the pickle this test just wrote
    for copied in (unpickled, copy.copy(pinned), copy.deepcopy(pinned)):
        assert copied == pinned and str(copied) == str(pinned)
        _kept_as_built(copied)
    assert repr(ref) == (
        "ImageReference(registry='registry.example.com:5000', repository='team/app', tag='1.0', digest=None)"
    )
    with pytest.raises(AttributeError):
        ref._text = "other"  # type: ignore[misc]


# --- every image string in the public admission fixtures -------------------------------------------------

ALICE = "sha256:1234567890123456123456789012345612345678901234561234567890123456"
CHARLIE = "sha256:91ac9b26df583762234c1cdb2fc930364754ccc59bc752a2bfe298d2ea68f9ff"
CONTROLLER = "sha256:9bba603b99bf25f6d117cf1235b6598c16033ad027b143c90fa5b3cc583c5713"
NGINX = "sha256:89102e348749bb17a6a651a4b2a17420e1a66d2a44a675b981973d49a5af3a5e"
ECR = "123456789.dkr.ecr.ap-southeast-2.amazonaws.com/k8s.gcr.io/ingress-nginx/controller"
GAR = "us-central1-docker.pkg.dev/gcp-project-123/main/k8s.gcr.io/ingress-nginx/controller"
SSE = "securesystemsengineering"
FIXTURE_IMAGES = {
    f"{SSE}/alice-image:test": f"docker.io/{SSE}/alice-image:test",
    f"{SSE}/alice-image:test@{ALICE}": f"docker.io/{SSE}/alice-image:test@{ALICE}",
    f"{SSE}/charlie-image@{CHARLIE}": f"docker.io/{SSE}/charlie-image@{CHARLIE}",
    "busybox": "docker.io/library/busybox:latest",
    "busybox:1.28": "docker.io/library/busybox:1.28",
    "busybox:1.32": "docker.io/library/busybox:1.32",
    "nginx": "docker.io/library/nginx:latest",
    "nginx:latest": "docker.io/library/nginx:latest",
    "docker.io/library/nginx:latest": "docker.io/library/nginx:latest",
    f"nginx:v1.26@{NGINX}": f"docker.io/library/nginx:v1.26@{NGINX}",
    "alpine": "docker.io/library/alpine:latest",
    "perl:5.34.0": "docker.io/library/perl:5.34.0",
    "redis:alpine": "docker.io/library/redis:alpine",
    "mysql:8": "docker.io/library/mysql:8",
    "test-image": "docker.io/library/test-image:latest",
    "init-container": "docker.io/library/init-container:latest",
    f"docker.io/library/redis:latest@{D1}": f"docker.io/library/redis:latest@{D1}",
    "quay.io/fluentd_elasticsearch/fluentd:v2.5.2": "quay.io/fluentd_elasticsearch/fluentd:v2.5.2",
    "registry.k8s.io/nginx-slim:0.8": "registry.k8s.io/nginx-slim:0.8",
    f"k8s.gcr.io/ingress-nginx/controller:v0.43.0@{CONTROLLER}": (
        f"k8s.gcr.io/ingress-nginx/controller:v0.43.0@{CONTROLLER}"
    ),
    f"{ECR}:v0.43.0@{CONTROLLER}": f"{ECR}:v0.43.0@{CONTROLLER}",
    f"{GAR}@{CONTROLLER}": f"{GAR}@{CONTROLLER}",
}


def _image_strings(node: Any) -> Iterator[str]:
    """Every string value of an ``image`` key, anywhere in a JSON document (status included)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "image" and isinstance(value, str):
                yield value
            else:
                yield from _image_strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _image_strings(item)


def test_every_image_string_in_the_admission_fixtures(shared_fixtures: Path) -> None:
    found: set[str] = set()
    for path in sorted((shared_fixtures / "admission").glob("*.json")):
        found.update(_image_strings(json.loads(path.read_text())))
    # The table covers exactly the fixtures' images: a new fixture image must be added with its expectation.
    assert found == set(FIXTURE_IMAGES)
    for text, normalised in FIXTURE_IMAGES.items():
        assert str(ImageReference.parse(text)) == normalised, text


# --- properties ------------------------------------------------------------------------------------------

# The machine is shared and its timings noisy: a per-example deadline would only add flaky failures.
_no_deadline = settings(deadline=None)

# Built from character sets rather than st.from_regex, which is several times slower to draw from.
_LOWER_DIGITS = "abcdefghijklmnopqrstuvwxyz0123456789"
_TAG_FIRST = _LOWER_DIGITS + "ABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_alnum = st.text(_LOWER_DIGITS, min_size=1, max_size=6)
# domain-component: [a-z0-9] | [a-z0-9][a-z0-9-]*[a-z0-9]
_label = st.builds(
    lambda first, middle, last: first + (middle + last if last else ""),
    st.sampled_from(_LOWER_DIGITS),
    st.text(_LOWER_DIGITS + "-", max_size=8),
    st.sampled_from(["", *_LOWER_DIGITS]),
)
# path-component: [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*
_path_component = st.builds(
    lambda first, rest: first + "".join(separator + run for separator, run in rest),
    _alnum,
    st.lists(st.tuples(st.sampled_from([".", "_", "__", "-", "--", "---"]), _alnum), max_size=3),
)
# tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
_tag = st.builds(str.__add__, st.sampled_from(_TAG_FIRST), st.text(_TAG_FIRST + ".-", max_size=20))
_digest = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda hex_: f"sha256:{hex_}")
_port = st.integers(min_value=1, max_value=65535).map(str)
_ipv6 = st.ip_addresses(v=6).map(str).filter(lambda text: "." not in text and "%" not in text)
_host = st.one_of(
    st.lists(_label, min_size=2, max_size=4).map(".".join),
    st.just("localhost"),
    st.ip_addresses(v=4).map(str),
    _ipv6.map(lambda text: f"[{text}]"),
)


@st.composite
def _registries(draw: st.DrawFn) -> str:
    host = draw(_host)
    port = draw(st.none() | _port)
    return host if port is None else f"{host}:{port}"


@st.composite
def _references(
    draw: st.DrawFn, *, with_registry: bool = False
) -> tuple[str, str | None, list[str], str | None, str | None]:
    """(text, registry as written, path components, tag, digest) of a valid reference."""
    registry = draw(_registries() if with_registry else st.none() | _registries())
    components = draw(st.lists(_path_component, min_size=1, max_size=4))
    if registry is None:
        first = components[0]
        # Without a registry, a first component that looks like a host would be read as one.
        assume(len(components) == 1 or ("." not in first and first != "localhost"))
        assume(not (len(components) == 1 and len(first) == 64))
    tag = draw(st.none() | _tag)
    digest = draw(st.none() | _digest)
    text = "/".join(([registry] if registry else []) + components)
    text += (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
    return text, registry, components, tag, digest


@_no_deadline
@given(_references())
@example(("nginx", None, ["nginx"], None, None))
def test_parsing_follows_the_grammar(case: tuple[str, str | None, list[str], str | None, str | None]) -> None:
    text, registry, components, tag, digest = case
    ref = ImageReference.parse(text)
    if registry is None:
        expected_registry = "docker.io"
        expected_path = "/".join(components if len(components) > 1 else ["library", *components])
    else:
        expected_registry = registry.lower()
        expected_path = "/".join(components)
    assert ref.registry == expected_registry
    assert ref.repository == expected_path
    assert ref.digest == digest
    assert ref.tag == (tag if tag else (None if digest else "latest"))


@_no_deadline
@given(_references())
def test_normalised_form_is_a_fixed_point(
    case: tuple[str, str | None, list[str], str | None, str | None],
) -> None:
    ref = ImageReference.parse(case[0])
    assert ImageReference.parse(str(ref)) == ref
    assert str(ImageReference.parse(str(ref))) == str(ref)


@_no_deadline
@given(_references(with_registry=True))
def test_upper_case_registry_is_the_same_registry(
    case: tuple[str, str | None, list[str], str | None, str | None],
) -> None:
    text, registry, *_ = case
    assert registry is not None
    assert ImageReference.parse(registry.upper() + text[len(registry) :]) == ImageReference.parse(text)


@_no_deadline
@given(_references(), st.data())
def test_upper_case_in_the_repository_is_refused(
    case: tuple[str, str | None, list[str], str | None, str | None], data: st.DataObject
) -> None:
    text, registry, components, *_ = case
    path = "/".join(components)
    letters = [i for i, char in enumerate(path) if char.isalpha()]
    assume(letters)
    index = data.draw(st.sampled_from(letters))
    start = len(registry) + 1 if registry else 0
    changed = text[: start + index] + text[start + index].upper() + text[start + index + 1 :]
    with pytest.raises(InvalidReference) as caught:
        ImageReference.parse(changed)
    assert caught.value.part in {"repository", "registry"}
    assert "upper-case" in caught.value.message or "not a valid host" in caught.value.message


@_no_deadline
@given(
    _references(),
    st.characters(min_codepoint=0x80, exclude_categories=["Cs"]),
    st.data(),
)
def test_any_non_ascii_character_is_refused(
    case: tuple[str, str | None, list[str], str | None, str | None], char: str, data: st.DataObject
) -> None:
    text = case[0]
    index = data.draw(st.integers(min_value=0, max_value=len(text)))
    with pytest.raises(InvalidReference) as caught:
        ImageReference.parse(text[:index] + char + text[index:])
    assert caught.value.part == "reference"
    assert f"U+{ord(char):04X}" in caught.value.message


@_no_deadline
@given(_path_component)
def test_docker_hub_spellings_are_one_image(name: str) -> None:
    assume(len(name) != 64)
    short = ImageReference.parse(name)
    for spelling in (
        f"docker.io/{name}",
        f"docker.io/library/{name}",
        f"index.docker.io/{name}",
        f"registry-1.docker.io/library/{name}:latest",
    ):
        assert ImageReference.parse(spelling) == short


@_no_deadline
@given(st.text(max_size=80))
@example("nginx\n")
@example("a" * 600)
def test_any_text_parses_or_raises_invalid_reference(text: str) -> None:
    try:
        ref = ImageReference.parse(text)
    except InvalidReference as error:
        assert error.message
        assert error.hint
        return
    rendered = str(ref)
    assert rendered.isascii()
    assert rendered == rendered.strip()
    assert ImageReference.parse(rendered) == ref


@_no_deadline
@given(st.data())
def test_kept_hash_and_text_agree_with_the_fields(data: st.DataObject) -> None:
    case = data.draw(_references())
    _kept_as_built(ImageReference.parse(case[0]))
