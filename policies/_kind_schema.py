"""The ``WorkloadKind`` policy document, as a pydantic model: a custom resource kind and where it keeps the
Pods it makes (``policies/README.md``, "Workload kinds"; :mod:`policies._workload_kinds` turns it into a
:class:`~policies.workload_model._kinds.KindDefinition`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from policies._strict import Metadata, StrictModel, refuse_repeats
from policies.workload_model import PathError, PathPattern

__all__ = ["WorkloadKindDocument", "WorkloadKindSpec"]

_PATTERNS = "path patterns: keys joined by dots, [*] for every item of a list, * for every value of a map"


class WorkloadKindSpec(StrictModel):
    """Where a custom resource keeps the Pods it makes: pod templates, pod specs and single containers."""

    group: str = Field(
        pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$",
        description="the custom resource's API group, e.g. example.com (the built-in kinds' groups, which "
        "have no dot, are fixed)",
    )
    kind: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$", description="the custom resource's kind")
    versions: list[str] | None = Field(
        default=None,
        min_length=1,
        description="the API versions these paths hold for (e.g. [v1, v1beta1]); absent = every version",
    )
    pod_templates: list[str] = Field(
        default_factory=list, description=f"PodTemplateSpecs (metadata and spec); {_PATTERNS}"
    )
    pod_specs: list[str] = Field(default_factory=list, description=f"PodSpecs; {_PATTERNS}")
    containers: list[str] = Field(default_factory=list, description=f"single container objects; {_PATTERNS}")

    @model_validator(mode="after")
    def _paths(self) -> WorkloadKindSpec:
        paths = [*self.pod_templates, *self.pod_specs, *self.containers]
        if not paths:
            raise ValueError("give at least one of podTemplates, podSpecs and containers")
        for text in paths:
            try:
                PathPattern.parse(text)
            except PathError as error:
                raise ValueError(str(error)) from None
        refuse_repeats(paths, "each path may be listed once")
        return self


class WorkloadKindDocument(StrictModel):
    """A custom resource kind trtguard reads, with the paths of its pod templates."""

    api_version: Literal["trtguard.dev/v1alpha1"]
    kind: Literal["WorkloadKind"]
    metadata: Metadata
    spec: WorkloadKindSpec
