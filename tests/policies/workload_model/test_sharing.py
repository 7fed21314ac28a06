"""policies.workload_model._sharing: which containers of a workload can read an engine: the graph against a
fixpoint written
out plainly, what each volume and container shares, and the rule over whole workloads (F1, F2 of the issue 24
review: storage linked by its name, and files read through a process namespace or the node)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Collection, Sequence
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.workload_model._extraction import Workload, extract
from policies.workload_model._sharing import (
    Attachment,
    HostAccess,
    MountMode,
    host_access,
    host_path_access,
    mount_mode,
    outlives,
    read_only_volume,
    readers,
)


def fixpoint(count: int, attachments: Sequence[Attachment], seed: Collection[int]) -> tuple[int, ...]:
    """The rule as the README states it, computed the slow way: repeat until nothing changes."""
    found, written = set(seed), set()
    changed = True
    while changed:
        changed = False
        for container, channel, takes, puts in attachments:
            if container in found and puts and channel not in written:
                written.add(channel)
                changed = True
            if channel in written and takes and container not in found:
                found.add(container)
                changed = True
    return tuple(sorted(found))


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, list[Attachment], list[set[int]]]:
    count = draw(st.integers(1, 8))
    channels = [f"v{i}" for i in range(draw(st.integers(1, 5)))]
    attachments = draw(
        st.lists(
            st.tuples(st.integers(0, count - 1), st.sampled_from(channels), st.booleans(), st.booleans()),
            max_size=16,
        )
    )
    seeds = draw(st.lists(st.sets(st.integers(0, count - 1)), min_size=1, max_size=4))
    return count, attachments, seeds


@settings(max_examples=400, derandomize=True)
@given(graphs())
def test_readers_are_the_fixpoint_of_the_sharing_rule(
    graph: tuple[int, list[Attachment], list[set[int]]],
) -> None:
    count, attachments, seeds = graph
    assert readers(count, attachments, [sorted(s) for s in seeds]) == [
        fixpoint(count, attachments, seed) for seed in seeds
    ]


def test_a_copy_travels_through_every_channel_it_can_be_put_into_in_any_direction() -> None:
    # 0 reads the engine and writes a; 1 reads a and writes b; 2 only reads b: all three can read it.
    attachments = [(0, "a", True, True), (1, "a", True, False), (1, "b", True, True), (2, "b", True, False)]
    attachments.append((3, "c", True, True))
    assert readers(4, attachments, [[0], [2], [3]]) == [(0, 1, 2), (2,), (3,)]
    # 0's read-only mount of a writes nothing there; a container that only puts reads nothing
    assert readers(2, [(0, "a", True, False), (1, "a", True, True)], [[0]]) == [(0,)]
    assert readers(2, [(0, "a", True, True), (1, "a", False, True)], [[0]]) == [(0,)]


def test_many_engines_over_many_containers_take_one_pass() -> None:
    # 400 containers sharing one emptyDir, 100 engines each mounted by one of them: every engine is read by
    # all; the answer lists each container once, in order.
    count = 400
    attachments = [(i, "shared", True, True) for i in range(count)]
    answers = readers(count, attachments, [[i] for i in range(100)])
    assert answers == [tuple(range(count))] * 100


@pytest.mark.parametrize(
    ("volume", "read_only"),
    [
        ({"name": "v", "emptyDir": {}}, False),
        ({"name": "v"}, False),  # no source: the API server makes it an emptyDir
        ({"name": "v", "hostPath": {"path": "/data"}}, False),
        ({"name": "v", "persistentVolumeClaim": {"claimName": "c"}}, False),
        ({"name": "v", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}}, True),
        ({"name": "v", "csi": {"driver": "d", "readOnly": True}}, True),
        ({"name": "v", "csi": {"driver": "d", "readOnly": "true"}}, False),  # only the boolean counts
        ({"name": "v", "configMap": {"name": "c"}}, True),
        ({"name": "v", "secret": {"secretName": "s"}}, True),
        ({"name": "v", "downwardAPI": {}}, True),
        ({"name": "v", "projected": {"sources": []}}, True),
        ({"name": "v", "image": {"reference": "r/e@sha256:" + "0" * 64}}, True),
        ({"name": "v", "image": {"reference": "x"}, "emptyDir": {}}, False),  # two sources: the writable one
        ({"name": "v", "ephemeral": {"volumeClaimTemplate": {}}}, False),
        ({"name": "v", "somethingNew": {}}, False),  # a kind trtguard does not know
    ],
)
def test_what_counts_as_writable(volume: dict[str, object], read_only: bool) -> None:
    assert read_only_volume(volume) is read_only


@pytest.mark.parametrize(
    ("volume", "outliving"),
    [
        ({"name": "v", "persistentVolumeClaim": {"claimName": "models"}}, True),
        ({"name": "v", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}}, True),
        ({"name": "v", "hostPath": {"path": "/data/"}}, True),
        ({"name": "v", "nfs": {"server": "nas", "path": "/export"}}, True),
        ({"name": "v", "csi": {"driver": "d"}}, True),
        ({"name": "v", "iscsi": {"targetPortal": "p", "iqn": "i", "lun": 0}}, True),
        ({"name": "v", "somethingNew": {}}, True),  # a kind trtguard does not know
        ({"name": "v", "gitRepo": {"repository": "r"}}, True),
        ({"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {"dataSource": {"name": "c"}}}}}, True),
        (
            {"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {"dataSourceRef": {"name": "c"}}}}},
            True,
        ),
        # Re-attack F4: a claim bound to an existing PersistentVolume (named, or picked by labels).
        ({"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {"volumeName": "pv-1"}}}}, True),
        (
            {
                "name": "v",
                "ephemeral": {"volumeClaimTemplate": {"spec": {"selector": {"matchLabels": {"a": "b"}}}}},
            },
            True,
        ),
        ({"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {"volumeName": ""}}}}, False),
        ({"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {}}}}}, False),
        ({"name": "v", "ephemeral": "nonsense"}, False),
        ({"name": "v", "emptyDir": {}}, False),
        ({"name": "v"}, False),
        ({"name": "v", "image": {"reference": "r/e:1"}}, False),
        ({"name": "v", "configMap": {"name": "c"}}, False),
        ({"name": "v", "emptyDir": {}, "persistentVolumeClaim": {"claimName": "c"}}, True),  # two sources
    ],
)
def test_storage_that_outlives_a_pod(volume: dict[str, object], outliving: bool) -> None:
    assert outlives(volume) is outliving


@pytest.mark.parametrize(
    ("source", "mode", "access"),
    [
        ({"path": "/etc/localtime", "type": "File"}, "writable", "none"),
        ({"path": "/var/run/x.lock", "type": "FileOrCreate"}, "recursive", "none"),
        ({"path": "/usr/local/nvidia", "type": "Directory"}, "recursive", "reads"),
        ({"path": "/cache", "type": "DirectoryOrCreate"}, "recursive", "reads"),
        ({"path": "/cache", "type": "DirectoryOrCreate"}, "writable", "full"),
        # Re-attack F3: read-only alone, the node's mounts beneath the directory stay writable.
        ({"path": "/", "type": "Directory"}, "read-only", "full"),
        ({"path": "/run/containerd/containerd.sock", "type": "Socket"}, "recursive", "full"),
        ({"path": "/dev/nvme0n1", "type": "BlockDevice"}, "recursive", "full"),
        ({"path": "/dev/mem", "type": "CharDevice"}, "recursive", "full"),
        ({"path": "/var/lib/kubelet"}, "recursive", "full"),  # no type: it may be a socket
        ({"path": "/", "type": ""}, "recursive", "full"),
        ("/", "recursive", "full"),  # malformed: counted as the most it could be
    ],
)
def test_what_a_host_path_reaches_of_the_node(source: object, mode: MountMode, access: HostAccess) -> None:
    assert host_path_access({"name": "v", "hostPath": source}, mode) == access
    assert host_path_access({"name": "v", "emptyDir": {}}, mode) == "none"


@pytest.mark.parametrize(
    ("mount", "mode"),
    [
        ({"name": "v"}, "writable"),
        ({"name": "v", "readOnly": "true"}, "writable"),
        ({"name": "v", "readOnly": True}, "read-only"),
        ({"name": "v", "readOnly": True, "recursiveReadOnly": "Disabled"}, "read-only"),
        # IfPossible falls back to read-only alone where the runtime cannot: it promises nothing more.
        ({"name": "v", "readOnly": True, "recursiveReadOnly": "IfPossible"}, "read-only"),
        ({"name": "v", "readOnly": True, "recursiveReadOnly": "Enabled"}, "recursive"),
        ({"name": "v", "recursiveReadOnly": "Enabled"}, "writable"),  # the API server refuses it
    ],
)
def test_how_a_mount_mounts_its_volume(mount: dict[str, object], mode: MountMode) -> None:
    assert mount_mode(mount) == mode


@pytest.mark.parametrize(
    ("container", "pod", "reaches"),
    [
        ({}, {"hostPID": True}, True),
        ({}, {"hostPID": "yes"}, True),  # what the API server would refuse counts the way that shares more
        ({}, {"hostPID": False}, False),
        ({}, {"securityContext": {"windowsOptions": {"hostProcess": True}}}, True),
        ({"securityContext": {"privileged": True}}, {}, True),
        ({"securityContext": {"privileged": False}}, {}, False),
        ({"securityContext": {"windowsOptions": {"hostProcess": True}}}, {}, True),
        ({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}, {}, True),
        ({"securityContext": {"capabilities": {"add": ["CAP_SYS_MODULE"]}}}, {}, True),
        ({"securityContext": {"capabilities": {"add": ["sys_rawio"]}}}, {}, True),
        ({"securityContext": {"capabilities": {"add": ["NET_ADMIN", "IPC_LOCK", "SYS_NICE"]}}}, {}, False),
        ({"securityContext": {"capabilities": {"drop": ["ALL"]}}}, {}, False),
        ({"securityContext": "privileged"}, {}, False),
        ({}, {}, False),
    ],
)
def test_what_reaches_every_container_on_the_node(
    container: dict[str, Any], pod: dict[str, Any], reaches: bool
) -> None:
    assert host_access(container, pod) is reaches


# --- the rule over whole workloads (policies.workload_model._templates builds the graph from every template)
# -------------

RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
OTHER = "nvcr.io/nvidia/tensorrt@sha256:" + "b2" * 32
ENGINE = "registry.example.com/models/e@sha256:" + "e1" * 32
LWS = "spec.leaderWorkerTemplate"
LEADER, WORKER = f"{LWS}.leaderTemplate.spec.containers[0]", f"{LWS}.workerTemplate.spec.containers[0]"


def _readers(obj: dict[str, Any]) -> tuple[str, ...]:
    found = extract(obj)
    assert isinstance(found, Workload), found
    assert not found.problems, found.problems
    [use] = found.engines
    return use.readers


def _file(path: str) -> dict[str, Any]:
    return {"hostPath": {"path": path, "type": "FileOrCreate"}}


def _lws(
    leader_storage: dict[str, Any], worker_storage: dict[str, Any], **worker_mount: Any
) -> dict[str, Any]:
    """A leader that reads the engine and writes ``leader_storage``; a worker in another image that mounts
    ``worker_storage`` (read-only unless ``worker_mount`` says otherwise) and nothing else."""
    leader = {
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": RUNTIME,
                    "volumeMounts": [
                        {"name": "engine", "mountPath": "/e"},
                        {"name": "out", "mountPath": "/o"},
                    ],
                }
            ],
            "volumes": [
                {"name": "engine", "image": {"reference": ENGINE}},
                {"name": "out", **leader_storage},
            ],
        }
    }
    mount = {"name": "in", "mountPath": "/i", "readOnly": True, **worker_mount}
    worker = {
        "spec": {
            "containers": [{"name": "worker", "image": OTHER, "volumeMounts": [mount]}],
            "volumes": [{"name": "in", **worker_storage}],
        }
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "l"},
        "spec": {"leaderWorkerTemplate": {"leaderTemplate": leader, "workerTemplate": worker}},
    }


@pytest.mark.parametrize(
    ("leader", "worker"),
    [
        # the same storage under another spelling: trtguard cannot tell that these are one
        # (host paths of one file: a directory reaches every container's files, see the host-access test)
        (_file("/data/e.plan"), _file("/data/./e.plan")),
        (_file("/data/e.plan"), _file("//data/e.plan")),
        (_file("/data/e.plan"), _file("/data/../data/e.plan")),
        (_file("/data/e.plan"), _file("/data/link-to-e.plan")),  # a link on the node
        ({"nfs": {"server": "nas.example.com", "path": "/x"}}, {"nfs": {"server": "10.0.0.5", "path": "/x"}}),
        ({"nfs": {"server": "nas", "path": "/x"}}, {"nfs": {"server": "nas", "path": "/"}}),
        # two claims bound to the same volume, or to volumes of the same share
        ({"persistentVolumeClaim": {"claimName": "a"}}, {"persistentVolumeClaim": {"claimName": "b"}}),
        ({"persistentVolumeClaim": {"claimName": "a"}}, {"hostPath": {"path": "/mnt/disks/a"}}),
        # kinds the text comparison never looked at
        ({"csi": {"driver": "efs.csi.aws.com", "volumeAttributes": {"p": "/"}}}, {"csi": {"driver": "x"}}),
        ({"iscsi": {"targetPortal": "10.0.0.9:3260", "iqn": "iqn.x", "lun": 0}}, {"fc": {"wwids": ["w"]}}),
        ({"cephfs": {"monitors": ["m:6789"]}}, {"cephfs": {"monitors": ["10.0.0.7:6789"]}}),
        (
            {"azureFile": {"secretName": "s", "shareName": "m"}},
            {"glusterfs": {"endpoints": "e", "path": "m"}},
        ),
        ({"somethingNew": {"share": "m"}}, {"persistentVolumeClaim": {"claimName": "m"}}),
        # a claim the worker attaches read-only still reads what the leader wrote
        (
            {"nfs": {"server": "nas", "path": "/x"}},
            {"nfs": {"server": "nas", "path": "/x", "readOnly": True}},
        ),
        # an ephemeral volume cloned from a claim reads what the leader wrote there
        (
            {"persistentVolumeClaim": {"claimName": "models"}},
            {
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {"dataSource": {"kind": "PersistentVolumeClaim", "name": "m"}}
                    }
                }
            },
        ),
    ],
)
def test_all_storage_that_outlives_a_pod_is_one_volume_of_the_workload(
    leader: dict[str, Any], worker: dict[str, Any]
) -> None:
    # Issue 24 review F1: the link between two templates' storage was the text of its name; any second
    # spelling of the same storage broke it, and the worker ran the engine in another image unseen.
    assert _readers(_lws(leader, worker)) == (LEADER, WORKER)


@pytest.mark.parametrize(
    ("leader", "worker", "mount"),
    [
        # storage of one Pod alone reaches no other template's Pods
        ({"emptyDir": {}}, {"emptyDir": {}}, {}),
        ({"emptyDir": {}}, {"persistentVolumeClaim": {"claimName": "m"}}, {}),
        (
            {"ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"persistentVolumeClaim": {"claimName": "m"}},
            {},
        ),
        # nothing the leader can write: a read-only claim, a read-only mount
        (
            {"persistentVolumeClaim": {"claimName": "m", "readOnly": True}},
            {"nfs": {"server": "n", "path": "/"}},
            {},
        ),
        ({"configMap": {"name": "m"}}, {"persistentVolumeClaim": {"claimName": "m"}}, {}),
    ],
)
def test_storage_of_one_pod_or_that_nobody_writes_hands_nothing_on(
    leader: dict[str, Any], worker: dict[str, Any], mount: dict[str, Any]
) -> None:
    assert _readers(_lws(leader, worker, **mount)) == (LEADER,)


def test_a_read_only_mount_of_shared_storage_writes_nothing_there() -> None:
    obj = _lws({"persistentVolumeClaim": {"claimName": "a"}}, {"persistentVolumeClaim": {"claimName": "b"}})
    obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["volumeMounts"][1][
        "readOnly"
    ] = True
    assert _readers(obj) == (LEADER,)


def _pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A Pod whose first container reads the engine (mounts its image volume), with ``containers`` beside it
    that mount nothing (unless they say so)."""
    server = {"name": "server", "image": RUNTIME, "volumeMounts": [{"name": "engine", "mountPath": "/e"}]}
    return copy.deepcopy(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "containers": [server, *containers],
                "volumes": [{"name": "engine", "image": {"reference": ENGINE}}],
                **spec,
            },
        }
    )


