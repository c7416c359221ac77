"""The live driver kube-scheduler talks to: request flow (``service``), HTTP surface (``app``),
metrics, and assembly (``server``)."""
