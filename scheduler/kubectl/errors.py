"""What ``kubectl cellfit`` tells a user instead of a traceback: each error names what is
missing (cellfit, a Service port, an RBAC grant) and how to get it."""

from __future__ import annotations


class PluginError(Exception):
    """A failure the user can act on; ``str()`` is the whole message."""

    exit_code = 1


class UsageError(PluginError):
    """Bad arguments: kubectl's own exit code for them."""

    exit_code = 2


class NotInstalled(PluginError):
    """No cellfit Service where the plugin looks."""

    exit_code = 3


class Unreachable(PluginError):
    """The API server, or cellfit behind it, does not answer."""

    exit_code = 4


class Forbidden(PluginError):
    """RBAC refuses the user something the answer needs."""

    exit_code = 5


class NotFound(PluginError):
    """The object asked about does not exist."""

    exit_code = 6


class ViewUnavailable(PluginError):
    """cellfit answers, but not this view (its policy has no cells, AlloX is off): cellfit's
    own sentence."""

    exit_code = 7
