"""An interchangeable Job's configurations: the ``cellfit.io/configurations`` annotation, parsed
and validated.

The annotation is JSON keyed by configuration kind (``cpu``, ``gpu``: AlloX's two
interchangeable resources). Each configuration holds the container ``resources`` set in every
container of the pod template (the names it states; a name only another configuration states is
taken out, and one none states kept: :mod:`placer.rewrite`), and optionally ``env``, ``nodeSelector``, ``tolerations``
and ``annotations`` (DESIGN.md, "The user's contract")::

    {"cpu": {"resources": {"cpu": "16", "memory": "32Gi"}},
     "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "2", "memory": "16Gi"},
             "env": {"CUDA": "1"}}}

``resources`` is either a flat map (the requests; extended resources such as GPUs are also
written as limits, which Kubernetes requires of them) or ``{"requests": {...}, "limits": {...}}``
as in a container spec. Every error names the field, for the Job's Event and condition.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Final, Literal, Mapping

from scheduler.constants import ANNOTATION_CONFIGURATIONS, RESOURCE_CPU, RESOURCE_MEMORY
from scheduler.core.labels import LABEL_KEY, LABEL_NAME_RULE, LABEL_VALUE
from scheduler.core.resources import cpu_millis, device_count, parse_quantity
from scheduler.errors import InvalidAnnotation, InvalidQuantity

ConfigurationKind = Literal["cpu", "gpu"]
KINDS: Final[tuple[ConfigurationKind, ...]] = ("cpu", "gpu")
_KEYS: Final = frozenset({"resources", "env", "nodeSelector", "tolerations", "annotations"})
# Resources the kubelet lets a pod exceed its request of; every other one (GPUs, hugepages,
# devices) must be given as a limit equal to its request.
_OVERCOMMITTABLE: Final = frozenset({RESOURCE_CPU, RESOURCE_MEMORY, "ephemeral-storage"})
_TOLERATION_KEYS: Final = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_TOLERATION_OPERATORS: Final = ("Equal", "Exists")
_TOLERATION_EFFECTS: Final = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
# A toleration's key is a label key, its value (operator Equal) a label value: the API server
# refuses the pod otherwise (ValidateTolerations), and every sampling run with it.
# The API server caps all annotations of an object at 256 KiB together.
MAX_ANNOTATION_BYTES: Final = 256 * 1024
# What AlloX books a machine by beside devices (placer/controller.py counts one pod of the rewrite
# of its template's shape, its containers' own resources left out): a configured container asks
# of these what its configuration states, and nothing of one it does not.
BOOKED_RESOURCES: Final = frozenset({RESOURCE_CPU, RESOURCE_MEMORY})


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Configuration:
    """One way to run a Job: what each of its containers requests, and what else its pods carry."""

    kind: ConfigurationKind
    requests: Mapping[str, str]
    limits: Mapping[str, str]
    env: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    node_selector: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    tolerations: tuple[Mapping[str, Any], ...] = ()
    annotations: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    # The resource names any configuration of its Job states (requests or limits), set by
    # :func:`parse_configurations`: the rewrite takes those the chosen one does not state out of
    # a configured container (and cores, memory and devices always: :mod:`placer.rewrite`) and
    # keeps every other name the container asks as it has it. Not part of what the
    # configuration is: one is equal to itself parsed beside another edit of its Job's other
    # kinds (a Job placed in it is not shed of it and placed in it again).
    job_resource_names: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def resource_names(self) -> frozenset[str]:
        """The resource names this configuration states, in its requests or limits."""
        return frozenset(self.requests) | frozenset(self.limits)

    @property
    def managed_resource_names(self) -> frozenset[str]:
        """The names the rewrite sets or removes in a configured container: this configuration's,
        those any other configuration of its Job states, and cores and memory, which AlloX books
        (a configuration sizes them whole: stated, or not asked)."""
        return self.resource_names | self.job_resource_names | BOOKED_RESOURCES

    def device_count(self, resource: str) -> int:
        """Whole devices of ``resource`` (e.g. ``nvidia.com/gpu``) one container asks for."""
        amount = self.limits.get(resource, self.requests.get(resource))
        if amount is None:
            return 0
        return device_count(amount, field=f"{self.kind}.resources.{resource}")


@dataclass(frozen=True)
class Configurations:
    """A Job's interchangeable configurations, by kind, in the order of :data:`KINDS`."""

    by_kind: Mapping[ConfigurationKind, Configuration]

    @property
    def kinds(self) -> tuple[ConfigurationKind, ...]:
        return tuple(kind for kind in KINDS if kind in self.by_kind)

    def __getitem__(self, kind: ConfigurationKind) -> Configuration:
        return self.by_kind[kind]

    def __contains__(self, kind: object) -> bool:
        return kind in self.by_kind


