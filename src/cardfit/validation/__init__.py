"""Validation: published measurements replayed as the questions users ask (model, --runtime NAME@RELEASE,
quant, card, load) through the public services, and scored leave one publisher out (validate.py). Records
are parsed here; no service takes a record."""
