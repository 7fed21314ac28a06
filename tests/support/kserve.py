"""The Pod KServe's pod webhook makes from an InferenceService's predictor whose model is a modelcar.

Modelled on KServe's ``ConfigureModelcarToContainer`` (pkg/webhook/admission/pod and pkg/utils): the model
container becomes ``kserve-container``, told to wait for the model (``MODEL_INIT_MODE=async``) and given the
``kserve-provision-location`` emptyDir at ``/mnt``; the storage URI's image runs as the ``modelcar`` container
(which links ``/proc/$$/root/models`` into that emptyDir and sleeps) and as the ``modelcar-init`` init
container (which pre-fetches it), and the Pod shares one process namespace. Only what trtguard reads is
rendered (no resources, probes or ports).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MODELCAR_SCHEMES", "predictor_pod"]

#: The storage URI schemes KServe serves through a modelcar (``oci+native://`` is an image volume instead).
MODELCAR_SCHEMES: Final = ("oci://", "oci+modelcar://")

_VOLUME: Final = "kserve-provision-location"
#: PodSpec fields a predictor may carry, which KServe copies into the Pod.
_POD_FIELDS: Final = (
    "affinity",
    "hostIPC",
    "hostNetwork",
    "hostPID",
    "imagePullSecrets",
    "initContainers",
    "nodeName",
    "nodeSelector",
    "runtimeClassName",
    "securityContext",
    "serviceAccountName",
    "tolerations",
    "volumes",
)
#: Keys of a predictor's model that are KServe's, not the container's.
_MODEL_KEYS: Final = ("modelFormat", "protocolVersion", "runtime", "storageUri", "storage")


def _storage_uri(predictor: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The modelcar URI of the predictor and its model container, or None when it runs no modelcar."""
    model = predictor.get("model")
    containers = predictor.get("containers") or []
    if model is not None:
        uri = model.get("storageUri", "")
        main = {k: v for k, v in model.items() if k not in _MODEL_KEYS}
        return (uri, main) if uri.startswith(MODELCAR_SCHEMES) and containers == [] else None
    if not containers:
        return None
    first = dict(containers[0])
    uris = [e.get("value", "") for e in first.get("env", []) if e.get("name") == "STORAGE_URI"]
    return (uris[0], first) if len(uris) == 1 and uris[0].startswith(MODELCAR_SCHEMES) else None


def predictor_pod(isvc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The predictor Pod KServe makes from ``isvc``, or None when its predictor is not a modelcar this
    renders (a model container without an image, which KServe takes from a ServingRuntime; other
    components; a model beside custom containers)."""
    spec = isvc["spec"]
    if set(spec) != {"predictor"}:
        return None
    predictor = spec["predictor"]
    found = _storage_uri(predictor)
    if found is None or "workerSpec" in predictor:
        return None
    uri, main = found
    if not main.get("image"):
        return None
    image = uri.split("://", 1)[1]
    main = copy.deepcopy(main)
    main["name"] = "kserve-container"
    main["env"] = [*main.get("env", []), {"name": "MODEL_INIT_MODE", "value": "async"}]
    main["volumeMounts"] = [*main.get("volumeMounts", []), {"name": _VOLUME, "mountPath": "/mnt"}]
    pod_spec: dict[str, Any] = {k: copy.deepcopy(predictor[k]) for k in _POD_FIELDS if k in predictor}
    others = [copy.deepcopy(c) for c in (predictor.get("containers") or [])[1:]]
    pod_spec["containers"] = [
        main,
        *others,
        {
            "name": "modelcar",
            "image": image,
            "args": ["sh", "-c", "ln -sf /proc/$$$$/root/models /mnt/models && sleep infinity"],
            "volumeMounts": [{"name": _VOLUME, "mountPath": "/mnt"}],
        },
    ]
    pod_spec["initContainers"] = [
        *pod_spec.get("initContainers", []),
        {"name": "modelcar-init", "image": image, "args": ["sh", "-c", "echo 'Pre-fetching modelcar'"]},
    ]
    pod_spec["volumes"] = [*pod_spec.get("volumes", []), {"name": _VOLUME, "emptyDir": {}}]
    pod_spec["shareProcessNamespace"] = True
    metadata = isvc["metadata"]
    name = metadata["name"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-predictor-00001",
            "namespace": metadata["namespace"],
            "labels": {"serving.kserve.io/inferenceservice": name, "component": "predictor"},
        },
        "spec": pod_spec,
    }
