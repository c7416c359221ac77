"""The placer's webhook mechanism, pure: a pod being created and the configuration its Job was
placed in → the JSON Patch (RFC 6902) that makes the pod exactly that configuration.

Used where the suspended Job's pod template cannot take the configuration's resources
(Kubernetes without KEP-5440, MutablePodResourcesForSuspendedJobs): the Job's pods are rewritten
as they are created instead. The patch is computed from :func:`placer.rewrite.apply_configuration`,
so both mechanisms give the same pod.

Only the containers the Job's template has take the configuration: a placement records their
names on the template (``cellfit.io/configured-containers``, :func:`containers_record`), which
each pod inherits, and a container another mutating webhook injected into the pod before
cellfit's (Istio's proxy, a logging agent) keeps what it came with: AlloX counted the template's
containers, and the proxy given the configuration's GPU would make the pod ask twice the GPUs
booked. A pod of a Job placed before the record was written has every container rewritten.

The webhook is idempotent, as ``reinvocationPolicy: IfNeeded`` requires: called again on a pod it
rewrote (after a later webhook injected a sidecar), it patches nothing it patched already, and
leaves the containers added since as they came, and a resource a later webhook added to a
configured container that no configuration of the Job states (an ``ephemeral-storage`` request
for a ResourceQuota; not ``cpu``, ``memory`` nor an extended resource, which the configuration
sizes whole: :mod:`placer.rewrite`) as it is. A pod of a Job placed before the record gets it
from the first call, naming the containers present then, so a reinvocation does not give the
configuration to a container injected after it.

A pod's containers in the configuration may ask more than the template's pod-level resources
(KEP-2837) allow; the API server then refuses every pod the webhook rewrites, and the Job
controller retries for ever. :func:`check_pod_level_resources` says so before the Job starts,
and :func:`checked_placement_patch` for each pod, counting the containers the template lacks
(another webhook's sidecar) and naming them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import AbstractSet, Any, Callable, Final, Mapping

from placer.configuration import Configuration, parse_configurations_cached
from placer.rewrite import ANNOTATION_STATED_NO_MORE, apply_configuration, recorded_stated_no_more, without_resources
from scheduler.constants import ANNOTATION_CONFIGURATIONS, ANNOTATION_CONFIGURED_CONTAINERS, RESOURCE_CPU, RESOURCE_MEMORY
from scheduler.core.resources import format_bytes, format_cpu, parse_quantity
from scheduler.errors import InvalidAnnotation, InvalidQuantity

_MISSING = object()


def placement_patch(pod: Mapping[str, Any], configuration: Configuration) -> list[dict[str, Any]]:
    """JSON Patch operations turning ``pod`` into ``configuration``; empty when it already is.
    A variable another of the configurations the pod carries (``cellfit.io/configurations``)
    sets, holding that one's value, is taken out first: a Job placed on one kind, suspended
    again and placed on the other keeps the first one's env in its template's containers (the
    API server lets the placer change none of them), and its pods must not run with it. Only the
    containers the placement recorded (:func:`configured_containers`) change; a pod with no record
    gets one naming its containers, which all change."""
    return _operations(pod, _placed(pod, configuration))


def checked_placement_patch(pod: Mapping[str, Any], configuration: Configuration) -> list[dict[str, Any]]:
    """:func:`placement_patch`, or :class:`PodsRefused` where the API server refuses the pod so made
    for its pod-level resources (:func:`check_pod_level_resources` of the pod, its containers
    outside the record named as its own); a quantity that does not parse is left to the API
    server (:class:`~scheduler.errors.InvalidQuantity`)."""
    placed = _placed(pod, configuration)
    try:
        check_pod_level_resources(placed["spec"], configuration, place=POD, configured=configured_containers(placed))
    except InvalidQuantity:
        pass  # the API server refuses the pod for that quantity itself, naming its field
    return _operations(pod, placed)


def _placed(pod: Mapping[str, Any], configuration: Configuration) -> dict[str, Any]:
    containers = configured_containers(pod)
    # No record (a Job placed before it was written): every container present now takes the
    # configuration, and the record says so, for a reinvocation after another webhook added one.
    record = containers_record(pod) if containers is None else None
    return apply_configuration(_without_others_env(_without_stated_no_more(pod, configuration, containers), configuration, containers),
                               configuration, containers=containers, extra_annotations=record)


def _without_stated_no_more(pod: Mapping[str, Any], configuration: Configuration,
                            containers: AbstractSet[str] | None) -> Mapping[str, Any]:
    """``pod`` less the resource names its re-placement recorded as stated no more
    (:data:`~placer.rewrite.ANNOTATION_STATED_NO_MORE`) in its configured ``containers``, and
    less that record: on the first call only, so that a reinvocation keeps such a name a later
    webhook added (the template mechanism's pods carry neither). ``pod`` itself without one."""
    names = recorded_stated_no_more(pod)
    if ANNOTATION_STATED_NO_MORE not in ((pod.get("metadata") or {}).get("annotations") or {}):
        return pod
    return without_resources(pod, names - configuration.job_resource_names, containers=containers)


def _operations(pod: Mapping[str, Any], placed: Mapping[str, Any]) -> list[dict[str, Any]]:
    operations: list[dict[str, Any]] = []
    spec, placed_spec = pod.get("spec") or {}, placed["spec"]
    for index, (container, placed_container) in enumerate(zip(spec.get("containers") or [], placed_spec.get("containers") or [])):
        _set(operations, f"/spec/containers/{index}/resources", container.get("resources", _MISSING),
             placed_container.get("resources", _MISSING), same=_same_resources)
        _set(operations, f"/spec/containers/{index}/env", container.get("env", _MISSING), placed_container.get("env", _MISSING))
    for key in ("nodeSelector", "tolerations"):
        _set(operations, f"/spec/{key}", spec.get(key, _MISSING), placed_spec.get(key, _MISSING))
    metadata = pod.get("metadata") or {}
    _set(operations, "/metadata/annotations", metadata.get("annotations", _MISSING), placed["metadata"].get("annotations", _MISSING))
    return operations


def containers_record(template: Mapping[str, Any]) -> dict[str, str]:
    """The annotation a placement writes on the Job's pod template beside its configurations:
    the names of the template's containers, which its pods inherit."""
    names = [container["name"] for container in (template.get("spec") or {}).get("containers") or []
             if isinstance(container, dict) and isinstance(container.get("name"), str)]
    return {ANNOTATION_CONFIGURED_CONTAINERS: ",".join(names)}


def configured_containers(pod: Mapping[str, Any]) -> frozenset[str] | None:
    """The containers of ``pod`` that take its configuration, by name, as its placement recorded
    them; None where it recorded none (a Job placed by a cellfit before the record: every
    container, as that cellfit rewrote them)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CONFIGURED_CONTAINERS)
    names = frozenset(name.strip() for name in text.split(",") if name.strip()) if isinstance(text, str) else frozenset()
    return names or None


def _without_others_env(pod: Mapping[str, Any], configuration: Configuration, containers: AbstractSet[str] | None) -> Mapping[str, Any]:
    """``pod`` without the env entries the other configurations it carries set (name and value
    alike: a user's own variable of that name and another value stays) in its ``containers``
    (None: every one); ``pod`` itself when there are none, or its configurations do not parse
    (the caller parsed them already)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CONFIGURATIONS)
    try:
        configurations = parse_configurations_cached(text)
    except InvalidAnnotation:
        return pod
    others = {(name, value) for kind in configurations.kinds if kind != configuration.kind
              for name, value in configurations[kind].env.items() if configuration.env.get(name) != value}
    configured = [container for container in (pod.get("spec") or {}).get("containers") or []
                  if containers is None or container.get("name") in containers]
    if not others or not any(_set_by(entry, others) for container in configured for entry in container.get("env") or []):
        return pod
    copy: dict[str, Any] = json.loads(json.dumps(pod))
    for container in copy["spec"]["containers"]:
        if container.get("env") and (containers is None or container.get("name") in containers):
            container["env"] = [entry for entry in container["env"] if not _set_by(entry, others)]
    return copy


def _set_by(entry: Any, others: set[tuple[str, str]]) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(entry.get("value"), str):
        return False
    return (entry["name"], entry["value"]) in others


def _set(operations: list[dict[str, Any]], path: str, before: object, after: object,
         same: Callable[[object, object], bool] = lambda before, after: before == after) -> None:
    if after is _MISSING or same(before, after):
        return
    # "add" replaces an existing object member, and creates an absent one (RFC 6902 §4.1).
    operations.append({"op": "add", "path": path, "value": after})


def _same_resources(before: object, after: object) -> bool:
    """Whether a container's resources ask what ``after`` asks, as the API server keeps them: each
    quantity by its amount (it keeps a quantity in canonical form, "0.5" as "500m", "1024Mi" as
    "1Gi"), a missing request as its limit (it defaults the request so). A pod this webhook
    rewrote, seen again on its reinvocation, is the configuration still."""
    before, after = _as_defaulted(before), _as_defaulted(after)
    if not isinstance(before, dict) or not isinstance(after, dict) or before.keys() != after.keys():
        return before == after
    return all(_same_amounts(before[key], after[key]) if key in ("requests", "limits") else before[key] == after[key]
               for key in before)


def _as_defaulted(resources: object) -> object:
    """A container's ``resources`` with each limit's missing request set to it (SetDefaults_Pod)."""
    if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict) or not resources["limits"]:
        return resources
    requests = resources.get("requests")
    return {**resources, "requests": {**resources["limits"], **(requests if isinstance(requests, dict) else {})}}


