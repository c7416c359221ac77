"""cellfit's placer (see DESIGN.md). Its capability arrives with its own issue."""