def json_object_annotation(text: str, *, where: str, expected: str) -> dict[str, Any]:
    """A non-empty JSON object from an annotation's value; :class:`InvalidAnnotation` naming
    ``where`` otherwise (``expected`` says what was wanted)."""
    if len(text.encode()) > MAX_ANNOTATION_BYTES:
        raise InvalidAnnotation(f"is larger than {MAX_ANNOTATION_BYTES} bytes", field=where)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise InvalidAnnotation(f"is not valid JSON: {error}", field=where) from None
    if not isinstance(document, dict) or not document:
        raise InvalidAnnotation(f"must be {expected}", field=where)
    return document


def parse_configurations(text: str | None, *, where: str = ANNOTATION_CONFIGURATIONS) -> Configurations:
    """Parse the annotation's value. Raises :class:`InvalidAnnotation` naming the field
    (``cellfit.io/configurations.gpu.resources.nvidia.com/gpu``) for anything unusable."""
    document = _document(text, where=where)
    by_kind: dict[ConfigurationKind, Configuration] = {}
    for kind, body in document.items():
        if kind not in KINDS:
            raise _unknown_kind(kind, where=where)
        by_kind[kind] = _configuration(kind, body, where=f"{where}.{kind}")
    names = frozenset().union(*(configuration.resource_names for configuration in by_kind.values()))
    return Configurations(by_kind=MappingProxyType({kind: replace(by_kind[kind], job_resource_names=names)
                                                    for kind in KINDS if kind in by_kind}))


def configuration_errors(text: str | None, *, where: str = ANNOTATION_CONFIGURATIONS) -> list[InvalidAnnotation]:
    """Every independent mistake of the annotation's value, each naming its field, in the order
    :func:`parse_configurations` meets them (it raises the first); [] where it reads. What the
    webhooks and the estimator tell users (user26 #6: an unknown key hid a half GPU): a key in
    error is judged apart from the others, a resource quantity apart from its neighbours, and
    what follows from another mistake (a request against its limit unread) stays out."""
    try:
        document = _document(text, where=where)
    except InvalidAnnotation as error:
        return [error]
    errors: list[InvalidAnnotation] = []
    for kind, body in document.items():
        if kind not in KINDS:
            errors.append(_unknown_kind(kind, where=where))
        else:
            errors += _configuration_errors(body, where=f"{where}.{kind}")
    return errors


def _document(text: str | None, *, where: str) -> dict[str, Any]:
    if text is None or not text.strip():
        raise InvalidAnnotation("is missing or empty; expected a JSON object with cpu and/or gpu", field=where)
    return json_object_annotation(text, where=where, expected="a JSON object with a cpu and/or a gpu configuration")


def _unknown_kind(kind: str, *, where: str) -> InvalidAnnotation:
    return InvalidAnnotation(f"unknown configuration kind {kind!r}; expected one of {', '.join(KINDS)}", field=where)


def _unknown_key(key: str, *, where: str) -> InvalidAnnotation:
    return InvalidAnnotation(f"unknown key {key!r}; expected {', '.join(sorted(_KEYS))}", field=where)


def _configuration_errors(body: object, *, where: str) -> list[InvalidAnnotation]:
    """:func:`_configuration`'s checks, each key's on its own."""
    if not isinstance(body, dict):
        return [InvalidAnnotation("must be a JSON object", field=where)]
    errors = [_unknown_key(key, where=where) for key in sorted(set(body) - _KEYS)]
    if "resources" not in body:
        errors.append(InvalidAnnotation("is missing; every configuration names its container resources", field=f"{where}.resources"))
    else:
        errors += _resources_errors(body["resources"], where=f"{where}.resources")
    for check in (lambda: _tolerations(body.get("tolerations", []), where=f"{where}.tolerations"),
                  lambda: _env(body.get("env", {}), where=f"{where}.env"),
                  lambda: _string_map(body.get("nodeSelector", {}), where=f"{where}.nodeSelector"),
                  lambda: _string_map(body.get("annotations", {}), where=f"{where}.annotations")):
        try:
            check()
        except InvalidAnnotation as error:
            errors.append(error)
    return errors


def _resources_errors(body: object, *, where: str) -> list[InvalidAnnotation]:
    """Each resource quantity's mistake; then, where they all read, :func:`_resources`'s."""
    errors: list[InvalidAnnotation] = []
    if isinstance(body, dict) and body:
        nested = set(body) <= {"requests", "limits"}
        groups = [(body[part], f"{where}.{part}") for part in ("requests", "limits") if part in body] if nested else [(body, where)]
        for group, place in groups:
            for name, amount in group.items() if isinstance(group, dict) else ():
                try:
                    _quantities({name: amount}, where=place)
                except InvalidAnnotation as error:
                    errors.append(error)
    if not errors:
        try:
            _resources(body, where=where)
        except InvalidAnnotation as error:
            errors.append(error)
    return errors