def _same_amounts(before: object, after: object) -> bool:
    if not isinstance(before, dict) or not isinstance(after, dict) or before.keys() != after.keys():
        return before == after
    try:
        return all(parse_quantity(str(before[name]), field=name) == parse_quantity(str(after[name]), field=name) for name in before)
    except InvalidQuantity:
        return before == after


# ------------------------------------------------------------------ pod-level resources (KEP-2837)

SIDECAR_RESTART_POLICY: Final = "Always"


class PodsRefused(InvalidAnnotation):
    """Every pod the webhook mechanism would make of a Job's template in a configuration is one
    the API server refuses: the Job must not start so."""


@dataclass(frozen=True, kw_only=True)
class SpecPlace:
    """Where a checked pod spec sits, for the message: ``field``, the path of the spec, and
    ``whose``/``refused``, what the pod-level resources belong to and what the API server refuses."""

    field: str
    whose: str
    refused: str


# A Job's pod template, checked before the Job starts (placer/controller.py).
TEMPLATE: Final = SpecPlace(field="spec.template.spec", whose="the Job's pod template",
                            refused="every pod of the Job so made")
# A pod being created, checked by the pod-create webhook on each call.
POD: Final = SpecPlace(field="spec", whose=("the pod (set by its Job's spec.template.spec.resources, or, for a request it "
                                             "leaves out, by the API server from the template's own containers)"),
                       refused="the pod, and the Job controller creates none")


