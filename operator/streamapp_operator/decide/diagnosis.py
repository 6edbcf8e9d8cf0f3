"""Why an app is not running, in one reason and a message that says what to do. Pure.

Read from what the kubelet, the scheduler, the volume controller and the runtime itself say: the
driver pod's waiting reason, its PodScheduled condition and termination message, the checkpoint
claim's phase and events, the executor pods, the Secrets the spec names. The first cause that
applies wins (a claim that never binds also leaves the pod unschedulable: the claim is named).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streamapp_api import StreamApp, contract

from .. import names
from ..render.driver import pod_memory_mib
from .restarts import PodObservation
from .world import Claim, ExecutorPods, MissingConfigMap, MissingSecret

# Restarts in a row from which a failing driver is a crash loop rather than one failure.
CRASH_LOOP_AFTER = 3
MESSAGE_LINES = 3  # of a failed driver's last words, in the condition and the phase's message
IMAGE_PULL = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName")


@dataclass(frozen=True)
class Diagnosis:
    reason: str  # one CamelCase word: the Ready condition's reason, status.reason, the event's reason
    message: str  # what is wrong, then what to do


def referenced_secrets(app: StreamApp) -> list[tuple[str, str | None, str]]:
    """(Secret, key or None for the whole Secret, the spec field naming it) of every Secret the driver
    needs: without one, its container cannot even be created."""
    refs: list[tuple[str, str | None, str]] = []
    if app.spec.kafka.secret_ref is not None:
        refs.append((app.spec.kafka.secret_ref.name, None, "spec.kafka.secretRef"))
    registry = app.spec.kafka.schema_registry
    if registry is not None and registry.secret_ref is not None:  # the key the driver's env reads
        refs.append((registry.secret_ref.name, contract.SCHEMA_REGISTRY_USER_INFO_KEY, "spec.kafka.schemaRegistry.secretRef"))
    for i, sink in enumerate(app.spec.sinks):
        refs += [(ref.secret, ref.key, f"spec.sinks[{i}].{sink.kind}{ref.field}") for ref in sink.target.secret_env()]
    s3 = app.spec.state.checkpoint.s3
    if s3 is not None and s3.secret_ref is not None:  # the object-store checkpoint's key pair
        ref, field = s3.secret_ref, "spec.state.checkpoint.s3.secretRef"
        refs += [(ref.name, ref.access_key_id_key, field), (ref.name, ref.secret_access_key_key, field)]
    return refs


def referenced_config_maps(app: StreamApp) -> list[tuple[str, str | None, str]]:
    """(ConfigMap, key or None for the whole ConfigMap, the spec field naming it) of every ConfigMap the
    driver pod mounts: without one, its volume cannot be mounted and the pod never starts."""
    user_code = app.spec.user_code
    refs: list[tuple[str, str | None, str]] = [
        (name, None, f"spec.userCode.configMaps[{i}]") for i, name in enumerate(user_code.config_maps)] \
        if user_code is not None else []
    for kind in ("sources", "tables"):
        for i, item in enumerate(getattr(app.spec, kind)):
            descriptor_set = getattr(item.value_format.options_of(item), "descriptor_set", None)
            if descriptor_set is not None:
                refs.append((descriptor_set.config_map, descriptor_set.key,
                             f"spec.{kind}[{i}].{item.value_format.options_field}.descriptorSet"))
    return refs


def config_maps_missing(namespace: str, missing: tuple[MissingConfigMap, ...]) -> Diagnosis | None:
    if not missing:
        return None
    parts = [f'ConfigMap "{m.name}" not found ({m.field})' if m.key is None else
             f'ConfigMap "{m.name}" has no key "{m.key}" ({m.field})' for m in missing]
    first = missing[0]
    todo = f"kubectl -n {namespace} create configmap {first.name} --from-file=" + (
        f"{first.key}=<file>" if first.key else "<module>.py")
    return Diagnosis("ConfigMapMissing", f"{'; '.join(parts)}: the driver is not started until it exists "
                                         f"(e.g. {todo})")


def secrets_missing(namespace: str, missing: tuple[MissingSecret, ...]) -> Diagnosis | None:
    if not missing:
        return None
    parts = []
    for secret in missing:
        if secret.key is None:
            parts.append(f'Secret "{secret.name}" not found ({secret.field})')
        else:
            parts.append(f'Secret "{secret.name}" has no key "{secret.key}" ({secret.field})')
    first = missing[0]
    todo = (f'kubectl -n {namespace} create secret generic {first.name} --from-literal={first.key}=…'
            if first.key else f"kubectl -n {namespace} create secret generic {first.name} --from-literal=<option>=…")
    return Diagnosis("SecretMissing", f"{'; '.join(parts)}: the driver is not started until it exists "
                                      f"(e.g. {todo})")


def pending_driver(app: StreamApp, pod: PodObservation, claim: Claim | None, image: str) -> Diagnosis | None:
    """Why a driver pod that exists is not running yet; None when nothing is known to be wrong."""
    if claim is not None and claim.phase == "Pending" and (pod.unschedulable or not pod.waiting):
        found = claim_pending(app, claim)
        if found is not None and (pod.unschedulable or _claim_stuck(claim)):
            return found
    if pod.unschedulable:
        return unschedulable(app, pod.unschedulable)
    waiting, detail = pod.waiting, _one_line(pod.message or "")
    if waiting in IMAGE_PULL:
        return Diagnosis("ImagePullFailed", f"image {image} cannot be pulled ({waiting}: {detail}); push it to a "
                                            "registry the nodes can reach, or set spec.image (and "
                                            "spec.imagePullPolicy)")
    if waiting == "CreateContainerConfigError":
        if "secret" in detail.lower():
            return Diagnosis("SecretMissing", f"driver container cannot be created: {detail}; create the Secret "
                                              "or fix its reference in the spec")
        return Diagnosis("ContainerConfigError", f"driver container cannot be created: {detail}")
    if waiting in ("CreateContainerError", "RunContainerError", "CrashLoopBackOff"):
        reason = "CrashLoop" if waiting == "CrashLoopBackOff" else "ContainerError"
        return Diagnosis(reason, f"driver container {waiting}: {detail}")
    return None


# The scheduler's words when a volume keeps a pod off every node (the VolumeBinding, VolumeZone,
# VolumeRestrictions and volume-limit plugins: "unbound immediate PersistentVolumeClaims", "didn't
# find available persistent volumes to bind", "volume node affinity conflict", "pvc(s) bound to
# non-existent pv(s)", ...).
_VOLUME_WORDS = re.compile(r"volume|persistentvolumeclaim|pvc", re.IGNORECASE)


def claim_may_block(said: str | None) -> bool:
    """Whether the scheduler's message of an unschedulable driver may be about its checkpoint claim,
    so that the claim and its events are worth reading. A driver that does not fit ("Insufficient
    cpu") leaves a WaitForFirstConsumer claim Pending too; its events would only mislead, and reading
    them on every reconcile of every such app costs an Event list each (O(apps²) on a full cluster)."""
    return said is not None and _VOLUME_WORDS.search(said) is not None


def _claim_stuck(claim: Claim) -> bool:
    """The claim's events say it cannot bind (not merely that it waits for its first consumer)."""
    return any(not e.startswith(("WaitForFirstConsumer", "WaitForPodScheduled")) for e in claim.events)


def claim_pending(app: StreamApp, claim: Claim) -> Diagnosis | None:
    name = names.checkpoint_claim(app.metadata.name)
    said = claim.events[0] if claim.events else ""
    cls = claim.storage_class
    modes = ", ".join(claim.access_modes) or "?"
    head = f"checkpoint claim {name} is Pending"
    if re.search(r'storageclass\.storage\.k8s\.io "[^"]+" not found', said):
        todo = (f'storage class "{cls}" does not exist; set spec.state.checkpoint.storageClassName to one that '
                "does (kubectl get storageclass)")
    elif "no storage class is set" in said or (cls is None and "no persistent volumes available" in said):
        todo = ("no storage class is set and no PersistentVolume matches; set spec.state.checkpoint."
                "storageClassName, mark a storage class default, or create a PersistentVolume for it")
    elif "access mode" in said.lower() or "accessmode" in said.lower():
        todo = (f"storage class {cls or '(default)'} does not offer {modes}; set spec.state.checkpoint.accessModes "
                "(ReadWriteOnce keeps executors on one node), use a class that offers it, or put the checkpoint "
                "on an object store (spec.state.checkpoint.location: s3a://…)")
    elif "waiting for a volume to be created" in said or "ExternalProvisioning" in said:
        todo = (f"no volume provisioned yet by the provisioner of storage class {cls or '(default)'}; check that "
                f"it runs and offers {modes} (set spec.state.checkpoint.accessModes to what it offers)")
    elif said:
        todo = f"{said}; check spec.state.checkpoint (storage class {cls or '(default)'}, access modes {modes})"
    else:
        return None
    return Diagnosis("ClaimPending", f"{head}: {todo}")


def unschedulable(app: StreamApp, said: str) -> Diagnosis:
    spec = app.spec.driver
    hints = []
    if "Insufficient memory" in said:
        mib = pod_memory_mib(spec.memory, spec.memory_overhead)
        hints.append(f"the driver asks for {mib}Mi (spec.driver.memory {spec.memory} plus overhead): lower it or "
                     "add nodes with more memory")
    if "Insufficient cpu" in said:
        hints.append(f"the driver asks for {spec.cores} cores (spec.driver.cores): lower it or add nodes")
    if "taint" in said:
        hints.append("the nodes have taints the driver does not tolerate: add spec.driver.tolerations "
                     "or untaint a node for it")
    if "node affinity/selector" in said and spec.node_selector:
        wanted = ", ".join(f"{k}={v}" for k, v in sorted(spec.node_selector.items()))
        hints.append(f"no node has the labels of spec.driver.nodeSelector ({wanted}): label a node or change it")
    if "unbound" in said and "PersistentVolumeClaim" in said:
        hints.append(f"the checkpoint claim {names.checkpoint_claim(app.metadata.name)} is not bound: "
                     "kubectl describe pvc")
    todo = "; ".join(hints) or "see kubectl describe pod"
    return Diagnosis("Unschedulable", f"driver pod cannot be scheduled: {_one_line(said)}; {todo}")


def failed_driver(app: StreamApp, pod: PodObservation, restarts: int) -> Diagnosis:
    """Why the driver ended: the kubelet's reason, else the runtime's own words (termination message),
    else the last lines of its log (FallbackToLogsOnError); a crash loop once it keeps failing."""
    said = (pod.message or "").strip()
    if pod.reason == "OOMKilled":
        spec = app.spec.driver
        mib = pod_memory_mib(spec.memory, spec.memory_overhead)
        found = Diagnosis("OOMKilled", f"driver killed out of memory at its {mib}Mi limit; raise spec.driver.memory "
                                       f"(now {spec.memory}) or spec.driver.memoryOverhead")
    else:
        code = f" with exit code {pod.exit_code}" if pod.exit_code is not None else ""
        ended = f"driver {'exited' if pod.state == 'succeeded' else 'failed'}{code}"
        reason, text = runtime_error(said)
        found = Diagnosis(reason or "DriverFailed",
                          f"{ended}: {last_words(text)}" if said else f"{ended} ({pod.reason or 'no reason given'})")
    if restarts >= CRASH_LOOP_AFTER:
        return Diagnosis("CrashLoop", f"{found.message} ({found.reason}, {restarts} times in a row)")
    return found


def runtime_error(said: str) -> tuple[str | None, str]:
    """(reason, rest) of a termination message the runtime wrote ("PipelineError: …"); (None, said)
    for any other text (the log's tail)."""
    head, sep, rest = said.partition(": ")
    if sep and head in contract.TERMINATION_REASONS:
        return head, rest
    return None, said


def executors_not_running(pods: ExecutorPods) -> Diagnosis | None:
    """Executors that cannot run (pending for a reason, or failed); pending without one: being created.
    What to do follows the first reason: no node with room (a node autoscaler may still bring one), an
    image that does not pull, or executors that failed."""
    if not pods.why and not pods.failed:
        return None
    counts = ", ".join(f"{n} {what}" for n, what in ((pods.pending, "pending"), (pods.failed, "failed")) if n)
    why = f": {_one_line(pods.why)}" if pods.why else ""
    return Diagnosis("ExecutorsNotRunning", f"executor pods not running ({counts}){why}; {_executor_todo(pods.why)}")


def _executor_todo(why: str | None) -> str:
    said = why or ""
    if said.startswith("Unschedulable"):
        return ("they wait for a node with room: a node autoscaler, if the cluster has one, adds it; otherwise "
                "lower spec.executor.memory or cores, or spec.scaling.maxExecutors, or add capacity")
    if said.startswith(("ErrImagePull", "ImagePullBackOff", "InvalidImageName")):
        return "check spec.image and spec.imagePullSecrets"
    return "kubectl logs and kubectl describe on an executor pod say more"


def last_words(text: str) -> str:
    """The first lines of an error, each trimmed: what a status message can hold."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(line[:300] for line in lines[:MESSAGE_LINES])


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]
