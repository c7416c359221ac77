"""The placer's pure rewrite: a pod template (or pod) and a configuration in, the same pod in that
configuration out. The sampling pods and the placed Job use this one function, so a Job runs on
exactly what it was sampled on.

What changes, and why each way:
- every container's resources are *set* by name: each name the configuration states takes its
  amounts (requests and limits, whatever the container had of that name), and each name another
  configuration of the Job states but this one does not is taken out, so a pod never carries
  both configurations' resources (a GPU limit left from a template written for GPUs would hold a
  GPU while running on CPUs); a name no configuration of the Job states (an ``ephemeral-storage``
  request another mutating webhook added for a ResourceQuota, a template's ``hugepages-2Mi``) is
  kept as the container has it, request and limit each: the pod-create webhook is called again
  after later webhooks (``reinvocationPolicy: IfNeeded``), and a name it dropped there would be
  missing from every pod. Cores and memory are never kept: AlloX books a Job's machine by what
  its configuration states of them (placer/controller.py counts the rewrite of the template's
  shape, not its containers' own resources), so a template's own ``memory`` beside
  configurations that size cores alone would be asked by every pod and booked by none. Nor is
  an extended resource the configuration does not state: a CPU start never holds a device (a
  template's ``nvidia.com/gpu`` on a Job with no GPU configuration), nor a GPU start another
  vendor's (``amd.com/gpu`` beside ``nvidia.com/gpu``: a pod no node holds). Its
  ``claims`` (DRA devices of the pod's ``resourceClaims``) are kept: a configuration sizes
  quantities, and the pod holds its claims whatever the container names;
- ``env`` entries are set on every container, replacing variables of the same name where the
  container first names them (a ``$(NAME)`` after it still expands) and keeping the others;
- ``nodeSelector`` entries are merged into the pod's, the configuration winning a conflict; given
  ``pool`` (``allox.nodeSelector``: the labels of the nodes whose machines AlloX counts), its
  entries too, so the pod runs only where AlloX booked it (a template with no selector ran on
  any node, its Job holding no machine of AlloX's while its user's progress stayed nil); a pod
  that would then select, or require by node affinity, nodes outside the pool is refused
  (:class:`PoolConflict`, naming the field), never moved by overwriting its user's value;
- ``tolerations`` are appended unless already present;
- ``annotations`` are merged into the pod's metadata, and ``extra_labels`` /
  ``extra_annotations`` (cellfit's own bookkeeping) after them.
Init containers keep their resources: they run before the workload and are not what the
configuration sizes. Given ``containers`` (names), only those containers take the configuration's
resources and env: a pod the pod-create webhook rewrites may carry containers its Job's template
does not (a sidecar another mutating webhook injected before cellfit's), which AlloX did not
count and which keep what they came with.
"""

from __future__ import annotations

import json
from typing import AbstractSet, Any, Callable, Final, Mapping

import msgspec

from placer.configuration import BOOKED_RESOURCES, Configuration, is_extended_resource
from scheduler.constants import ANNOTATION_CONFIGURATIONS
from scheduler.core.resources import parse_quantity
from scheduler.errors import InvalidQuantity, InvalidRequest
from scheduler.kube.node_rules import NodeSelectorRequirement, requirement_matches

# The setting naming the labels of AlloX's nodes, whose machines it counts (scheduler/config.py).
POOL_SETTING: Final = "allox.nodeSelector"
# Where a Job's pods' spec is written, for the fields a refusal names.
TEMPLATE_SPEC: Final = "spec.template.spec"


class PoolConflict(InvalidRequest):
    """A pod that, with AlloX's pool selector (``allox.nodeSelector``) merged in, selects no node
    of the pool: its template or configuration asks another value of one of the pool's labels,
    or its required node affinity excludes the pool's. ``field`` names where; ``brief``, what
    is wrong there short enough for the validating webhook's warning (the API server cuts one at
    256 characters, and the field of a match expression alone takes 128)."""

    def __init__(self, message: str, *, field: str, brief: str) -> None:
        super().__init__(message, field=field)
        self.brief = brief


