"""`cardfit deploy --emit compose|k8s`: the chosen deployment as a compose.yaml or Kubernetes manifests,
written from the same `Launch` as the printed command (runtimes/launch.py), so the container runs exactly
its flags. The image, what its ENTRYPOINT already runs, the arguments that make the server answer beyond the
container's loopback and its port are fields of the runtime's catalog row (data/runtimes.toml `image*`,
`port`, with their sources).

- compose (one machine): one service per replica, each with its own cards (`device_ids`) and host port.
  Compose's `deploy.replicas` with a GPU `count` would give every replica the same first cards
  (docker/compose#11863, NVIDIA/nvidia-container-toolkit#521), so replicas are written out.
- k8s: a Deployment (`replicas`, `nvidia.com/gpu` per pod) and a Service; a replica that spans nodes is a
  LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, one pod per node): the leader runs the printed line, every
  worker the same line with its own node rank (`$(LWS_WORKER_INDEX)`), and the head's address is
  `$(LWS_LEADER_ADDRESS)` (both set by LWS in every pod, https://lws.sigs.k8s.io/docs/reference/).

The YAML is written here (no YAML library): every string is a double-quoted JSON string, which YAML reads
as the same string."""

from __future__ import annotations

import json
import re
from typing import Any

from ..catalog.records import record
from ..catalog.releases import container_image
from ..errors import InputError
from ..runtimes.launch import HEAD_NODE_IP
from .table import Result

FORMATS = ("compose", "k8s")
# A card stack's device: the Kubernetes resource its device plugin advertises and Docker's device driver
# (NVIDIA k8s-device-plugin README, "nvidia.com/gpu"; Docker docs "Enable GPU access with Docker Compose",
# driver: nvidia). The images of the runtime rows are CUDA builds, so CUDA cards only.
DEVICES = {"cuda": ("nvidia.com/gpu", "nvidia")}
# Tensor-parallel workers share memory through /dev/shm: Docker's default 64 MB is too small (vLLM docs,
# "Using Docker": --ipc=host or --shm-size; "Using Kubernetes": an emptyDir of medium Memory at /dev/shm).
SHM_MOUNT = "/dev/shm"
FILES_DIR = "/cardfit"  # where the files a launch line reads (trtllm-serve --config) are mounted; its cwd
LWS_LEADER = "$(LWS_LEADER_ADDRESS)"
LWS_RANK = "$(LWS_WORKER_INDEX)"
_NAME_MAX = 40  # a DNS-1123 label is at most 63 characters; LWS and compose add suffixes to it


@record
class Emitted(Result):
    """The manifest text `--emit` prints (`format`: compose or k8s)."""

    format: str
    text: str


@record
class Served:
    """What a manifest states: the launch line of one node and where it runs."""

    model: str  # the model's catalog id (the manifest's name)
    launch: Any  # runtimes.launch.Launch
    runtime: Any  # catalog.runtimes.RuntimeProfile
    gpu: Any  # catalog.gpus.Gpu
    cards_per_node: int
    nodes: int  # nodes per replica
    replicas: int


def emit(fmt: str, s: Served) -> Emitted:
    """The manifest of a deployment: `fmt` is compose or k8s."""
    if fmt not in FORMATS:
        raise InputError(f"--emit must be {' or '.join(FORMATS)} (got {fmt!r})", field="emit")
    if s.gpu.stack not in DEVICES:
        raise InputError(f"--emit writes manifests for NVIDIA (CUDA) cards; the chosen deployment runs on "
                         f"{s.gpu.name} ({s.gpu.stack})", field="emit", hint="pick CUDA cards with --gpu")
    if not s.runtime.image:
        raise InputError(f"--emit: the catalog names no container image for {s.runtime.id}", field="emit",
                         hint="add `image` to its row in runtimes.toml")
    text = compose(s) if fmt == "compose" else k8s(s)
    return Emitted(fmt, _header(fmt, s) + text)


def name_of(s: Served) -> str:
    """A DNS-1123 label naming the deployment: model and runtime, lower case, dashes."""
    slug = re.sub(r"[^a-z0-9]+", "-", f"{s.model}-{s.runtime.id}".lower()).strip("-")
    return slug[:_NAME_MAX].rstrip("-") or "cardfit"


def container_line(s: Served, rank: str | None = None,
                   head: str | None = None) -> tuple[list[str], list[str]]:
    """(command, args) of one node's container: the launch line with this node's rank and the head's address
    filled in, plus the row's listen arguments; the words the image's ENTRYPOINT runs become no command (the
    rest are its args), else the whole line is the command."""
    argv = list(s.launch.argv)
    if rank is not None:
        argv[s.launch.node_rank] = rank
    if head is not None:
        argv = [a.replace(HEAD_NODE_IP, head) for a in argv]
    argv += list(s.runtime.image_listen)
    entry = list(s.runtime.image_entrypoint)
    if not entry:
        return argv, []
    if argv[:len(entry)] != entry:
        raise InputError(f"runtimes.toml {s.runtime.id}: image_entrypoint {entry} is not the start of its "
                         f"launch line {argv[:len(entry)]}", field="emit")
    return [], argv[len(entry):]


def _header(fmt: str, s: Served) -> str:
    shape = f"{s.cards_per_node * s.nodes}× {s.gpu.name}" + (f" on {s.nodes} nodes" if s.nodes > 1 else "")
    copies = f"{s.replicas} replica{'s' if s.replicas > 1 else ''} of {shape}"
    lines = [f"cardfit deploy --emit {fmt}: {s.model} on {s.runtime.id}, {copies}",
             *(f"note: {n}" for n in s.launch.notes if HEAD_NODE_IP not in n or s.nodes == 1),
             *(f"note: the line reads {a}: mount it into the container's working directory"
               for a in s.launch.argv if a.lower().endswith(".gguf"))]
    return "".join(f"# {' '.join(line.split())}\n" for line in lines)


