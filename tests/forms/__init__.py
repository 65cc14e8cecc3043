"""Spellings of data-dependent control flow, generated, and stitch measured on them."""
