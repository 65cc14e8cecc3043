"""Rewrites that put one construct's spellings into one form before conversion: a ``return``
or ``break`` inside a loop into flags, ``continue`` into an ``if`` over the rest, asserts and
``if ...: raise`` into checks, conditional expressions into thunks, scalar reads into 0-d
tensors, ``len()`` and slice bounds into sizes, torch's aliases into ``torch.<name>``."""