def apply_configuration(
    template: Mapping[str, Any] | bytes,
    configuration: Configuration,
    *,
    extra_env: Mapping[str, str] | None = None,
    extra_labels: Mapping[str, str] | None = None,
    extra_annotations: Mapping[str, str] | None = None,
    containers: AbstractSet[str] | None = None,
    pool: Mapping[str, str] | None = None,
    where: str = TEMPLATE_SPEC,
) -> dict[str, Any]:
    """``template`` (``{"metadata": ..., "spec": ...}`` as the API writes a pod or a Job's
    ``spec.template``, or that as JSON text, as the watch holds a Job) rewritten to
    ``configuration``; only its ``containers`` (by name) where given, else every container.
    ``pool``: the labels of AlloX's nodes (``allox.nodeSelector``), merged into the pod's node
    selector after the configuration's; :class:`PoolConflict` where the pod would then select
    none of them (``where``: the path of ``template``'s spec, which the refusal names).
    ``template`` is not modified."""
    # A copy through JSON (what a template is): a third of copy.deepcopy's time, which was most
    # of carrying out a start when AlloX starts hundreds of Jobs in one pass. JSON text is
    # parsed once, and that parse is the copy.
    pod: dict[str, Any] = json.loads(template if isinstance(template, bytes) else json.dumps(template))
    metadata = pod.setdefault("metadata", {}) or {}
    pod["metadata"] = metadata
    spec = pod.setdefault("spec", {}) or {}
    pod["spec"] = spec

    env = {**configuration.env, **(extra_env or {})}
    for container in spec.get("containers") or []:
        if containers is not None and container.get("name") not in containers:
            continue
        container["resources"] = configured_resources(container.get("resources"), configuration)
        if env:
            container["env"] = _with_env(container.get("env") or [], env)

    if configuration.node_selector:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **configuration.node_selector}
    if pool:
        spec["nodeSelector"] = pooled_selector(spec, configuration, pool, where=where)
    if configuration.tolerations:
        tolerations = list(spec.get("tolerations") or [])
        present = [_toleration_as_kept(toleration) for toleration in tolerations]
        for toleration in configuration.tolerations:
            if _toleration_as_kept(toleration) not in present:
                tolerations.append(dict(toleration))
                present.append(_toleration_as_kept(toleration))
        spec["tolerations"] = tolerations

    annotations = {**(metadata.get("annotations") or {}), **configuration.annotations, **(extra_annotations or {})}
    if annotations:
        metadata["annotations"] = annotations
    if extra_labels:
        metadata["labels"] = {**(metadata.get("labels") or {}), **extra_labels}
    return pod


def pooled_selector(spec: Mapping[str, Any], configuration: Configuration | None, pool: Mapping[str, str], *,
                    where: str) -> dict[str, str]:
    """``spec``'s node selector with ``pool``'s labels merged in; :class:`PoolConflict` where the
    pod would then select no node of the pool (:func:`pool_conflict`)."""
    conflict = pool_conflict(spec, configuration, pool, where=where)
    if conflict is not None:
        raise conflict
    return {**(spec.get("nodeSelector") or {}), **pool}