def check_pod_level_resources(spec: Mapping[str, Any], configuration: Configuration, *, place: SpecPlace = TEMPLATE,
                              configured: AbstractSet[str] | None = None, created_from: Mapping[str, Any] | None = None) -> None:
    """Raises :class:`PodsRefused`, naming the configuration's field and the template's, where the
    pod of ``spec`` (a Job's pod template's, its containers in ``configuration``:
    :func:`apply_configuration`'s) is one the API server refuses for its pod-level resources.
    As it checks a pod (validatePodResourceConsistency, after defaulting: a container's missing
    request is its limit, a missing pod-level request the pod-level limit): the containers ask
    together (sidecars and init containers counted as kube-scheduler counts them) no more than a
    pod-level request, no container is limited to more than a pod-level limit, and the containers'
    hugepages limits together stay within a pod-level one. Only resources the pod-level
    resources name are compared (cpu, memory, hugepages-<size>). ``configured``: the containers
    the configuration sizes (None: every one); the others (a sidecar another webhook injected)
    are named with what they ask of their own. ``created_from``: the template spec the Job
    controller creates each pod of (its containers as stored, the webhook mechanism's), whose
    pod-level resources the API server defaults from those containers before the webhook gives
    them the configuration (:func:`pod_level_as_created`); None: a missing pod-level request is
    the pod-level limit (the template mechanism's pods, defaulted from the configuration's own
    containers, where only that limit can refuse them)."""
    if created_from is not None:
        limits, requests = _as_created(created_from, place=place)
    else:
        resources = spec.get("resources") or {}
        if not isinstance(resources, dict) or not resources:
            return
        limits = _pod_level(resources.get("limits"), side="limits", place=place)
        requests = {**limits, **_pod_level(resources.get("requests"), side="requests", place=place)}
    for name, asked in sorted(_aggregate(spec, _requested).items()):
        if name in requests and asked > requests[name][0]:
            raise _refused(f"the pod's containers ask {_shown(name, asked)} of {name} together "
                           + _asking(spec, configuration, name, _requested, configured=configured),
                           field=_sized_field(spec, configuration, name, side="requests", place=place, configured=configured),
                           allowed=requests[name][1], place=place)
    for index, container in enumerate(spec.get("containers") or []):
        for name, limit in sorted(_amounts((container.get("resources") or {}).get("limits")).items()):
            if name in limits and limit > limits[name][0]:
                sized = _sized(container, configured=configured)
                raise _refused(_container_limited(container, name, limit, configured=configured,
                                                  stated=name in configuration.resource_names),
                               field=(_configuration_field(configuration, name) if sized and name in configuration.resource_names
                                      else f"{place.field}.containers[{index}].resources.limits[{name}]" if sized
                                      else f"{place.field}.resources.limits[{name}]"),
                               allowed=limits[name][1], place=place)
    for name, limited in sorted(_aggregate(spec, _limited).items()):
        if name.startswith("hugepages-") and name in limits and limited > limits[name][0]:
            raise _refused(f"the pod's containers are limited to {_shown(name, limited)} of {name} together "
                           + _asking(spec, configuration, name, _limited, configured=configured),
                           field=_sized_field(spec, configuration, name, side="limits", place=place, configured=configured),
                           allowed=limits[name][1], place=place)


