"""matplotlib charts (the `plot` extra); imported only when a command is asked for a chart."""
