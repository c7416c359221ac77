"""cellfit's estimator (see DESIGN.md). Its capability arrives with its own issue."""