SHADOW = {"name": "shadow", "image": OTHER}
SIDECAR = {"name": "sidecar", "image": OTHER, "restartPolicy": "Always"}
DEBUG = {"name": "debug", "image": OTHER}


def test_a_shared_process_namespace_lets_every_container_read_every_other() -> None:
    # Issue 24 review F2: with shareProcessNamespace each container reads the others' files through
    # /proc/PID/root, no volume needed; none of them counted.
    obj = _pod(SHADOW, shareProcessNamespace=True, initContainers=[SIDECAR], ephemeralContainers=[DEBUG])
    assert _readers(obj) == (
        "spec.containers[0]",
        "spec.containers[1]",
        "spec.initContainers[0]",
        "spec.ephemeralContainers[0]",
    )
    # Either way round: the shadow that mounts the engine hands it to the server that does not.
    obj["spec"]["containers"][0]["volumeMounts"] = []
    obj["spec"]["containers"][1]["volumeMounts"] = [{"name": "engine", "mountPath": "/e"}]
    assert _readers(obj)[:2] == ("spec.containers[0]", "spec.containers[1]")
    for value in (False, None):
        assert _readers(_pod(SHADOW, shareProcessNamespace=value)) == ("spec.containers[0]",)


def test_an_ephemeral_container_shares_the_process_namespace_of_its_target() -> None:
    # kubectl debug --target=server: the debug container sees the server's processes, and they see its.
    assert _readers(_pod(SHADOW, ephemeralContainers=[{**DEBUG, "targetContainerName": "server"}])) == (
        "spec.containers[0]",
        "spec.ephemeralContainers[0]",
    )
    # A debug container that reads the engine hands it to its target, and only to it.
    reading = {
        **DEBUG,
        "targetContainerName": "shadow",
        "volumeMounts": [{"name": "engine", "mountPath": "/"}],
    }
    obj = _pod(SHADOW, {"name": "other", "image": OTHER}, ephemeralContainers=[reading])
    assert _readers(obj) == ("spec.containers[0]", "spec.containers[1]", "spec.ephemeralContainers[0]")
    # Targeting a container that does not read it reads nothing.
    assert _readers(_pod(SHADOW, ephemeralContainers=[{**DEBUG, "targetContainerName": "shadow"}])) == (
        "spec.containers[0]",
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("ghost", "targets container 'ghost', which the pod spec lacks"),
        (7, "targetContainerName must be a string, found a number"),
    ],
)
def test_an_ephemeral_container_targeting_no_container_is_a_problem(target: Any, message: str) -> None:
    found = extract(_pod(ephemeralContainers=[{**DEBUG, "targetContainerName": target}]))
    assert isinstance(found, Workload)
    [problem] = found.problems
    assert problem.path == "spec.ephemeralContainers[0].targetContainerName"
    assert message in problem.message


