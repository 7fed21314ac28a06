"""Which containers of a workload can read an engine: those that read it themselves, and every container
they can hand it to, through storage they share or through each other's processes.

trtguard cannot see what a container does with the bytes it reads, so it counts every way those bytes can
travel between the workload's containers through files. Not the network (a container can always download
what it is not given), nor the network and IPC namespaces every container of a Pod shares (``localhost``,
``/dev/shm``): two cooperating processes pass any bytes through them as over the network, and counting
them would make every container of a Pod a reader of every engine in it. A *channel* is one way through
files; a container can **put** into a channel, **take** from it, or both, and whatever a container can
read, every container that takes from a channel it puts into can read too, transitively, in any order:

- **A volume** of the Pod: a container takes from every volume it mounts (read-only or not) and puts into
  those it mounts writable. A volume is writable unless the mount says ``readOnly: true`` or the volume is
  read-only by its kind or source (:func:`read_only_volume`). An ``emptyDir`` (or a generic ``ephemeral``
  volume) is storage of one Pod: a channel of its template's containers alone. Init, sidecar, regular and
  ephemeral containers all count: an ``emptyDir`` outlives the restarts of the containers that share it.
- **Storage that can outlive the Pod** (:func:`outlives`: a claim, a host path, NFS, CSI, iSCSI, any kind
  trtguard does not know, the claim KServe mounts for a ``pvc://`` URI, …) is storage of the whole
  workload: all of it, in every template, is *one* channel. A pod spec does not say which of these name
  the same storage (two claims bound to one volume, a host path and its parent directory or a link to it,
  an NFS server by name and by address, one share behind two CSI handles), and comparing their names
  would let a second spelling cut the link, so trtguard takes them all for one: a container that reads an
  engine and can write any of it makes every container that mounts any of it a reader. This over-reaches,
  on purpose.
- **A process namespace**: a container reads the files of every container whose processes it sees
  (``/proc/PID/root``), and can write there. With ``shareProcessNamespace`` (which KServe turns on for a
  modelcar, so that the model server reads the modelcar's files) every container of the Pod sees every
  other; an ephemeral container with ``targetContainerName`` and its target see each other, either way
  round (so a debug container that reads the engine hands it to its target as well). Each is a channel
  its containers put into and take from. Plain init containers are counted although they may not run
  beside the others: trtguard does not model when containers run.
- **The node** (:func:`host_access`, :func:`host_path_access`): a container with ``hostPID``, a
  privileged one, one with a capability that reaches past its own files, a Windows host process, or one
  that mounts a host path that may be a directory, a socket or a device reads every container's files on
  its node (their root filesystems and volumes are all there), and may write into them: every container
  of the workload puts into the node's channel (Pods of any template may share a node) and those
  containers take from it and put into it, so any engine of the workload is then read by every container.
  A host directory mounted recursively read-only (``readOnly`` with ``recursiveReadOnly: Enabled``;
  ``type: Directory`` or ``DirectoryOrCreate``) only takes from it; one host file (``File``,
  ``FileOrCreate``) is storage that outlives the Pod and no more. Containers of other workloads on the
  node are beyond what one admission sees.

The graph has one node per container and per channel: a container points to each channel it puts into, a
channel to each container that takes from it. Each Pod's part is gathered by a :class:`PodGraph` while its
pod spec is read; the workload adds the node and joins them. The readers of an engine are the containers
reachable from those that read it directly. :func:`readers` answers for every engine of the workload at
once, in time linear in containers and attachments (strongly connected components, each with the set of
containers it reaches as a bitset), where walking the graph once per engine would multiply them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

from verifier.base import quick_init

__all__ = [
    "HOST",
    "READ_ONLY_KINDS",
    "STORAGE",
    "Attachment",
    "HostAccess",
    "MountMode",
    "PodGraph",
    "PodSharing",
    "host_access",
    "host_path_access",
    "mount_mode",
    "outlives",
    "read_only_volume",
    "readers",
    "turned_on",
]

#: Volume kinds the kubelet always mounts read-only: nothing can be written into them.
READ_ONLY_KINDS: Final = frozenset({"image", "configMap", "secret", "downwardAPI", "projected"})
#: Volume kinds whose storage is made for one Pod and ends with it.
_POD_KINDS: Final = frozenset({"emptyDir", "ephemeral"})
#: The channel of all storage that can outlive a Pod, in every template of the workload.
STORAGE: Final = "\0storage"
#: The channel of the node: every container's files, seen by the containers with host access.
HOST: Final = "\0host"
#: Linux capabilities that reach other containers' files (mounts, raw devices, file handles, kernel code
#: or memory); a container granted one has host access. The others (NET_ADMIN, IPC_LOCK, …) do not.
_HOST_CAPABILITIES: Final = frozenset(
    {"ALL", "SYS_ADMIN", "SYS_MODULE", "SYS_RAWIO", "DAC_READ_SEARCH", "BPF", "PERFMON"}
)
#: Host path types that name one regular file: it holds no other container's files.
_HOST_FILE_TYPES: Final = frozenset({"File", "FileOrCreate"})
_HOST_DIRECTORY_TYPES: Final = frozenset({"Directory", "DirectoryOrCreate"})

Attachment = tuple[int, str, bool, bool]
"""``(container, channel, takes, puts)``: the container reads what is in the channel (``takes``), writes
what it can read into it (``puts``), or both."""

MountMode = Literal["writable", "read-only", "recursive"]
"""How a container mounts a volume: writable, read-only (``readOnly: true``: the mount itself; the mounts
beneath it stay as they are), or recursively read-only (and every mount beneath it)."""

HostAccess = Literal["none", "reads", "full"]
"""What a container reaches of its node: nothing, every container's files to read (``reads``), or to read
and write (``full``)."""


def mount_mode(mount: Mapping[str, Any]) -> MountMode:
    """How the ``volumeMounts`` entry ``mount`` mounts its volume: only ``readOnly: true`` keeps a container
    from writing, and only with ``recursiveReadOnly: Enabled`` the mounts beneath it too (the kubelet then
    refuses to start a container it cannot mount so). ``IfPossible`` does not count: on a container
    runtime or kernel without recursive read-only mounts the kubelet mounts it read-only alone, silently.
    """
    if mount.get("readOnly") is not True:
        return "writable"
    return "recursive" if mount.get("recursiveReadOnly") == "Enabled" else "read-only"


def read_only_volume(volume: Mapping[str, Any]) -> bool:
    """Whether no container can write into ``volume`` (a pod spec's ``volumes`` entry): a read-only kind
    (:data:`READ_ONLY_KINDS`), or a source that says ``readOnly: true`` (a PVC, NFS, CSI, … attached
    read-only for every container). Anything else, a kind trtguard does not know included, is writable."""
    sources = [key for key in volume if key != "name"]
    # No source is an emptyDir (the API server's default); two sources (refused by the API server) are
    # read-only only when both are.
    return bool(sources) and all(
        key in READ_ONLY_KINDS or (isinstance(volume[key], Mapping) and volume[key].get("readOnly") is True)
        for key in sources
    )


def outlives(volume: Mapping[str, Any]) -> bool:
    """Whether ``volume``'s storage can outlive the Pod, and so be reached by other Pods of the workload:
    any source but an ``emptyDir``, a read-only kind (:data:`READ_ONLY_KINDS`) or a generic ``ephemeral``
    volume, and an ``ephemeral`` volume whose claim is not new storage: cloned from a data source (a claim
    or a snapshot, which may hold what another template wrote), bound to a named PersistentVolume
    (``volumeName``) or to one a ``selector`` picks among existing ones. A kind trtguard does not know
    outlives the Pod."""
    return any(
        (key not in _POD_KINDS and key not in READ_ONLY_KINDS) or (key == "ephemeral" and _existing(source))
        for key, source in volume.items()
        if key != "name"
    )


def _existing(source: Any) -> bool:
    """Whether a generic ephemeral volume's claim reaches storage that exists before the Pod: a copy of other
    storage, or a PersistentVolume that is there already (named, or chosen by labels)."""
    template = source.get("volumeClaimTemplate") if isinstance(source, Mapping) else None
    spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(spec, Mapping):
        return False
    keys = ("dataSource", "dataSourceRef", "volumeName", "selector")
    return any(spec.get(key) not in (None, "", {}) for key in keys)


def host_path_access(volume: Mapping[str, Any], mode: MountMode) -> HostAccess:
    """What a container that mounts ``volume`` (``mode``, :func:`mount_mode`) reaches of its node through
    it: a host path that may be a directory, a socket or a device (its ``type`` unsaid included) is
    ``full`` access; a directory mounted recursively read-only, ``reads`` (mounted read-only alone, the
    node's mounts beneath it, other containers' root file systems and volumes, stay writable); one file,
    or no host path, ``none``."""
    source = volume.get("hostPath")
    if source is None:
        return "none"
    kind = source.get("type") if isinstance(source, Mapping) else None
    kind = kind if isinstance(kind, str) else None  # a type of another JSON type is a problem (_podspec)
    if kind in _HOST_FILE_TYPES:
        return "none"
    # A socket needs no writable mount to be used (a read-only container runtime socket is the runtime).
    return "reads" if mode == "recursive" and kind in _HOST_DIRECTORY_TYPES else "full"


def host_access(container: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether ``container`` of the pod spec ``pod`` can read and write every container's files on its
    node, whatever it mounts: the Pod's ``hostPID`` or Windows host process, or the container's own
    ``privileged``, Windows host process or a capability of :data:`_HOST_CAPABILITIES` (``SYS_ADMIN``,
    ``cap_sys_admin``: the container runtime reads names in any case, ``CAP_`` or not). A value other
    than ``false`` counts, as a ``readOnly`` other than ``true`` does not."""
    return _pod_host_access(pod) or _container_host_access(container)


def _pod_host_access(pod: Mapping[str, Any]) -> bool:
    """Whether the pod spec ``pod`` gives every container of it host access (:func:`host_access`): its
    ``hostPID`` or Windows host process."""
    return turned_on(pod.get("hostPID")) or _host_process(pod.get("securityContext"))


def _container_host_access(container: Mapping[str, Any]) -> bool:
    """The container's own part of :func:`host_access`."""
    context = container.get("securityContext")
    if context is None or not isinstance(context, _MAPPINGS):
        return False
    if turned_on(context.get("privileged")) or _host_process(context):
        return True
    capabilities = context.get("capabilities")
    added = capabilities.get("add") if isinstance(capabilities, Mapping) else None
    return isinstance(added, list) and any(
        isinstance(name, str) and name.upper().removeprefix("CAP_") in _HOST_CAPABILITIES for name in added
    )


def turned_on(value: Any) -> bool:
    """Whether a boolean field of a pod spec is on: any value but absent or ``false`` (as a ``readOnly``
    other than ``true`` is writable, a value the API server would refuse counts the way that shares
    more)."""
    return value is not None and value is not False


def _host_process(context: Any) -> bool:
    if context is None:  # the common case, answered without the ABC's checks below
        return False
    options = context.get("windowsOptions") if isinstance(context, _MAPPINGS) else None
    return options is not None and isinstance(options, _MAPPINGS) and turned_on(options.get("hostProcess"))


#: ``isinstance`` against ``Mapping`` alone calls the ABC's check in Python, even for a dict; a dict first
#: answers in C (the same answer: a dict is a Mapping).
_MAPPINGS: Final = (dict, Mapping)


class PodSharing(NamedTuple):
    """One Pod's part of the workload's sharing graph, its containers numbered in the Pod."""

    attachments: list[Attachment]
    """Its volumes, storage that outlives it and process namespaces; the node is the workload's to add."""
    host: list[int]
    """The containers with full access to the node (they read and write every container's files)."""
    host_readers: list[int]
    """The containers that read every container's files on the node (a host directory mounted
    read-only)."""


@quick_init
@dataclass(frozen=True, slots=True)
class _Volume:
    """What the declarations of one volume name make of it: its channel (None: nobody can write it, so it
    carries nothing), whether it is writable, and what a recursively read-only or any other mount of it
    reaches of the node."""

    channel: str | None
    writable: bool
    host_read_only: HostAccess
    host_writable: HostAccess


_ACCESS: Final[dict[HostAccess, int]] = {"none": 0, "reads": 1, "full": 2}


class PodGraph:
    """One Pod's part of the workload's sharing graph, gathered while its pod spec is read (by
    :class:`~policies.workload_model._podspec.PodSpecReader`, which numbers its containers and resolves
    names);
    :meth:`sharing` makes the attachments once every container and volume is read."""

    __slots__ = (
        "_declared",
        "_host",
        "_namespaces",
        "_pod",
        "_pod_host",
        "_shares_processes",
        "_storage",
        "_template",
    )

    def __init__(self, template: str, spec: Mapping[str, Any]) -> None:
        self._template = template
        self._declared: dict[str, list[Mapping[str, Any]]] = {}
        self._host: list[int] = []
        self._namespaces: list[Attachment] = []
        self._storage: list[int] = []
        self._shares_processes = turned_on(spec.get("shareProcessNamespace"))
        # The pod's own part of every container's host access, read once (not once per container).
        self._pod = spec
        self._pod_host = _pod_host_access(spec)

    def volume(self, name: str, volume: Mapping[str, Any]) -> None:
        """One declaration of the volume ``name`` (the API server refuses a second; each then counts)."""
        self._declared.setdefault(name, []).append(volume)

    def container(self, number: int, container: Mapping[str, Any], pod: Mapping[str, Any]) -> None:
        """Container ``number``: whether it has host access by how it runs (:func:`host_access`)."""
        pod_host = self._pod_host if pod is self._pod else _pod_host_access(pod)
        if pod_host or _container_host_access(container):
            self._host.append(number)

    def share_processes(self) -> None:
        """The Pod shares one process namespace, whatever its spec says (a KServe modelcar's Pod)."""
        self._shares_processes = True

    def namespace(self, key: str, numbers: Sequence[int]) -> None:
        """The containers ``numbers`` share the process namespace ``key`` (an ephemeral container's
        target's), with any added under the same key before."""
        channel = f"{self._template}\0processes\0{key}"
        self._namespaces += [(number, channel, True, True) for number in numbers]

    def storage(self, numbers: Sequence[int]) -> None:
        """The containers ``numbers`` mount writable storage that outlives the Pod, beyond the spec's
        mounts (the claim of a KServe ``pvc://`` URI)."""
        self._storage += numbers

    def sharing(self, count: int, mounts: Sequence[tuple[int, str, MountMode]]) -> PodSharing:
        """The attachments of the Pod's ``count`` containers, given its ``mounts`` (``(container, volume
        name, how it is mounted)``): each mount attaches its container to the volume's channel
        (:data:`STORAGE` for storage that can outlive the Pod, else one of this template's own), taking
        from it, and putting into it when the volume and the mount are writable; a shared process
        namespace is a channel its containers put into and take from; and the containers with host
        access, by how they run and what they mount, for the workload to attach to the node."""
        volumes = {name: self._volume(name, declared) for name, declared in self._declared.items()}
        attachments = [(number, STORAGE, True, True) for number in self._storage]
        host, host_readers = set(self._host), set()
        for container, name, mode in mounts:
            volume = volumes.get(name)
            if volume is None:  # the API server refuses a mount of no volume: counted as an emptyDir
                volume = volumes[name] = _Volume(f"{self._template}\0{name}", True, "none", "none")
            if volume.channel is not None:
                attachments.append((container, volume.channel, True, volume.writable and mode == "writable"))
            access = volume.host_read_only if mode == "recursive" else volume.host_writable
            if access == "full":
                host.add(container)
            elif access == "reads":
                host_readers.add(container)
        if self._shares_processes:
            channel = f"{self._template}\0processes"
            attachments += [(number, channel, True, True) for number in range(count)]
        attachments += self._namespaces
        return PodSharing(attachments, sorted(host), sorted(host_readers - host))

    def _volume(self, name: str, declarations: list[Mapping[str, Any]]) -> _Volume:
        """A volume name's channel and access, from every declaration of it, each counted as the one that
        shares more."""
        if len(declarations) == 1:  # the API server's rule: what follows for one, without the folds
            [volume] = declarations
            writable = not read_only_volume(volume)
            channel = STORAGE if outlives(volume) else f"{self._template}\0{name}" if writable else None
            return _Volume(
                channel, writable, host_path_access(volume, "recursive"), host_path_access(volume, "writable")
            )
        writable = not all(read_only_volume(v) for v in declarations)
        channel = (
            STORAGE
            if any(outlives(v) for v in declarations)
            else f"{self._template}\0{name}"
            if writable
            else None
        )
        return _Volume(
            channel,
            writable,
            max((host_path_access(v, "recursive") for v in declarations), key=_ACCESS.__getitem__),
            max((host_path_access(v, "writable") for v in declarations), key=_ACCESS.__getitem__),
        )


def readers(
    count: int, attachments: Sequence[Attachment], seeds: Sequence[Sequence[int]]
) -> list[tuple[int, ...]]:
    """For each seed set (the containers that read one engine directly), every container that can read it.

    Containers are ``0 … count-1``; ``attachments`` say which channels each puts into and takes from
    (:data:`Attachment`). The answer lists container numbers in order.
    """
    if not any(puts for _, _, _, puts in attachments):
        return [tuple(sorted(set(seed))) for seed in seeds]  # nothing can be handed on: each reads alone
    channels: dict[str, int] = {}
    successors: list[list[int]] = [[] for _ in range(count)]
    for container, channel, takes, puts in attachments:
        node = channels.get(channel)
        if node is None:
            node = channels[channel] = len(successors)
            successors.append([])
        if takes:
            successors[node].append(container)
        if puts:
            successors[container].append(node)
    reach = _reach(successors, count)
    answers = []
    for seed in seeds:
        bits = 0
        for container in seed:
            bits |= reach[container]
        answers.append(tuple(i for i, bit in enumerate(reversed(bin(bits)[2:])) if bit == "1"))
    return answers


def _reach(successors: Sequence[Sequence[int]], count: int) -> list[int]:
    """For each container, the bitset of the containers reachable from it (itself included).

    Tarjan's algorithm, iterative: a component is complete only after every component it reaches, so its
    bitset is its own containers with those of the components its edges lead to.
    """
    size = len(successors)
    order = [-1] * size
    low = [0] * size
    component = [-1] * size
    on_stack = [False] * size
    stack: list[int] = []
    component_bits: list[int] = []
    counter = 0
    for root in range(size):
        if order[root] != -1:
            continue
        order[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, 0)]
        while work:
            node, edge = work[-1]
            edges = successors[node]
            if edge < len(edges):
                work[-1] = (node, edge + 1)
                target = edges[edge]
                if order[target] == -1:
                    order[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack[target] = True
                    work.append((target, 0))
                elif on_stack[target]:
                    low[node] = min(low[node], order[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] != order[node]:
                continue
            members = []
            number = len(component_bits)
            while True:
                member = stack.pop()
                on_stack[member] = False
                component[member] = number
                members.append(member)
                if member == node:
                    break
            bits = 0
            for member in members:
                if member < count:
                    bits |= 1 << member
                for target in successors[member]:
                    if component[target] != number:
                        bits |= component_bits[component[target]]
            component_bits.append(bits)
    return [component_bits[component[container]] for container in range(count)]
