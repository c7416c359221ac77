"""cellfit's scheduler: the pure core (``core``, ``cells``, ``matching``, ``preemption``) and the
drivers that feed it (``extender`` for kube-scheduler, ``cluster`` for the watch cache,
``simulator`` for traces). See ../README.md and scheduler/README.md."""

__version__ = "0.1.0"