def test_a_kserve_modelcar_pod_shares_its_process_namespace() -> None:
    # KServe runs an oci:// model as a modelcar container and makes the Pod share its process namespace so
    # that the model server reads the modelcar's files: every container of the predictor reads the engine.
    predictor: dict[str, Any] = {
        "initContainers": [SIDECAR],
        "model": {"modelFormat": {"name": "tensorrt"}, "image": RUNTIME, "storageUri": f"oci://{ENGINE}"},
        "workerSpec": {"containers": [{"name": "worker", "image": RUNTIME}], "initContainers": [SIDECAR]},
    }
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "i"},
        "spec": {"predictor": predictor},
    }
    workers = "spec.predictor.workerSpec"
    assert _readers(isvc) == (
        "spec.predictor.initContainers[0]",
        "spec.predictor.model",
        f"{workers}.containers[0]",
        f"{workers}.initContainers[0]",  # the workers' Pods run the model the same way
    )
    # oci+native:// mounts the model as an image volume of the model container: no namespace is shared.
    predictor["model"]["storageUri"] = f"oci+native://{ENGINE}"
    assert _readers(isvc) == ("spec.predictor.model", f"{workers}.containers[0]")


EVERY = ("spec.containers[0]", "spec.containers[1]", "spec.initContainers[0]", "spec.ephemeralContainers[0]")