def pool_conflict(spec: Mapping[str, Any], configuration: Configuration | None, pool: Mapping[str, str], *,
                  where: str = TEMPLATE_SPEC) -> PoolConflict | None:
    """Why a pod of ``spec`` (with ``configuration``'s node selector merged in, as the rewrite
    merges it) selects no node carrying ``pool``'s labels, naming the field that says otherwise:
    the configuration's ``nodeSelector`` entry where it states the label, else the pod's
    (``where``); or its required node affinity, when every one of its terms (ORed) excludes
    the pool (:func:`_excludes_pool`: a requirement on one of the pool's labels no pool node
    meets, ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt`` or ``Lt``, or no requirement
    at all), or every node its node selector picks: the affinity is judged against every label
    the placed pod's node selector names (the template's own, the configuration's, the pool's),
    which each node it may land on carries, and a refusal on a selector's label names the
    ``nodeSelector`` field stating it. None when it may run there. Labels none of them names,
    affinity on them and on node names (``matchFields``) are the pod's to narrow the pool by."""
    selector = spec.get("nodeSelector")
    own: Mapping[str, Any] = selector if isinstance(selector, Mapping) else {}
    stated = configuration.node_selector if configuration is not None else {}
    for key, wanted in pool.items():
        if key in stated and stated[key] != wanted:
            assert configuration is not None  # it states the label
            field = f"{ANNOTATION_CONFIGURATIONS}.{configuration.kind}.nodeSelector[{key}]"
            return PoolConflict(_outside(stated[key], key, wanted, pool), field=field,
                                brief=_outside_brief(stated[key], key, wanted, pool))
        if key not in stated and key in own and own[key] != wanted:
            return PoolConflict(_outside(own[key], key, wanted, pool), field=f"{where}.nodeSelector[{key}]",
                                brief=_outside_brief(own[key], key, wanted, pool))
    # The labels every node the placed pod may land on carries, and the field stating each: the
    # pod's own node selector, the configuration's merged over it, the pool's over both (checked
    # above to agree), as the rewrite merges them.
    carried: dict[str, tuple[str, str]] = {
        key: (value, f"{where}.nodeSelector[{key}]") for key, value in own.items() if isinstance(value, str)}
    if configuration is not None:
        carried.update({key: (value, f"{ANNOTATION_CONFIGURATIONS}.{configuration.kind}.nodeSelector[{key}]")
                        for key, value in stated.items()})
    carried.update({key: (value, POOL_SETTING) for key, value in pool.items()})
    labels = {key: value for key, (value, _) in carried.items()}
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(node, Mapping) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(terms, list) or not terms:
        return None
    reasons = [reason for reason in (_excludes_pool(term, labels) for term in terms) if reason is not None]
    if len(reasons) < len(terms):
        return None  # a term (they are ORed) some eligible node may meet
    terms_field = f"{where}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    # The reason a refusal gives: the first term a requirement excludes, else the first (empty) term.
    index, (within, why, _) = next(((index, reason) for index, reason in enumerate(reasons) if reason[0]),
                                     (0, reasons[0]))
    selected = sorted({reason[2] for reason in reasons if reason[2] is not None and carried[reason[2]][1] != POOL_SETTING})
    if selected:
        # A label the pod's own or its configuration's node selector puts on every node it may land on.
        nodes = "; ".join(f"{name}={carried[name][0]} ({carried[name][1]})" for name in selected)
        described = short = f"the nodes its node selector picks ({nodes})"
        outcome = "its pods could run on no node (kube-scheduler refuses every one)"
    else:
        described = f"the nodes labelled {_labels(pool)}, AlloX's ({POOL_SETTING})"
        short = f"{POOL_SETTING}'s nodes ({_labels(pool)})"
        outcome = "its pods could run on none of the nodes AlloX books its machines on"
    if len(terms) == 1:
        return PoolConflict(f"{why} excludes {described}: {outcome}", field=f"{terms_field}[0]{within}",
                            brief=f"excludes {short}")
    return PoolConflict(f"each of its {len(terms)} terms excludes {described} (nodeSelectorTerms[{index}] by {why}): "
                        f"{outcome}", field=terms_field, brief=f"each of its {len(terms)} terms excludes {short}")


def _outside(value: str, key: str, wanted: str, pool: Mapping[str, str]) -> str:
    return (f"{value!r} is not {wanted!r}, which AlloX's nodes carry ({POOL_SETTING}: {_labels(pool)}): its pods "
            f"could run on none of the nodes AlloX books its machines on; leave {key} out (AlloX adds it) or set it to {wanted!r}")


def _outside_brief(value: str, key: str, wanted: str, pool: Mapping[str, str]) -> str:
    return f"{value!r} is not {wanted!r} ({POOL_SETTING}: {_labels(pool)}; leave {key} out or set it to {wanted!r})"


