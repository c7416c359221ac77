"""Kubernetes objects as cellfit reads them: the wire structs (``wire``) and their translation
into the core's values (``translate``). Shared by the extender and the watch cache."""