def _refused(what: str, *, field: str, allowed: str, place: SpecPlace) -> PodsRefused:
    return PodsRefused(f"{what}, more than the pod-level {allowed} of {place.whose} allows: "
                       f"the API server refuses {place.refused} (pod-level resources, KEP-2837)", field=field)


def _in(configuration: Configuration, name: str) -> str:
    if name in configuration.resource_names or name in configuration.job_resource_names:
        return "in this configuration"
    return f"in this configuration (their own {name}: no configuration of the Job states it)"


def _sized_field(spec: Mapping[str, Any], configuration: Configuration, name: str, *, side: str, place: SpecPlace,
                 configured: AbstractSet[str] | None) -> str:
    """The field to change where the pod's containers ask too much of ``name`` together: the
    configuration's, where it states ``name``; else the first container it sizes that keeps
    ``name`` as the template (or a later webhook) has it, which no configuration of the Job
    states; else (only containers it does not size ask it) the configuration's resources."""
    if name not in configuration.resource_names:
        for index, container in enumerate(spec.get("containers") or []):
            if _sized(container, configured=configured) and name in _requested(container):
                return f"{place.field}.containers[{index}].resources.{side}[{name}]"
    return _configuration_field(configuration, name)


def _configuration_field(configuration: Configuration, name: str) -> str:
    named = name in configuration.requests or name in configuration.limits
    return f"{ANNOTATION_CONFIGURATIONS}.{configuration.kind}.resources" + (f".{name}" if named else "")


def _container_limited(container: Mapping[str, Any], name: str, limit: Fraction, *, configured: AbstractSet[str] | None,
                       stated: bool = True) -> str:
    limited = f"container {container.get('name')!r} is limited to {_shown(name, limit)} of {name}"
    if not _sized(container, configured=configured):
        return f"{limited} ({_whose(container, configured=configured)})"
    return f"{limited} in this configuration" if stated else f"{limited} (its own: no configuration of the Job states {name})"