def _labels(pool: Mapping[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in pool.items())


def _excludes_pool(term: object, pool: Mapping[str, str]) -> tuple[str, str, str | None] | None:
    """Why no node carrying ``pool``'s labels meets a required node selector term (the field of
    the requirement within the term, what it asks), by kube-scheduler's rules over the labels
    every pool node carries (``Gt``/``Lt`` included: a value that is no integer meets neither);
    a term with no requirement meets no node. None where some pool node may meet it: a
    requirement on a label the pool does not name, or a ``matchFields`` one (``metadata.name``:
    a node's name is not among its labels, and a node of any name may join the pool), decides
    nothing here, and a refusal stands until the Job changes, so only a certain one is made."""
    if not isinstance(term, Mapping):
        return None
    listed, fields = term.get("matchExpressions"), term.get("matchFields")
    expressions: list[Any] = listed if isinstance(listed, list) else []
    if not expressions and not fields:
        return "", "a term with no requirement (it matches no node)", None
    for index, expression in enumerate(expressions):
        if not isinstance(expression, Mapping) or expression.get("key") not in pool:
            continue
        try:
            requirement = msgspec.convert(expression, NodeSelectorRequirement)
        except msgspec.ValidationError:
            continue  # not a requirement the API server takes: nothing certain
        if not requirement_matches(requirement, pool[requirement.key]):
            return f".matchExpressions[{index}]", f"{requirement.key} {_asks(requirement)}", requirement.key
    return None


def _asks(requirement: NodeSelectorRequirement) -> str:
    """What a requirement asks of its label, as a refusal quotes it: ``In ['a', 'b']``, ``Gt 4``."""
    values = requirement.values or []
    if requirement.operator in ("Gt", "Lt") and len(values) == 1:
        return f"{requirement.operator} {values[0]}"
    return f"{requirement.operator} {values}" if values else requirement.operator


def configured_resources(resources: object, configuration: Configuration) -> dict[str, Any]:
    """A configured container's ``resources`` in ``configuration``: the names it states set, the
    names another configuration of its Job states taken out, as are cores, memory and every
    extended resource it does not state, every other name kept as ``resources`` has it
    (``ephemeral-storage``, ``hugepages-<size>``: hugepages only beside cores or memory, as the
    API server takes them), and the ``claims`` kept. ``resources`` is not modified."""
    current = resources if isinstance(resources, Mapping) else {}
    managed = configuration.managed_resource_names
    result: dict[str, Any] = {}
    for side, stated in (("requests", configuration.requests), ("limits", configuration.limits)):
        had = current.get(side)
        kept = {name: amount for name, amount in had.items() if not _taken_out(name, managed)} \
            if isinstance(had, Mapping) else {}
        values = {**kept, **stated}
        if values:
            result[side] = values
    if not any(name in BOOKED_RESOURCES for side in ("requests", "limits") for name in result.get(side, ())):
        # The API server refuses hugepages in a container that asks neither cores nor memory
        # ("HugePages require cpu or memory"): kept beside a configuration that states neither
        # (a GPU one of only nvidia.com/gpu), the template's own would refuse every pod.
        for side in ("requests", "limits"):
            if side in result:
                result[side] = {name: amount for name, amount in result[side].items() if not name.startswith("hugepages-")}
                if not result[side]:
                    del result[side]
    claims = current.get("claims")
    if claims:
        result["claims"] = claims
    return result


def _taken_out(name: str, managed: AbstractSet[str]) -> bool:
    """Whether a configured container's own ``name`` goes: one the Job's configurations size
    (cores and memory always, which AlloX books), or a device (an extended resource) the chosen
    configuration does not state: a CPU start holds none, nor a GPU start another vendor's
    (``amd.com/gpu`` beside ``nvidia.com/gpu``: a pod no node holds)."""
    return name in managed or is_extended_resource(name)


def _toleration_as_kept(toleration: object) -> object:
    """A toleration as the API server keeps it: without its empty fields (``"value": ""``,
    ``"effect": ""``: omitempty), so one already on the pod (this rewrite's, read back on the pod-create
    webhook's reinvocation) is not added twice."""
    if not isinstance(toleration, Mapping):
        return toleration
    return {key: value for key, value in toleration.items() if value not in ("", None)}


def _with_env(current: list[dict[str, Any]], values: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each variable set where the container first names it (Kubernetes expands ``$(NAME)`` only
    from variables listed before, so one moved to the end would leave those literal), its later
    duplicates dropped; new ones appended."""
    env: list[dict[str, Any]] = []
    placed: set[str] = set()
    for entry in current:
        name = entry.get("name")
        if not isinstance(name, str) or name not in values:
            env.append(entry)
        elif name not in placed:
            placed.add(name)
            env.append({"name": name, "value": values[name]})
    return env + [{"name": name, "value": value} for name, value in values.items() if name not in placed]


def without_configuration(template: Mapping[str, Any] | bytes, configuration: Configuration) -> dict[str, Any]:
    """``template`` with what ``configuration`` added to it taken out (its env variables, node
    selector entries, tolerations and annotations, where they still hold its values), for a Job
    placed again on another kind: its pods must not carry the first configuration's selectors
    (pinned to GPU nodes while running on CPUs) nor its env. Its resources too (each name it
    states, request and limit, where it holds its amount): the rewrite sets or takes out only the
    names the Job's configurations state now, and keeps the others, so one only an earlier edit of
    them stated would stay. ``template`` is not modified."""
    pod: dict[str, Any] = json.loads(template if isinstance(template, bytes) else json.dumps(template))
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or []:
        _drop_resources(container, lambda side, name, amount: _configured_amount(configuration, side, name, amount))
        if configuration.env and container.get("env"):
            container["env"] = [entry for entry in container["env"] if entry.get("name") not in configuration.env]
    selector = spec.get("nodeSelector")
    if configuration.node_selector and selector:
        spec["nodeSelector"] = {key: value for key, value in selector.items() if configuration.node_selector.get(key) != value}
    if configuration.tolerations and spec.get("tolerations"):
        added = [_toleration_as_kept(toleration) for toleration in configuration.tolerations]
        spec["tolerations"] = [toleration for toleration in spec["tolerations"] if _toleration_as_kept(toleration) not in added]
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations")
    if configuration.annotations and annotations:
        metadata["annotations"] = {key: value for key, value in annotations.items() if configuration.annotations.get(key) != value}
    return pod


# On a Job's pod template: the resource names an earlier configuration of the Job stated that
# its configurations state no more, comma-separated, written by a placement that leaves the
# template's containers as stored (the webhook mechanism's), which may still hold them (the
# template's own, or an earlier template placement's). The pod-create webhook takes them out of
# each pod's configured containers and the annotation off the pod on its first call, so a name a
# later webhook adds before the reinvocation stays; a placement that rewrites the containers (the
# template mechanism's) takes them out of the template and drops the annotation.
ANNOTATION_STATED_NO_MORE = "cellfit.io/resources-stated-no-more"


def stated_no_more(template: Mapping[str, Any], *, previous: Configuration | None, configuration: Configuration) -> frozenset[str]:
    """The names a placement in ``configuration`` takes out of ``template``'s configured
    containers beyond what the rewrite takes out: those ``previous`` (the configuration the
    template was placed in before) or an earlier placement (the template's
    :data:`ANNOTATION_STATED_NO_MORE`) stated that no configuration of the Job states now, and
    that the rewrite would keep (cores, memory and devices it takes out itself)."""
    earlier = recorded_stated_no_more(template) | (previous.resource_names if previous is not None else frozenset())
    return frozenset(name for name in earlier if name not in configuration.job_resource_names
                     and not _taken_out(name, configuration.managed_resource_names))


def shed_placement(template: Mapping[str, Any], *, previous: Configuration | None,
                   configuration: Configuration) -> tuple[Mapping[str, Any], frozenset[str]]:
    """``template`` (placed before in ``previous``, as it recorded) made ready for a placement, or
    a sample, in ``configuration``: less what ``previous`` added where that is another
    configuration (:func:`without_configuration`), and less the names :func:`stated_no_more`
    gives, with their record; ``template`` itself where neither applies. With those names, which
    a placement that leaves the containers as stored records for the webhook."""
    names = stated_no_more(template, previous=previous, configuration=configuration)
    recorded = ANNOTATION_STATED_NO_MORE in ((template.get("metadata") or {}).get("annotations") or {})
    if (previous is None or previous == configuration) and not names and not recorded:
        return template, names
    shed = template if previous is None or previous == configuration else without_configuration(template, previous)
    return without_resources(shed, names), names


def recorded_stated_no_more(template: Mapping[str, Any]) -> frozenset[str]:
    """The names ``template`` (a pod template, or a pod) records in :data:`ANNOTATION_STATED_NO_MORE`."""
    text = ((template.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_STATED_NO_MORE)
    return frozenset(name.strip() for name in text.split(",") if name.strip()) if isinstance(text, str) else frozenset()


def without_resources(template: Mapping[str, Any], names: AbstractSet[str], *,
                      containers: AbstractSet[str] | None = None) -> dict[str, Any]:
    """``template`` with ``names`` taken out of its ``containers``' (None: every container's)
    requests and limits, whatever their amounts, and without :data:`ANNOTATION_STATED_NO_MORE`,
    which it then says nothing more of. ``template`` is not modified."""
    pod: dict[str, Any] = json.loads(json.dumps(template))
    for container in (pod.get("spec") or {}).get("containers") or []:
        if containers is None or container.get("name") in containers:
            _drop_resources(container, lambda side, name, amount: name in names)
    annotations = (pod.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(ANNOTATION_STATED_NO_MORE, None)
    return pod


def _drop_resources(container: dict[str, Any], drop: Callable[[str, str, object], bool]) -> None:
    """Each request and limit of ``container`` that ``drop`` (side, name, amount) says goes, taken
    out in place; a side left empty goes too."""
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return
    for side in ("requests", "limits"):
        if isinstance(resources.get(side), dict):
            resources[side] = {name: amount for name, amount in resources[side].items() if not drop(side, name, amount)}
            if not resources[side]:
                del resources[side]


def _configured_amount(configuration: Configuration, side: str, name: str, amount: object) -> bool:
    """Whether ``amount`` of ``name`` is what ``configuration`` gives a container on ``side``
    (a request it leaves to its limit, as the API server defaults it, included), by amount."""
    stated = configuration.requests.get(name, configuration.limits.get(name)) if side == "requests" \
        else configuration.limits.get(name)
    if stated is None:
        return False
    try:
        return parse_quantity(str(amount), field=name) == parse_quantity(stated, field=name)
    except InvalidQuantity:
        return str(amount) == stated
