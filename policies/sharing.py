"""Which containers of a workload can read an engine: those that read it themselves, and every container
they can hand it to through a volume they share.

trtguard cannot see what a container does with the bytes it reads, so a container that reads an engine and
mounts a *writable* volume may copy the engine there, and every container that mounts that volume (even
read-only) can read it, and may copy it on in turn. A volume is writable to a container unless the mount
says ``readOnly: true`` or the volume is read-only by its kind (:func:`read_only_volume`). Init, sidecar,
regular and ephemeral containers all count, in any order: an ``emptyDir`` outlives the restarts of the
containers that share it. Storage that outlives a Pod reaches the Pods of the workload's other templates
too: volumes of two templates backed by the same claim, host path or NFS export (:func:`backing`) are one.

The graph has one node per container and per writable volume: a container points to each writable volume
it mounts writable, a volume to each container that mounts it. The readers of an engine are the containers
reachable from the containers that read it directly. :func:`readers` answers for every engine of the
workload at once, in time linear in containers and mounts (strongly connected components, each with the set
of containers it reaches as a bitset), where walking the graph once per engine would multiply them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

__all__ = ["READ_ONLY_KINDS", "backing", "read_only_volume", "readers"]

#: Volume kinds the kubelet always mounts read-only: nothing can be written into them.
READ_ONLY_KINDS: Final = frozenset({"image", "configMap", "secret", "downwardAPI", "projected"})


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


def backing(volume: Mapping[str, Any]) -> str | None:
    """What stores ``volume`` when the Pods of other templates can reach the same storage: a
    ``persistentVolumeClaim`` by claim name, a ``hostPath`` by path, an ``nfs`` export by server and path
    (None: storage of this Pod alone, such as an ``emptyDir``). Volumes of two templates with the same
    backing are one volume of the workload's graph."""
    claim, host, nfs = volume.get("persistentVolumeClaim"), volume.get("hostPath"), volume.get("nfs")
    if isinstance(claim, Mapping) and isinstance(claim.get("claimName"), str):
        return f"persistentVolumeClaim:{claim['claimName']}"
    if isinstance(host, Mapping) and isinstance(host.get("path"), str):
        return f"hostPath:{host['path'].rstrip('/') or '/'}"
    if isinstance(nfs, Mapping) and isinstance(nfs.get("server"), str) and isinstance(nfs.get("path"), str):
        return f"nfs:{nfs['server']}:{nfs['path'].rstrip('/') or '/'}"
    return None


def readers(
    count: int,
    mounts: Sequence[tuple[int, str, bool]],
    read_only: Collection[str],
    seeds: Sequence[Collection[int]],
) -> list[tuple[int, ...]]:
    """For each seed set (the containers that read one engine directly), every container that can read it.

    Containers are ``0 … count-1``; ``mounts`` are ``(container, volume name, mounted read-only)``;
    ``read_only`` names the volumes no container can write into (a volume mounted but not declared counts
    as writable). The answer lists container numbers in order.
    """
    channels = [mount for mount in mounts if mount[1] not in read_only]
    if not any(not mounted_read_only for _, _, mounted_read_only in channels):
        return [tuple(sorted(set(seed))) for seed in seeds]  # nothing can be written: each reads alone
    volume_nodes: dict[str, int] = {}
    successors: list[list[int]] = [[] for _ in range(count)]
    for container, volume, mounted_read_only in channels:
        node = volume_nodes.get(volume)
        if node is None:
            node = volume_nodes[volume] = len(successors)
            successors.append([])
        successors[node].append(container)
        if not mounted_read_only:
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
