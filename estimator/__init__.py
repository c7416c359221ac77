"""cellfit's sampling-pod estimator (AlloX §4.1, SLearn): short runs of an interchangeable Job in
each configuration, extrapolated into processing times and memory demands for AlloX.

Pure core: ``model`` (fit, uncertainty, posterior), ``sampling`` (lengths, pilots, adaptive
ratio, long samples), ``planner`` (one Job's next actions), ``contract`` (annotations and the
termination message). Live driver: ``controller``. See README.md.
"""
