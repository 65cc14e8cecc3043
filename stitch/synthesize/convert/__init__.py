"""Conversion of control flow and Python state into operator calls (branches into conds with
their effects, in-place writes and state; loops into ``torch.while_loop`` or unrolled loops;
number rules; the rest of a function or of its caller), and the calls: finding the function
behind a site, rewriting it and the helpers it reaches, recompiling and installing it, round
after round (``functions``, ``rounds``, ``round_build``)."""
