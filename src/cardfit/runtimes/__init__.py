"""Runtime adapters and the commands that launch them."""
