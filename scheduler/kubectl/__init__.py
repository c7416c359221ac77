"""``kubectl cellfit``: a kubectl plugin that explains cellfit's decisions where users look.

``facts`` reads the Kubernetes objects and cellfit's inspect API (through the API server's
service proxy, so RBAC decides who may) into plain values; ``why`` turns them into one answer
(pure: no I/O, no clock); ``views`` and ``output`` print the inspect API's tables.
"""