@pytest.mark.parametrize(
    "shadow",
    [
        {"securityContext": {"privileged": True}},
        {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
        {"securityContext": {"capabilities": {"add": ["cap_dac_read_search"]}}},  # any case, CAP_ or not
        {"securityContext": {"capabilities": {"add": ["ALL"]}}},
        {"securityContext": {"windowsOptions": {"hostProcess": True}}},
        {"volumeMounts": [{"name": "host", "mountPath": "/h", "readOnly": True}]},  # may be a socket
        {"volumeMounts": [{"name": "dir", "mountPath": "/h"}]},  # a directory it can write
    ],
)
def test_a_container_with_host_access_reads_and_writes_every_container(shadow: dict[str, Any]) -> None:
    # A container that reaches the node (the host's processes, devices or files) reads every container's
    # files there, and can put what it reads into any of them: every container reads the engine.
    volumes = [
        {"name": "engine", "image": {"reference": ENGINE}},
        {"name": "host", "hostPath": {"path": "/run/containerd/containerd.sock"}},
        {"name": "dir", "hostPath": {"path": "/var/lib", "type": "Directory"}},
    ]
    obj = _pod({**SHADOW, **shadow}, initContainers=[SIDECAR], ephemeralContainers=[DEBUG], volumes=volumes)
    assert _readers(obj) == EVERY
    # The same when the container with host access is the one that reads the engine.
    obj["spec"]["containers"][0]["volumeMounts"] = []
    obj["spec"]["initContainers"][0]["volumeMounts"] = [{"name": "engine", "mountPath": "/e"}]
    assert _readers(obj) == EVERY


def test_host_pid_reads_every_container_of_the_workload_in_any_template() -> None:
    # Issue 24 review F2: a Pod with hostPID sees every process of its node, those of the workload's other
    # templates' Pods included (they may share the node).
    obj = _lws({"emptyDir": {}}, {"emptyDir": {}})
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["hostPID"] = True
    assert _readers(obj) == (LEADER, WORKER)


def test_a_recursively_read_only_host_directory_reads_every_container_and_writes_none() -> None:
    directory = {"name": "drivers", "hostPath": {"path": "/usr/local/nvidia", "type": "Directory"}}
    mount = {
        "name": "drivers",
        "mountPath": "/usr/local/nvidia",
        "readOnly": True,
        "recursiveReadOnly": "Enabled",
    }
    volumes = [{"name": "engine", "image": {"reference": ENGINE}}, directory]
    # The shadow that mounts the node's directory may find the server's files there.
    obj = _pod({**SHADOW, "volumeMounts": [mount]}, DEBUG, volumes=volumes)
    assert _readers(obj) == ("spec.containers[0]", "spec.containers[1]")
    # Re-attack F3: read-only alone (or IfPossible), the node's mounts beneath it (other containers' root
    # file systems and volumes) stay writable: the shadow can hand the engine to every container.
    for weaker in ("IfPossible", "Disabled", None):
        obj["spec"]["containers"][1]["volumeMounts"] = [{**mount, "recursiveReadOnly": weaker}]
        assert _readers(obj) == ("spec.containers[0]", "spec.containers[1]", "spec.containers[2]")
    obj["spec"]["containers"][1]["volumeMounts"] = [mount]
    # The server that mounts it writes nothing there: the others read nothing through it.
    obj["spec"]["containers"][1]["volumeMounts"] = []
    obj["spec"]["containers"][0]["volumeMounts"].append(mount)
    assert _readers(obj) == ("spec.containers[0]",)
    # One file of the node (File, FileOrCreate) holds no other container's files.
    file_mount = {**mount, "readOnly": False}
    obj["spec"]["volumes"][1]["hostPath"] = {"path": "/etc/localtime", "type": "File"}
    obj["spec"]["containers"][1]["volumeMounts"] = [file_mount]
    assert _readers(obj) == ("spec.containers[0]",)


@pytest.mark.parametrize(
    "context", [{"privileged": False}, {"capabilities": {"add": ["NET_ADMIN", "IPC_LOCK"]}}]
)
def test_no_host_access_reads_nothing_more(context: dict[str, Any]) -> None:
    assert _readers(_pod({**SHADOW, "securityContext": context})) == ("spec.containers[0]",)


def test_the_workloads_graph_grows_linearly_with_its_containers(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every kind of channel at once, built to multiply: containers of one repeated name, each mounting
    # shared storage, a host path and an emptyDir, in one process namespace, on a node they reach, with as
    # many ephemeral containers all targeting that name. The graph has a fixed number of attachments per
    # container (a target's containers join its channel once, not once per ephemeral container).
    sizes: list[int] = []

    def counting(count: int, attachments: Sequence[Attachment], seeds: Sequence[Sequence[int]]) -> Any:
        sizes.append(len(attachments))
        return readers(count, attachments, seeds)

    monkeypatch.setattr("policies.workload_model._templates.readers", counting)
    mounts = [{"name": n, "mountPath": f"/{n}"} for n in ("claim", "host", "scratch")]

    def wide(n: int) -> dict[str, Any]:
        return _pod(
            *({"name": "server", "image": OTHER, "volumeMounts": mounts} for _ in range(n)),
            ephemeralContainers=[{**DEBUG, "targetContainerName": "server"} for _ in range(n)],
            shareProcessNamespace=True,
            hostPID=True,
            volumes=[
                {"name": "engine", "image": {"reference": ENGINE}},
                {"name": "claim", "persistentVolumeClaim": {"claimName": "c"}},
                {"name": "host", "hostPath": {"path": "/x", "type": "File"}},
                {"name": "scratch", "emptyDir": {}},
            ],
        )

    found = [extract(wide(n)) for n in (50, 100, 150, 200)]
    # 9 a server and its debug container: 3 mounts, and 2 each for the Pod's process namespace, the
    # target's and the node
    assert [b - a for a, b in itertools.pairwise(sizes)] == [9 * 50] * 3
    for workload in found:
        assert isinstance(workload, Workload)
        assert len(workload.engines[0].readers) == len(workload.templates[0].containers)


def test_a_kserve_claim_uri_mounts_storage_that_outlives_the_pod() -> None:
    # KServe mounts the claim of `storageUri: pvc://CLAIM/PATH` into the model container, a mount the pod
    # spec never shows: a transformer in the builder image that copies the engine into any claim hands it
    # to the model server.
    transformer = {
        "containers": [
            {
                "name": "t",
                "image": RUNTIME,
                "volumeMounts": [{"name": "engine", "mountPath": "/e"}, {"name": "out", "mountPath": "/o"}],
            }
        ],
        "volumes": [
            {"name": "engine", "image": {"reference": ENGINE}},
            {"name": "out", "persistentVolumeClaim": {"claimName": "scratch"}},
        ],
    }
    model = {"modelFormat": {"name": "tensorrt"}, "image": OTHER, "storageUri": "pvc://models/e"}
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "i"},
        "spec": {"predictor": {"model": model}, "transformer": transformer},
    }
    assert _readers(isvc) == ("spec.predictor.model", "spec.transformer.containers[0]")
    model["storageUri"] = "s3://bucket/e"  # the network: beyond what the rule counts
    assert _readers(isvc) == ("spec.transformer.containers[0]",)


