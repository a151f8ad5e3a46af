"""The calculation core: pure functions over frozen records. Imports nothing from the CLI, the web
layer, the network or file formats."""