def _asking(spec: Mapping[str, Any], configuration: Configuration, name: str,
            of: Callable[[Mapping[str, Any]], dict[str, Fraction]], *, configured: AbstractSet[str] | None) -> str:
    """``in this configuration (container 'trainer' 4, the configuration's; container 'istio-proxy'
    100m, its own: ...)``: who asks ``name`` beside each other, where a container the
    configuration does not size is among them (a sidecar the user did not write into the Job,
    whom the message must name); else only whether the amount is the configuration's or the
    containers' own (a name no configuration of the Job states, which they keep), as for a
    template (``configured`` None), whose every container the user wrote."""
    stated = name in configuration.resource_names
    own = _in(configuration, name)
    if configured is None:
        return own
    running = [(f"container {c.get('name')!r}", c, _sized(c, configured=configured),
                _whose(c, configured=configured) if stated or not _sized(c, configured=configured)
                else f"the Job template's own: no configuration of the Job states {name}")
               for c in spec.get("containers") or []]
    # The record names no init container: a sidecar one is the template's or injected alike.
    running += [(f"sidecar init container {c.get('name')!r}", c, False, "its own") for c in spec.get("initContainers") or []
                if c.get("restartPolicy") == SIDECAR_RESTART_POLICY]
    asking = [(label, of(container)[name], sized, whose) for label, container, sized, whose in running if of(container).get(name)]
    if all(sized for _, _, sized, _ in asking):
        return own
    return "in this configuration (" + "; ".join(f"{label} {_shown(name, amount)}, {whose}" for label, amount, _, whose in asking) + ")"


def _sized(container: Mapping[str, Any], *, configured: AbstractSet[str] | None) -> bool:
    """Whether the configuration sizes ``container`` (None: every container)."""
    return configured is None or container.get("name") in configured


CONFIGURATIONS_OWN: Final = "the configuration's"


def _whose(container: Mapping[str, Any], *, configured: AbstractSet[str] | None) -> str:
    if _sized(container, configured=configured):
        return CONFIGURATIONS_OWN
    return "its own: not the Job template's, another mutating webhook added it"


def _pod_level(values: object, *, side: str, place: SpecPlace) -> dict[str, tuple[Fraction, str]]:
    """The pod-level ``side`` (requests, limits) the API server compares containers with: each
    amount and the field it is, as the spec names it."""
    if not isinstance(values, dict):
        return {}
    return {name: (parse_quantity(amount, field=f"{place.field}.resources.{side}.{name}"),
                   f"{place.field}.resources.{side}[{name}] of {amount}")
            for name, amount in values.items() if name in (RESOURCE_CPU, RESOURCE_MEMORY) or name.startswith("hugepages-")}


