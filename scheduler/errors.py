"""cellfit's domain exceptions. Every error a user can cause names the field it is about, so the
message that reaches a FailedScheduling event or an HTTP 400 is enough to fix the input."""


class CellfitError(Exception):
    """Base of every error cellfit raises on purpose."""


class ConfigError(CellfitError):
    """The configuration file is unreadable or invalid; the message names the field."""


class InvalidRequest(CellfitError):
    """A request cannot be understood (malformed JSON, a missing or ill-typed field)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class InvalidQuantity(InvalidRequest):
    """A Kubernetes resource quantity that does not parse or is out of range."""


class InvalidAnnotation(InvalidRequest):
    """A cellfit label or annotation on a pod or job has a value cellfit cannot use."""


class UnknownNode(CellfitError):
    """A node name cellfit has no record of."""

    def __init__(self, node_name: str) -> None:
        super().__init__(f"node {node_name!r} is unknown to cellfit")
        self.node_name = node_name


class SchedulingConflict(CellfitError):
    """A decision can no longer be carried out because the cluster changed under it (e.g. the
    node filled up between filter and bind)."""


class ClusterUnavailable(CellfitError):
    """An action needs the Kubernetes API and cellfit has no connection to one."""


class NotReady(CellfitError):
    """cellfit cannot decide yet: its watch cache has not synced, so a decision could hand out
    GPUs that pods it has not listed yet already hold."""


class KubernetesApiError(CellfitError):
    """The Kubernetes API answered with an error or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
