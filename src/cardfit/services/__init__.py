"""One module per command: its input description, its report function and its JSON view. The CLI, the web
API and the Python API all call these."""