def pod_level_as_created(spec: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The pod-level resources (``{"limits": ..., "requests": ...}``, each side only where it names
    one) of a pod made of the template ``spec``, as kube-apiserver defaults them when the pod is
    created, before any admission webhook sees it (SetDefaults_Pod with PodLevelResources,
    pkg/apis/core/v1/defaults.go): where the spec names pod-level resources, a missing hugepages
    limit is what the containers are limited to together (unless a pod-level request names it);
    where it names a pod-level limit, a missing cpu or memory request is what the containers ask
    together (a container's missing request its limit; sidecars and init containers counted as
    for the check), or the pod-level limit where no container asks it, and a missing hugepages
    request the limit. The limits kube-apiserver defaults from the containers' since 2026
    (defaultPodLimits) are not: an older API server leaves them out and would take the pod."""
    return {side: {name: amount for name, (amount, _) in values.items()}
            for side, values in zip(("limits", "requests"), _defaults(spec)) if values}


_SET, _FROM_LIMIT, _FROM_CONTAINERS = "set", "the pod-level limit", "the containers'"


def _defaults(spec: Mapping[str, Any]) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
    """:func:`pod_level_as_created`'s limits and requests, each amount with where it came from."""
    resources = spec.get("resources")
    if not isinstance(resources, dict):
        return {}, {}
    limits = {name: (str(amount), _SET) for name, amount in (resources.get("limits") or {}).items()}
    requests = {name: (str(amount), _SET) for name, amount in (resources.get("requests") or {}).items()}
    if limits or requests:  # defaultHugePagePodLimits
        for name, amount in sorted(_aggregate(spec, _limited).items()):
            if name.startswith("hugepages-") and name not in requests and name not in limits:
                limits[name] = (_shown(name, amount), _FROM_CONTAINERS)
    if limits:  # defaultPodRequests: cpu and memory (overcommitted) from the containers, then the limits
        for name, amount in sorted(_aggregate(spec, _requested).items()):
            if name in (RESOURCE_CPU, RESOURCE_MEMORY) and name not in requests:
                requests[name] = (_shown(name, amount), _FROM_CONTAINERS)
        for name, (limit, _) in limits.items():
            if _pod_level_name(name) and name not in requests:
                requests[name] = (limit, _FROM_LIMIT)
    return limits, requests


def _as_created(spec: Mapping[str, Any], *, place: SpecPlace) -> tuple[dict[str, tuple[Fraction, str]], dict[str, tuple[Fraction, str]]]:
    """The pod-level limits and requests of a pod made of ``spec`` (:func:`_defaults`), each amount
    with the field it is or stands for, as :func:`_pod_level` gives them."""
    limits, requests = _defaults(spec)
    shown_limits = {name: _default_shown(name, amount, origin, side="limits", place=place)
                    for name, (amount, origin) in limits.items() if _pod_level_name(name)}
    shown_requests = {name: shown_limits[name] if origin == _FROM_LIMIT and name in shown_limits
                      else _default_shown(name, amount, origin, side="requests", place=place)
                      for name, (amount, origin) in requests.items() if _pod_level_name(name)}
    return shown_limits, shown_requests


def _default_shown(name: str, amount: str, origin: str, *, side: str, place: SpecPlace) -> tuple[Fraction, str]:
    field = f"{place.field}.resources.{side}[{name}]"
    parsed = parse_quantity(amount, field=f"{place.field}.resources.{side}.{name}")
    if origin == _SET:
        return parsed, f"{field} of {amount}"
    return parsed, (f"{field} of {amount} (not set in the template: the API server's default, its own containers' "
                    f"{side} together before the configuration; set it)")


def _pod_level_name(name: str) -> bool:
    return name in (RESOURCE_CPU, RESOURCE_MEMORY) or name.startswith("hugepages-")


def _amounts(values: object) -> dict[str, Fraction]:
    if not isinstance(values, dict):
        return {}
    return {name: parse_quantity(amount, field=f"spec.template.spec.containers.resources.{name}") for name, amount in values.items()}


def _requested(container: Mapping[str, Any]) -> dict[str, Fraction]:
    """A container's requests as the API server defaults them in a pod: a missing one is its limit."""
    resources = container.get("resources") or {}
    return {**_amounts(resources.get("limits")), **_amounts(resources.get("requests"))}


def _limited(container: Mapping[str, Any]) -> dict[str, Fraction]:
    return _amounts((container.get("resources") or {}).get("limits"))


def _aggregate(spec: Mapping[str, Any], of: Callable[[Mapping[str, Any]], dict[str, Fraction]]) -> dict[str, Fraction]:
    """What the pod's containers ask together (KEP-753, as kube-scheduler and the API server count
    it): the containers and sidecar init containers summed, raised to what each other init
    container asks beside the sidecars started before it."""
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        total = _sum(total, of(container))
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or []:
        if container.get("restartPolicy") == SIDECAR_RESTART_POLICY:
            total, sidecars = _sum(total, of(container)), _sum(sidecars, of(container))
            peak = _max(peak, sidecars)
        else:
            peak = _max(peak, _sum(sidecars, of(container)))
    return _max(total, peak)


def _sum(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {name: a.get(name, Fraction(0)) + b.get(name, Fraction(0)) for name in a.keys() | b.keys()}


def _max(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {name: max(a.get(name, Fraction(0)), b.get(name, Fraction(0))) for name in a.keys() | b.keys()}


def _shown(name: str, amount: Fraction) -> str:
    return format_cpu(math.ceil(amount * 1000)) if name == RESOURCE_CPU else format_bytes(math.ceil(amount))
