"""The operator kinds trtguard ships: where KServe, KubeRay, LeaderWorkerSet, Argo Rollouts, Kubeflow and
Volcano keep the Pods their custom resources make.

Each definition was checked against the project's published CRD schema (every object with a ``containers``
list or an ``image`` field under ``spec`` is a template or container here, and every path here is in the
schema: ``tests/policies/workload_model/test_operator_kinds.py`` holds that against
``tests/data/500-operator-crds``) and
its examples (``tests/data/501-operator-manifests``). ``source`` names the CRD file and commit.
"""

from __future__ import annotations

from typing import Final

from policies.workload_model._kinds import BUILTIN_KINDS, KindDefinition, KindRegistry, Template, template

__all__ = ["DEFAULT_KINDS", "OPERATOR_KINDS"]

_KSERVE = "kserve/kserve@aaac4e29 config/crd/full/serving.kserve.io_{}.yaml"
_KUBERAY = "ray-project/kuberay@feeaf72f ray-operator/config/crd/bases/ray.io_{}.yaml"
_VOLCANO = "volcano-sh/volcano@ed72c7c8 config/crd/volcano/bases/batch.volcano.sh_{}.yaml"
_TRAINING = "kubeflow/training-operator@078ec30f (release-1.9) manifests/base/crds/kubeflow.org_{}.yaml"

#: KServe's model-serving containers: the predictor's ``model`` and the framework shorthands, each one
#: container the operator puts into the predictor's Pods (its image may be left to the ServingRuntime).
_KSERVE_MODELS: Final = (
    "model",
    "huggingface",
    "lightgbm",
    "onnx",
    "paddle",
    "pmml",
    "pytorch",
    "sklearn",
    "tensorflow",
    "triton",
    "xgboost",
)
#: Model storage URIs; ``oci://`` ones are images the Pod pulls (a modelcar container or an image volume).
_KSERVE_URIS: Final = (*(f"{m}.storageUri" for m in _KSERVE_MODELS), "storageUris[*].uri")
#: KServe takes a custom container's model from this environment variable exactly as from ``storageUri``
#: (storage initializer, modelcar, ``oci+native`` image volume or claim: ``GetStorageUri`` in
#: pkg/apis/serving/v1beta1/{predictor,transformer,explainer}_custom.go of the commit in ``_KSERVE``). It
#: reads the variable of one container, picked by names it defaults (the predictor's ``kserve-container``,
#: a transformer's or explainer's first); every regular container of every KServe pod spec is read here,
#: a ServingRuntime's (merged into the model container) and the workers' included, so that no value the
#: model server is given goes unjudged. The name is matched exactly, as KServe and Kubernetes match it.
_KSERVE_URI_ENV: Final = "STORAGE_URI"


def _predictor(path: str, *, role: str, object_annotations: bool) -> tuple[Template, ...]:
    return (
        template(
            path,
            "podSpec",
            annotations="annotations",
            containers=_KSERVE_MODELS,
            image_uris=_KSERVE_URIS,
            uri_env=_KSERVE_URI_ENV,
            object_annotations=object_annotations,
            containers_required=False,
            role=role,
        ),
        # Merged by KServe with the ServingRuntime's workerSpec, so it may name no container. Its Pods run
        # the predictor's model (multi-node serving), so they read what the predictor's containers read.
        template(
            f"{path}.workerSpec",
            "podSpec",
            uri_env=_KSERVE_URI_ENV,
            containers_required=False,
            role=f"{role} workers",
            runs_parent_models=True,
        ),
    )


def _ray_cluster(prefix: str) -> tuple[Template, ...]:
    head = f"{prefix}.headGroupSpec.template"
    return (
        template(head, role="head"),
        template(f"{prefix}.workerGroupSpecs[*].template", role="worker group {name}", name_key="groupName"),
        # The autoscaler and history collector run as sidecars of the head Pod (mounting its volumes);
        # without an image, the operator uses the head's Ray image.
        template(f"{prefix}.autoscalerOptions", "container", role="autoscaler", joins=head),
        template(
            f"{prefix}.historyServerOptions.collectorOptions",
            "container",
            role="history collector",
            joins=head,
        ),
    )


def _serving_runtime(kind: str, resource: str, *, namespaced: bool) -> KindDefinition:
    return KindDefinition(
        "serving.kserve.io",
        kind,
        resource,
        (
            template("spec", "podSpec", annotations="annotations", uri_env=_KSERVE_URI_ENV, role="runtime"),
            template(
                "spec.workerSpec",
                "podSpec",
                uri_env=_KSERVE_URI_ENV,
                containers_required=False,
                role="runtime workers",
                runs_parent_models=True,
            ),
        ),
        versions=("v1alpha1",),
        source=_KSERVE.format(resource),
        namespaced=namespaced,
    )