def _storage_uri(value: str) -> list[dict[str, str]]:
    return [{"name": "STORAGE_URI", "value": value}]


def test_a_containers_storage_uri_variable_is_shared_as_a_storage_uri_is() -> None:
    # KServe fetches a custom container's STORAGE_URI exactly as a storageUri (issue 28 review, F1): an
    # oci:// one runs as a modelcar, so the transformer's Pods share their process namespace, and its
    # init sidecar reads the engine too; oci+native:// is an image volume of the regular containers only.
    transformer: dict[str, Any] = {
        "containers": [
            {"name": "kserve-container", "image": RUNTIME, "env": _storage_uri(f"oci://{ENGINE}")},
            {"name": "proxy", "image": OTHER},
        ],
        "initContainers": [SIDECAR],
    }
    predictor: dict[str, Any] = {
        "model": {"modelFormat": {"name": "onnx"}, "image": OTHER, "storageUri": "s3://b/m"}
    }
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "i"},
        "spec": {"predictor": predictor, "transformer": transformer},
    }
    every = (
        "spec.transformer.containers[0]",
        "spec.transformer.containers[1]",
        "spec.transformer.initContainers[0]",
    )
    assert _readers(isvc) == every
    transformer["containers"][0]["env"] = _storage_uri(f"oci+native://{ENGINE}")
    assert _readers(isvc) == ("spec.transformer.containers[0]", "spec.transformer.containers[1]")
    # pvc://: KServe mounts the claim into the container; a container of the predictor copies the engine
    # into a claim of its own, so the transformer reads it from storage that outlives the Pod.
    transformer["containers"][0]["env"] = _storage_uri("pvc://models/e")
    predictor["containers"] = [
        {
            "name": "copier",
            "image": RUNTIME,
            "volumeMounts": [{"name": "engine", "mountPath": "/e"}, {"name": "out", "mountPath": "/o"}],
        }
    ]
    predictor["volumes"] = [
        {"name": "engine", "image": {"reference": ENGINE}},
        {"name": "out", "persistentVolumeClaim": {"claimName": "scratch"}},
    ]
    assert _readers(isvc) == (
        "spec.predictor.containers[0]",
        "spec.transformer.containers[0]",
        "spec.transformer.containers[1]",
    )