@lru_cache(maxsize=8192)
def parse_configurations_cached(text: str | None) -> Configurations:
    """:func:`parse_configurations` once per distinct annotation value: the live drivers read
    every interchangeable Job's configurations on every pass (the result is immutable)."""
    return parse_configurations(text)


def _configuration(kind: ConfigurationKind, body: object, *, where: str) -> Configuration:
    if not isinstance(body, dict):
        raise InvalidAnnotation("must be a JSON object", field=where)
    unknown = sorted(set(body) - _KEYS)
    if unknown:
        raise _unknown_key(unknown[0], where=where)
    if "resources" not in body:
        raise InvalidAnnotation("is missing; every configuration names its container resources", field=f"{where}.resources")
    requests, limits = _resources(body["resources"], where=f"{where}.resources")
    tolerations = _tolerations(body.get("tolerations", []), where=f"{where}.tolerations")
    return Configuration(
        kind=kind,
        requests=_frozen(requests),
        limits=_frozen(limits),
        env=_frozen(_env(body.get("env", {}), where=f"{where}.env")),
        node_selector=_frozen(_string_map(body.get("nodeSelector", {}), where=f"{where}.nodeSelector")),
        tolerations=tuple(MappingProxyType(dict(t)) for t in tolerations),
        annotations=_frozen(_string_map(body.get("annotations", {}), where=f"{where}.annotations")),
    )


def _tolerations(tolerations: object, *, where: str) -> list[dict[str, Any]]:
    if not isinstance(tolerations, list):
        raise InvalidAnnotation("must be a list of tolerations", field=where)
    for index, toleration in enumerate(tolerations):
        place = f"{where}[{index}]"
        if not isinstance(toleration, dict) or not toleration:
            raise InvalidAnnotation("must be a toleration object", field=place)
        extra = sorted(set(toleration) - _TOLERATION_KEYS)
        if extra:
            raise InvalidAnnotation(f"unknown key {extra[0]!r}", field=place)
        _toleration_values(toleration, where=place)
    return tolerations


