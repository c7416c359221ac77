"""cellfit's placer: an interchangeable Job's configurations (``configuration``) and the pure
rewrite of a pod template into one of them (``rewrite``), used by the sampling pods and by the
placed Job alike."""
