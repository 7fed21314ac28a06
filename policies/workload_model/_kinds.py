"""The workload kinds trtguard reads: each kind, by API group and kind, and where it keeps its pod templates.

A kind is identified by its API group and its kind (``apps``/``Deployment``, ``batch.volcano.sh``/``Job``),
never by its kind alone: a Volcano ``Job`` is not a ``batch/v1`` Job. The version does not matter where the
pod template sits at the same path in every version (each definition says which versions it was checked
against). A :class:`KindDefinition` lists its :class:`Template`\\ s; a :class:`KindRegistry` holds the
built-in Kubernetes kinds (:data:`BUILTIN_KINDS`), the operator kinds trtguard ships
(:mod:`policies.workload_model._operator_kinds`) and the ``WorkloadKind`` documents of a policy set.

Policies name kinds as Kubernetes writes a GroupKind: ``Kind.group`` (``RayCluster.ray.io``,
``Job.batch.volcano.sh``), or a built-in Kubernetes kind by its bare name (``Deployment``, ``Job``).
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from policies.workload_model._paths import PathPattern

__all__ = [
    "BUILTIN_KINDS",
    "GroupKind",
    "KindDefinition",
    "KindRegistry",
    "Template",
    "TemplateShape",
    "group_of",
    "named_kinds",
    "parse_kind_name",
    "template",
]

TemplateShape = Literal["podTemplate", "podSpec", "container"]
GroupKind = tuple[str, str]
"""``(group, kind)``; the core group is ``""``."""

_KIND_NAME: Final = re.compile(r"(?P<kind>[A-Z][A-Za-z0-9]*)(?:\.(?P<group>[a-z0-9]([a-z0-9.-]*[a-z0-9])?))?")


@dataclass(frozen=True, slots=True)
class Template:
    """One place where a kind keeps (part of) the Pods it makes.

    ``path`` reaches the template's root (a :class:`~policies.workload_model._paths.PathPattern`; a wildcard
    makes one
    template per match). By ``shape`` the root is:

    - ``podTemplate``: a PodTemplateSpec; the pod spec is its ``spec``, the Pods' annotations its
      ``metadata.annotations``;
    - ``podSpec``: a pod spec; ``annotations`` (relative to the root) says where the Pods' annotations are, if
      the kind has such a field; ``containers`` (relative) are single container objects the operator adds to
      these Pods (KServe's ``model``), ``image_uris`` (relative) are model storage URIs that name an OCI
      image (``oci://…``, KServe's ``storageUri``), and ``uri_env`` names an environment variable whose
      ``value`` on a regular container of these Pods is such a URI too (KServe's ``STORAGE_URI``);
    - ``container``: one container object (the operator runs it in a Pod of its own making).

    ``object_annotations``: the object's own ``metadata.annotations`` reach these Pods too (the built-in
    controllers' convention, and KServe's, which copies an InferenceService's annotations to its Pods).
    ``containers_required``: a pod spec without ``containers`` is a problem (KServe's may leave it out).

    ``role`` says what the template is to its kind in messages (``worker group {name}``): ``{name}`` is the
    name of what the pattern's last wildcard matched, its ``name_key`` field (``groupName``) for a list
    item, its key for a map value. ``joins``: a ``container`` template that runs in the Pods of the
    template at that fixed path (KubeRay's autoscaler is a sidecar of the head), so it mounts their
    volumes. ``runs_parent_models``: its Pods run the models of the template whose path encloses it
    (a KServe predictor's ``workerSpec``).
    """

    path: PathPattern
    shape: TemplateShape
    annotations: str | None = None
    containers: tuple[PathPattern, ...] = ()
    image_uris: tuple[PathPattern, ...] = ()
    uri_env: str | None = None
    object_annotations: bool = False
    containers_required: bool = True
    role: str = "pod template"
    name_key: str | None = None
    joins: str | None = None
    runs_parent_models: bool = False

    @property
    def pod_spec(self) -> str:
        """The pattern of the pod spec (of the container, for the ``container`` shape)."""
        return f"{self.path.text}.spec" if self.shape == "podTemplate" else self.path.text

    @property
    def annotations_path(self) -> str | None:
        """The pattern of the Pods' annotations, when the template has them."""
        if self.shape == "podTemplate":
            return f"{self.path.text}.metadata.annotations"
        if self.annotations is not None:
            return f"{self.path.text}.{self.annotations}"
        return None


def template(
    path: str,
    shape: TemplateShape = "podTemplate",
    *,
    annotations: str | None = None,
    containers: Iterable[str] = (),
    image_uris: Iterable[str] = (),
    uri_env: str | None = None,
    object_annotations: bool = False,
    containers_required: bool = True,
    role: str | None = None,
    name_key: str | None = None,
    joins: str | None = None,
    runs_parent_models: bool = False,
) -> Template:
    """A :class:`Template` from pattern texts (raises :class:`~policies.workload_model._paths.PathError`); the
    role defaults
    to what the shape is."""
    return Template(
        PathPattern.parse(path),
        shape,
        annotations,
        tuple(PathPattern.parse(text) for text in containers),
        tuple(PathPattern.parse(text) for text in image_uris),
        uri_env,
        object_annotations,
        containers_required,
        role or _SHAPE_ROLES[shape],
        name_key,
        joins,
        runs_parent_models,
    )


_SHAPE_ROLES: Final[Mapping[TemplateShape, str]] = {
    "podTemplate": "pod template",
    "podSpec": "pod spec",
    "container": "container",
}


@dataclass(frozen=True, slots=True)
class KindDefinition:
    """A workload kind: its group, kind and plural resource name (empty for a ``WorkloadKind``), and where
    its Pods are described.

    ``versions`` are the API versions the paths hold for (empty: every version; an object of another
    version is of a kind trtguard does not know). ``delegates`` are fields that, present in an object with
    none of its templates, mean that its Pods are described by another object, which trtguard checks on its
    own (an Argo Rollout's ``workloadRef``). ``source`` says what the paths were checked against; ``origin``
    is ``builtin``, ``shipped`` or the ``WorkloadKind`` document that defined it.
    """

    group: str
    kind: str
    resource: str
    templates: tuple[Template, ...]
    versions: tuple[str, ...]
    source: str
    origin: str = "shipped"
    delegates: tuple[str, ...] = ()
    namespaced: bool = True

    @property
    def group_kind(self) -> GroupKind:
        """``(group, kind)``."""
        return self.group, self.kind

    @property
    def name(self) -> str:
        """``Kind.group`` (``Kind`` for the core group), as Kubernetes writes a GroupKind."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def single_template(self) -> bool:
        """One template at a fixed path, which no other object may stand in for: a missing one makes the
        object unreadable, and the message names the first key missing (as for the built-in kinds)."""
        return len(self.templates) == 1 and not self.templates[0].path.has_wildcard and not self.delegates


def _builtin(
    group: str,
    kind: str,
    resource: str,
    path: str,
    shape: TemplateShape = "podTemplate",
    role: str = "pod template",
) -> KindDefinition:
    return KindDefinition(
        group,
        kind,
        resource,
        (template(path, shape, object_annotations=True, role=role),),
        versions=(),
        source="Kubernetes API reference",
        origin="builtin",
    )


#: The Pod-bearing kinds of Kubernetes itself. ``extensions`` is the group Deployments, ReplicaSets and
#: DaemonSets had before Kubernetes 1.16; old manifests still carry it, and the paths are the same.
BUILTIN_KINDS: Final[tuple[KindDefinition, ...]] = (
    _builtin("", "Pod", "pods", "spec", "podSpec", "pod"),
    _builtin("", "ReplicationController", "replicationcontrollers", "spec.template"),
    _builtin("", "PodTemplate", "podtemplates", "template"),
    *(
        _builtin(group, kind, resource, "spec.template")
        for group in ("apps", "extensions")
        for kind, resource in (
            ("Deployment", "deployments"),
            ("ReplicaSet", "replicasets"),
            ("DaemonSet", "daemonsets"),
        )
    ),
    _builtin("apps", "StatefulSet", "statefulsets", "spec.template"),
    _builtin("batch", "Job", "jobs", "spec.template"),
    _builtin("batch", "CronJob", "cronjobs", "spec.jobTemplate.spec.template", role="job template"),
)
_BUILTIN_BY_KIND: Final[Mapping[str, tuple[KindDefinition, ...]]] = {
    kind: tuple(d for d in BUILTIN_KINDS if d.kind == kind) for kind in {d.kind for d in BUILTIN_KINDS}
}


def group_of(api_version: str) -> str:
    """The API group of an ``apiVersion`` (``apps/v1`` → ``apps``; ``v1`` → the core group ``""``)."""
    return api_version.rpartition("/")[0]


@functools.cache
def named_kinds(name: str) -> frozenset[GroupKind]:
    """The kinds a policy's kind name selects: ``Kind.group`` that kind, a bare name the built-in kinds of
    that name (``Deployment``: ``apps`` and the old ``extensions``), anything else none (the loader refuses
    names of kinds it does not know)."""
    try:
        kind, group = parse_kind_name(name)
    except ValueError:
        return frozenset()
    if group is not None:
        return frozenset({(group, kind)})
    return frozenset(d.group_kind for d in _BUILTIN_BY_KIND.get(kind, ()))


def parse_kind_name(text: str) -> tuple[str, str | None]:
    """``Kind.group`` → ``(Kind, group)``; a bare ``Kind`` → ``(Kind, None)``. Raises ValueError."""
    found = _KIND_NAME.fullmatch(text)
    if found is None:
        raise ValueError(
            f"{text!r} is not a kind name: write a built-in kind (Deployment) or Kind.group "
            "(RayCluster.ray.io)"
        )
    return found.group("kind"), found.group("group")


@dataclass(frozen=True)
class KindRegistry:
    """The workload kinds of one policy set, by (group, kind)."""

    definitions: tuple[KindDefinition, ...]
    _by_group_kind: dict[GroupKind, KindDefinition] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_group_kind", {d.group_kind: d for d in self.definitions})

    def __iter__(self) -> Iterator[KindDefinition]:
        return iter(self.definitions)

    def get(self, group: str | None, kind: str, version: str | None = None) -> KindDefinition | None:
        """The definition of ``kind`` in ``group`` at ``version`` (None: any version it is defined for); with
        ``group`` None (an object without ``apiVersion``), the built-in Kubernetes kind of that name."""
        if group is None:
            builtin = _BUILTIN_BY_KIND.get(kind)
            return builtin[0] if builtin else None
        definition = self._by_group_kind.get((group, kind))
        if definition is None or version is None or not definition.versions:
            return definition
        return definition if version in definition.versions else None

    def of_api_version(self, api_version: str, kind: str) -> KindDefinition | None:
        """The definition for an object's ``apiVersion`` and ``kind`` (none: the built-in kind)."""
        if not api_version:
            return self.get(None, kind)
        group, _, version = api_version.rpartition("/")
        return self.get(group, kind, version)

    def resolve(self, name: str) -> frozenset[GroupKind]:
        """The kinds a policy's ``match.kinds`` entry names; raises ValueError for an unknown one.

        A bare name is a built-in Kubernetes kind (``Deployment``: ``apps`` and the old ``extensions``);
        any other kind needs its group.
        """
        kind, group = parse_kind_name(name)
        if group is None:
            builtin = _BUILTIN_BY_KIND.get(kind)
            if builtin:
                return frozenset(d.group_kind for d in builtin)
            groups = sorted(d.name for d in self.definitions if d.kind == kind)
            close = difflib.get_close_matches(kind, list(_BUILTIN_BY_KIND), n=3, cutoff=0.75)
            meant = groups or close
            raise ValueError(
                f"{kind!r} is not a built-in Kubernetes kind"
                + (f"; did you mean {' or '.join(meant)}?" if meant else "")
                + " (a built-in kind is named as its manifests name it, singular; any other as Kind.group)"
            )
        if (group, kind) not in self._by_group_kind:
            known = ", ".join(sorted(d.name for d in self.definitions if d.origin != "builtin"))
            raise ValueError(
                f"{name!r} is not a workload kind trtguard knows (known custom kinds: {known or 'none'}); "
                "define it with a WorkloadKind document"
            )
        return frozenset({(group, kind)})

    def with_definitions(self, extra: Iterable[KindDefinition]) -> KindRegistry:
        """This registry with ``extra`` added; one of them replaces a shipped definition of its kind."""
        replaced = {d.group_kind: d for d in extra}
        kept = tuple(d for d in self.definitions if d.group_kind not in replaced)
        return KindRegistry((*kept, *replaced.values()))