def _ray(
    kind: str,
    resource: str,
    spec: str,
    *,
    job: bool = False,
    versions: tuple[str, ...] = ("v1", "v1alpha1"),  # v1alpha1 has no historyServerOptions
) -> KindDefinition:
    """A KubeRay kind whose Ray cluster is described at ``spec``; a ``job``'s at ``spec.rayClusterSpec``,
    beside its submitter Pod. A job may instead run on an existing RayCluster (checked on its own), named
    by ``spec.clusterSelector``, with KubeRay's default submitter."""
    if not job:
        templates = _ray_cluster(spec)
    else:
        templates = (
            *_ray_cluster(f"{spec}.rayClusterSpec"),
            template(f"{spec}.submitterPodTemplate", role="submitter"),
        )
    return KindDefinition(
        "ray.io",
        kind,
        resource,
        templates,
        versions=versions,
        source=_KUBERAY.format(resource),
        delegates=(f"{spec}.clusterSelector",) if job else (),
    )


def _training_job(
    kind: str,
    resource: str,
    replica_specs: str,
    *,
    versions: tuple[str, ...] = ("v1",),
    source: str = "",
) -> KindDefinition:
    """A Kubeflow training job: one Pod template per replica type, in ``spec.<replica_specs>``."""
    return KindDefinition(
        "kubeflow.org",
        kind,
        resource,
        (template(f"spec.{replica_specs}.*.template", role="replica {name}"),),
        versions=versions,
        source=source or _TRAINING.format(resource),
    )


def _volcano_job(kind: str, resource: str, job_spec: str) -> KindDefinition:
    """A Volcano kind: one Pod template per task of the job spec at ``job_spec``."""
    return KindDefinition(
        "batch.volcano.sh",
        kind,
        resource,
        (template(f"{job_spec}.tasks[*].template", role="task {name}", name_key="name"),),
        versions=("v1alpha1",),
        source=_VOLCANO.format(resource),
    )


#: The shipped operator kinds.
OPERATOR_KINDS: Final[tuple[KindDefinition, ...]] = (
    KindDefinition(
        "serving.kserve.io",
        "InferenceService",
        "inferenceservices",
        (
            *_predictor("spec.predictor", role="predictor", object_annotations=True),
            *_predictor("spec.canary[*].predictor", role="canary {name} predictor", object_annotations=False),
            template(
                "spec.transformer",
                "podSpec",
                annotations="annotations",
                image_uris=("storageUris[*].uri",),
                uri_env=_KSERVE_URI_ENV,
                role="transformer",
            ),
            template(
                "spec.explainer",
                "podSpec",
                annotations="annotations",
                containers=("art",),
                image_uris=("art.storageUri", "storageUris[*].uri"),
                uri_env=_KSERVE_URI_ENV,
                containers_required=False,
                role="explainer",
            ),
        ),
        versions=("v1beta1",),
        source=_KSERVE.format("inferenceservices"),
    ),
    _serving_runtime("ServingRuntime", "servingruntimes", namespaced=True),
    _serving_runtime("ClusterServingRuntime", "clusterservingruntimes", namespaced=False),
    _ray("RayCluster", "rayclusters", "spec"),
    _ray("RayService", "rayservices", "spec.rayClusterConfig"),
    _ray("RayJob", "rayjobs", "spec", job=True),
    _ray("RayCronJob", "raycronjobs", "spec.jobTemplate", job=True, versions=("v1",)),
    KindDefinition(
        "leaderworkerset.x-k8s.io",
        "LeaderWorkerSet",
        "leaderworkersets",
        (
            template("spec.leaderWorkerTemplate.leaderTemplate", role="leader"),
            template("spec.leaderWorkerTemplate.workerTemplate", role="worker"),
        ),
        versions=("v1",),
        source="kubernetes-sigs/lws@060ab4da config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    ),
    KindDefinition(
        "argoproj.io",
        "Rollout",
        "rollouts",
        (template("spec.template"),),
        versions=("v1alpha1",),
        source="argoproj/argo-rollouts@9f8d111d manifests/crds/rollout-crd.yaml",
        # A Rollout may take its pod template from a Deployment, which is checked on its own.
        delegates=("spec.workloadRef",),
    ),
    _training_job(
        "MPIJob",
        "mpijobs",
        "mpiReplicaSpecs",
        versions=("v2beta1", "v1"),  # mpi-operator and training-operator
        source="kubeflow/mpi-operator@caa3c47f manifests/base/kubeflow.org_mpijobs.yaml; "
        + _TRAINING.format("mpijobs"),
    ),
    _training_job("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs"),
    _training_job("TFJob", "tfjobs", "tfReplicaSpecs"),
    KindDefinition(
        "kubeflow.org",
        "Notebook",
        "notebooks",
        (template("spec.template"),),
        versions=("v1", "v1beta1", "v1alpha1"),
        source="kubeflow/kubeflow@6dbe5161 "
        "components/notebook-controller/config/crd/bases/kubeflow.org_notebooks.yaml",
    ),
    _volcano_job("Job", "jobs", "spec"),
    _volcano_job("CronJob", "cronjobs", "spec.jobTemplate.spec"),
)

#: The built-in Kubernetes kinds and the shipped operator kinds: what a policy set knows without any
#: ``WorkloadKind`` document.
DEFAULT_KINDS: Final = KindRegistry((*BUILTIN_KINDS, *OPERATOR_KINDS))
