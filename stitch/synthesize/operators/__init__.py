"""What rewritten code calls at run time (``runtime``, bound to ``__stitch_rt__``): operators
that look at their operands when they run (eagerly, or while torch.export traces with fake
tensors) and run plain Python for Python values, or emit ``torch.cond``,
``torch.while_loop``, checks and effect records for values known only from data."""