VOLUME_KINDS: Final[dict[str, dict[str, Any]]] = {
    "emptyDir": {"emptyDir": {}},
    "claim-a": {"persistentVolumeClaim": {"claimName": "a"}},
    "claim-b": {"persistentVolumeClaim": {"claimName": "b", "readOnly": True}},
    "host-file": {"hostPath": {"path": "/m/e.plan", "type": "File"}},
    "host-dir": {"hostPath": {"path": "/m", "type": "Directory"}},
    "nfs": {"nfs": {"server": "nas", "path": "/"}},
    "configMap": {"configMap": {"name": "c"}},
}


@st.composite
def lws_workloads(draw: st.DrawFn) -> dict[str, Any]:
    """A LeaderWorkerSet whose two templates draw containers, mounts (of the engine, and of volumes of every
    kind), process namespaces and host access; the leader's first container always reads the engine."""

    def template(leader: bool) -> dict[str, Any]:
        names = [f"c{i}" for i in range(draw(st.integers(1, 3)))]
        volumes = sorted(draw(st.sets(st.sampled_from(sorted(VOLUME_KINDS)), max_size=4)))
        contexts = st.sampled_from([{}, {"privileged": True}, {"capabilities": {"add": ["SYS_ADMIN"]}}])
        containers = []
        for index, name in enumerate(names):
            mounted = draw(st.lists(st.sampled_from(volumes), unique=True)) if volumes else []
            mounts = [{"name": v, "mountPath": f"/{v}", "readOnly": draw(st.booleans())} for v in mounted]
            if leader and (index == 0 or draw(st.booleans())):
                mounts.append({"name": "engine", "mountPath": "/engine"})
            containers.append(
                {"name": name, "image": OTHER, "volumeMounts": mounts, "securityContext": draw(contexts)}
            )
        spec: dict[str, Any] = {
            "containers": containers,
            "volumes": [{"name": v, **VOLUME_KINDS[v]} for v in volumes],
            "shareProcessNamespace": draw(st.booleans()),
            "hostPID": draw(st.booleans()),
        }
        if draw(st.booleans()):
            spec["ephemeralContainers"] = [{**DEBUG, "targetContainerName": draw(st.sampled_from(names))}]
        if leader:
            spec["volumes"].append({"name": "engine", "image": {"reference": ENGINE}})
        return {"spec": spec}

    leader, worker = template(True), template(False)
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "l"},
        "spec": {"leaderWorkerTemplate": {"leaderTemplate": leader, "workerTemplate": worker}},
    }


