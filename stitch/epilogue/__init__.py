"""epilogue: side effects computed in the graph, replayed after it.

While ``torch.export`` traces the model, ``recording`` intercepts ``print``, ``logging``
methods (including transformers' ``warning_once``) and ``warnings.warn`` called from user
code: each call becomes an ``Entry`` (data: which call, which stream/logger/category, the
constant arguments) and its tensor arguments become extra graph outputs. After the graph
runs, ``replay`` makes the same calls in the same order with the computed values.
Appends to list attributes of the model (``self.history.append(v)``) are deferred the same
way; ``ListTargets`` says which lists receive them.
"""

from .entries import Arg, Entry, Epilogue
from .record import recording
from .replay import replay
from .targets import ListTargets

__all__ = ["Arg", "Entry", "Epilogue", "ListTargets", "recording", "replay"]