def _toleration_values(toleration: Mapping[str, Any], *, where: str) -> None:
    """The API server's checks of a toleration (its pods would be refused for each of them, and
    every sampling run of the configuration fail on a pod field the user never wrote)."""
    for name in ("key", "operator", "value", "effect"):
        if name in toleration and not isinstance(toleration[name], str):
            raise InvalidAnnotation(f"must be a string, got {toleration[name]!r}", field=f"{where}.{name}")
    if toleration.get("key") and not LABEL_KEY.fullmatch(toleration["key"]):
        raise InvalidAnnotation(f"{toleration['key']!r} is not a taint key the API server takes: an optional DNS-subdomain "
                                f"prefix and '/', then {LABEL_NAME_RULE}", field=f"{where}.key")
    operator = toleration.get("operator") or "Equal"
    if operator not in _TOLERATION_OPERATORS:
        raise InvalidAnnotation(f"{operator!r} is not a toleration operator; expected {' or '.join(_TOLERATION_OPERATORS)}",
                                field=f"{where}.operator")
    if toleration.get("effect", "") not in _TOLERATION_EFFECTS:
        raise InvalidAnnotation(f"{toleration['effect']!r} is not a taint effect; expected "
                                f"{', '.join(e for e in _TOLERATION_EFFECTS if e)} or none", field=f"{where}.effect")
    if not toleration.get("key") and operator != "Exists":
        raise InvalidAnnotation("without a key the operator must be Exists (it tolerates every taint)", field=f"{where}.operator")
    if operator == "Exists" and toleration.get("value"):
        raise InvalidAnnotation("must be empty with operator Exists", field=f"{where}.value")
    if operator == "Equal" and not LABEL_VALUE.fullmatch(toleration.get("value", "")):
        raise InvalidAnnotation(f"{toleration['value']!r} is not a taint value the API server takes: empty, or "
                                f"{LABEL_NAME_RULE}", field=f"{where}.value")
    if "tolerationSeconds" in toleration:
        seconds = toleration["tolerationSeconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            raise InvalidAnnotation(f"must be a whole number of seconds, got {seconds!r}", field=f"{where}.tolerationSeconds")
        if toleration.get("effect") != "NoExecute":
            raise InvalidAnnotation("is only for effect NoExecute", field=f"{where}.tolerationSeconds")


def _resources(body: object, *, where: str) -> tuple[dict[str, str], dict[str, str]]:
    if not isinstance(body, dict) or not body:
        raise InvalidAnnotation("must be a non-empty JSON object of resource quantities", field=where)
    if set(body) <= {"requests", "limits"}:
        requests = _quantities(body.get("requests", {}), where=f"{where}.requests")
        limits = _quantities(body.get("limits", {}), where=f"{where}.limits")
        for name, amount in requests.items():
            if name not in _OVERCOMMITTABLE and name not in limits:
                limits[name] = amount
        _check_within_limits(requests, limits, where=f"{where}.requests")
    else:
        requests = _quantities(body, where=where)
        limits = {name: amount for name, amount in requests.items() if name not in _OVERCOMMITTABLE}
    if not requests and not limits:
        raise InvalidAnnotation("names no resource", field=where)
    asked = {**requests, **limits}
    hugepages = sorted(name for name in asked if name.startswith("hugepages-"))
    if hugepages and RESOURCE_CPU not in asked and RESOURCE_MEMORY not in asked:
        # As the API server refuses such a container.
        raise InvalidAnnotation("hugepages need cpu or memory asked beside them", field=f"{where}.{hugepages[0]}")
    return requests, limits


def _check_within_limits(requests: Mapping[str, str], limits: Mapping[str, str], *, where: str) -> None:
    """What the API server's pod validation refuses of a container's resources: a request above
    its limit, or (GPUs and other devices) a request other than its limit."""
    for name, amount in requests.items():
        if name not in limits:
            continue
        requested, limit = parse_quantity(amount, field=f"{where}.{name}"), parse_quantity(limits[name], field=name)
        if name not in _OVERCOMMITTABLE and requested != limit:
            raise InvalidAnnotation(f"{amount!r} must equal its limit {limits[name]!r}", field=f"{where}.{name}")
        if requested > limit:
            raise InvalidAnnotation(f"{amount!r} is more than its limit {limits[name]!r}", field=f"{where}.{name}")


def is_extended_resource(name: str) -> bool:
    """An extended resource (``nvidia.com/gpu``): a device counted whole, as the API server wants
    it (native resources have no domain, or ``kubernetes.io/``)."""
    return "/" in name and not name.startswith(("kubernetes.io/", "requests."))


# What the API server takes as a container's resource name: a standard one, or a qualified name
# (a DNS subdomain, "/", a name of up to 63 characters: a label key with its prefix) outside the
# "requests." prefix quotas use.
_STANDARD_RESOURCES: Final = frozenset({RESOURCE_CPU, RESOURCE_MEMORY, "ephemeral-storage"})


def _check_resource_name(name: str, *, where: str) -> None:
    """The API server refuses a pod asking for any other name: the start was then refused, or
    with the webhook mechanism every pod of the started Job."""
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not name.startswith("hugepages-"):
            raise InvalidAnnotation(f"is no resource a container may ask for: expected {', '.join(sorted(_STANDARD_RESOURCES))}, "
                                    "hugepages-<size>, or an extended resource such as nvidia.com/gpu", field=where)
    elif name.startswith("requests.") or not LABEL_KEY.fullmatch(name):  # "/" in it: the prefix is there
        raise InvalidAnnotation("is no resource name a container may ask for: an extended resource is a domain, '/' and a "
                                "name, such as nvidia.com/gpu", field=where)


def _quantities(body: object, *, where: str) -> dict[str, str]:
    if not isinstance(body, dict):
        raise InvalidAnnotation("must be a JSON object of resource quantities", field=where)
    quantities: dict[str, str] = {}
    for name, amount in body.items():
        place = f"{where}.{name}"
        _check_resource_name(name, where=place)
        if isinstance(amount, bool) or not isinstance(amount, (str, int, float)):
            raise InvalidAnnotation(f"expected a quantity such as \"2\" or \"16Gi\", got {amount!r}", field=place)
        try:
            if is_extended_resource(name):
                device_count(amount, field=place)  # half a GPU is refused by the API server
            elif name == RESOURCE_CPU:
                cpu_millis(amount, field=place)  # read in millicores, which must fit int64
            else:
                parse_quantity(amount, field=place)
        except InvalidQuantity as error:
            raise InvalidAnnotation(str(error).removeprefix(f"{place}: "), field=place) from None
        quantities[name] = str(amount)
    return quantities


def _env(body: object, *, where: str) -> dict[str, str]:
    """Env variables by name: a name is printable ASCII without '=' (the API server refuses any
    other, and the webhook mechanism sets env only as each pod is created: every pod refused)."""
    env = _string_map(body, where=where)
    for name in env:
        if "=" in name or not all(" " <= character <= "~" for character in name):
            raise InvalidAnnotation("is no env variable name: printable ASCII without '='", field=f"{where}.{name}")
    return env


def _string_map(body: object, *, where: str) -> dict[str, str]:
    if not isinstance(body, dict):
        raise InvalidAnnotation("must be a JSON object of strings", field=where)
    for key, value in body.items():
        if not isinstance(value, str):
            raise InvalidAnnotation(f"must be a string, got {value!r}", field=f"{where}.{key}")
        if not key:
            raise InvalidAnnotation("has an empty key", field=where)
    return dict(body)
