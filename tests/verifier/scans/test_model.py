"""verifier.scans.model: component names, as a policy matches them."""

from __future__ import annotations

import pytest

from verifier.scans.model import component_from


@pytest.mark.parametrize(
    ("purl", "name", "package"),
    [
        # the purl specification's own examples (PURL-TYPES.rst)
        ("pkg:pypi/django-allauth@12.23", "django-allauth", "django-allauth"),
        ("pkg:pypi/Py_YAML.Tools@1", "py-yaml-tools", "py-yaml-tools"),
        ("pkg:maven/org.apache.xmlgraphics/batik-anim@1.9.1", "org.apache.xmlgraphics/batik-anim",
         "org.apache.xmlgraphics:batik-anim"),
        ("pkg:maven/org.apache.logging.log4j/log4j-core@2.14.1", "org.apache.logging.log4j/log4j-core",
         "org.apache.logging.log4j:log4j-core"),
        ("pkg:npm/%40angular/animation@12.3.1", "@angular/animation", "@angular/animation"),
        ("pkg:npm/foobar@12.3.1", "foobar", "foobar"),
        ("pkg:deb/debian/curl@7.50.3-1?arch=i386&distro=jessie", "debian/curl", "curl"),
        ("pkg:rpm/fedora/curl@7.50.3-1.fc25?arch=i386&distro=fedora-25", "fedora/curl", "curl"),
        ("pkg:apk/alpine/curl@7.83.0-r0?arch=x86", "alpine/curl", "curl"),
        ("pkg:alpm/arch/pacman@6.0.1-1?arch=x86_64", "arch/pacman", "pacman"),
        ("pkg:golang/github.com/gorilla/context@234fd47e07d1004f0aed9c", "github.com/gorilla/context",
         "github.com/gorilla/context"),
        ("pkg:gem/ruby-advisory-db-check@0.12.4", "ruby-advisory-db-check", "ruby-advisory-db-check"),
    ],
)  # fmt: skip
def test_each_component_has_the_name_its_ecosystem_gives_it(purl: str, name: str, package: str) -> None:
    component = component_from("Written Name", None, purl)
    assert (component.name, component.package) == (name, package)
    assert component.to_json()["package"] == package


def test_without_a_purl_the_package_is_the_written_name() -> None:
    assert component_from("PyYAML", "5.3", None, ecosystem="pypi").package == "pyyaml"
    assert component_from("log4j-core", "2.14.1", None).package == "log4j-core"
    assert component_from("Jena", None, "not a purl").package == "jena"