# ------------------------------------------------------------------------------------ compose

def compose(s: Served) -> str:
    """compose.yaml: one service per replica, cards `device_ids` in order, host ports from the server's."""
    if s.nodes > 1:
        raise InputError(f"--emit compose runs on one machine; each replica of this deployment spans "
                         f"{s.nodes} nodes", field="emit", hint="use --emit k8s (a LeaderWorkerSet)")
    name, port = name_of(s), s.runtime.port
    command, args = container_line(s)
    files = {f"{name}-{i}": (fname, body) for i, (fname, body) in enumerate(s.launch.files, 1)}
    services = {}
    for r in range(s.replicas):
        svc: dict[str, Any] = {"image": container_image(s.runtime)}
        if command:
            svc["entrypoint"] = command
        if args:
            svc["command"] = args
        if s.launch.env:
            svc["environment"] = dict(s.launch.env)
        if files:
            svc["configs"] = [{"source": key, "target": f"{FILES_DIR}/{fname}"}
                              for key, (fname, _) in files.items()]
            svc["working_dir"] = FILES_DIR
        svc["ports"] = [f"{port + r}:{port}"]
        svc["ipc"] = "host"
        cards = [str(r * s.cards_per_node + k) for k in range(s.cards_per_node)]
        svc["deploy"] = {"resources": {"reservations": {"devices": [
            {"driver": DEVICES[s.gpu.stack][1], "device_ids": cards, "capabilities": ["gpu"]}]}}}
        services[name if s.replicas == 1 else f"{name}-{r + 1}"] = svc
    doc: dict[str, Any] = {"services": services}
    if files:
        doc["configs"] = {key: {"content": body} for key, (_, body) in files.items()}
    return yaml(doc)


# ------------------------------------------------------------------------------------ Kubernetes

def k8s(s: Served) -> str:
    """A Deployment and its Service; a LeaderWorkerSet and its Service when a replica spans nodes."""
    name = name_of(s)
    docs: list[dict[str, Any]] = []
    if s.launch.files:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-files"},
                     "data": dict(s.launch.files)})
    if s.nodes == 1:
        labels = {"app": name}
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": name, "labels": labels},
                     "spec": {"replicas": s.replicas, "selector": {"matchLabels": labels},
                              "template": {"metadata": {"labels": labels}, "spec": _pod(s, name)}}})
    else:
        if s.launch.node_rank < 0:
            raise InputError(f"--emit k8s: {s.runtime.id}'s launch line names no node rank, so cardfit "
                             "writes no LeaderWorkerSet for it", field="emit",
                             hint="launch it across nodes as its note says, or --max-nodes 1")
        labels = {"app": name, "role": "leader"}
        docs.append({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                     "metadata": {"name": name},
                     "spec": {"replicas": s.replicas, "leaderWorkerTemplate": {
                         "size": s.nodes,
                         "leaderTemplate": {"metadata": {"labels": labels},
                                            "spec": _pod(s, name, head=LWS_LEADER)},
                         "workerTemplate": {"spec": _pod(s, name, rank=LWS_RANK, head=LWS_LEADER)}}}})
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                 "spec": {"selector": labels,
                          "ports": [{"port": s.runtime.port, "targetPort": s.runtime.port}]}})
    return "---\n".join(yaml(d) for d in docs)


def _pod(s: Served, name: str, rank: str | None = None, head: str | None = None) -> dict[str, Any]:
    command, args = container_line(s, rank, head)
    c: dict[str, Any] = {"name": "server", "image": container_image(s.runtime)}
    if command:
        c["command"] = command
    if args:
        c["args"] = args
    if s.launch.env:
        c["env"] = [{"name": k, "value": v} for k, v in s.launch.env]
    c["ports"] = [{"containerPort": s.runtime.port}]
    c["resources"] = {"limits": {DEVICES[s.gpu.stack][0]: s.cards_per_node}}
    mounts = [{"name": "dshm", "mountPath": SHM_MOUNT}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if s.launch.files:
        c["workingDir"] = FILES_DIR
        mounts.append({"name": "files", "mountPath": FILES_DIR})
        volumes.append({"name": "files", "configMap": {"name": f"{name}-files"}})
    c["volumeMounts"] = mounts
    return {"containers": [c], "volumes": volumes}


# ------------------------------------------------------------------------------------ YAML

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*\Z")


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if v is None:
        return "null"
    return _quoted(str(v))


def _quoted(text: str) -> str:
    """A JSON string (ASCII, every control character escaped) is a YAML double-quoted scalar with the same
    value; DEL, which JSON leaves as is, is no printable YAML character, so it is escaped too."""
    return json.dumps(text).replace("\x7f", "\\u007f")


def _key(k: str) -> str:
    return k if _PLAIN_KEY.match(k) and k.lower() not in ("true", "false", "null", "yes", "no", "on",
                                                          "off", "y", "n") else _quoted(k)


def yaml(value: Any) -> str:
    """Block-style YAML of nested dicts, lists and scalars; every string quoted."""
    return "".join(line + "\n" for line in _lines(value, 0))


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                out.append(f"{pad}{_key(k)}:")
                out += _lines(v, indent + 2)
            else:
                out.append(f"{pad}{_key(k)}: {_empty(v)}")
    else:
        for v in value:
            if isinstance(v, dict | list) and v:
                inner = _lines(v, indent + 2)
                out.append(f"{pad}- {inner[0][indent + 2:]}")
                out += inner[1:]
            else:
                out.append(f"{pad}- {_empty(v)}")
    return out


def _empty(v: Any) -> str:
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[]"
    return _scalar(v)
