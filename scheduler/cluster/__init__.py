"""The live cluster: the Kubernetes API connection, list-then-watch reflectors for Nodes, Pods
and Jobs (one of each per process; feed.py passes the interchangeable Jobs on to the leader's
estimator), and the cache that keeps the engine's view of the cluster current."""
