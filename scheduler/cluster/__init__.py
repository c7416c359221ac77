"""The live cluster: the Kubernetes API connection, list-then-watch reflectors for Nodes and
Pods, and the cache that keeps the engine's view of the cluster current."""