def _features(obj: dict[str, Any]) -> list[tuple[str, ...]]:
    """Every sharing feature of ``obj`` that is off, as a path of keys to turn it on."""
    found: list[tuple[str, ...]] = []
    for role in ("leaderTemplate", "workerTemplate"):
        spec = obj["spec"]["leaderWorkerTemplate"][role]["spec"]
        found += [(role, key) for key in ("shareProcessNamespace", "hostPID") if not spec[key]]
        for i, container in enumerate(spec["containers"]):
            found += [
                (role, str(i), "mount", str(j))
                for j, m in enumerate(container["volumeMounts"])
                if m.get("readOnly")
            ]
            if not container["securityContext"]:
                found.append((role, str(i), "privileged"))
    return found


def _turn_on(obj: dict[str, Any], feature: tuple[str, ...]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    spec = obj["spec"]["leaderWorkerTemplate"][feature[0]]["spec"]
    if len(feature) == 2:
        spec[feature[1]] = True
    elif feature[2] == "mount":
        spec["containers"][int(feature[1])]["volumeMounts"][int(feature[3])]["readOnly"] = False
    else:
        spec["containers"][int(feature[1])]["securityContext"] = {"privileged": True}
    return obj


@settings(max_examples=200, derandomize=True, deadline=None)
@given(lws_workloads(), st.data())
def test_more_sharing_never_leaves_a_reader_out(obj: dict[str, Any], data: st.DataObject) -> None:
    # The rule over-reaches on purpose, never under: turning on any way of sharing (a process namespace,
    # host access, a writable mount) keeps every reader, so it can never turn a denial into an admission.
    features = _features(obj)
    if not features:
        return
    feature = data.draw(st.sampled_from(features))
    before, after = _readers(obj), _readers(_turn_on(obj, feature))
    assert set(before) <= set(after), feature
