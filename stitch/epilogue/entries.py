"""The epilogue as data: JSON in, JSON out, no pickled code."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..number_inputs import NumberInput

# the Python type a scalar read gave in eager, set on the 0-d tensor that stands for it
# (``synthesize/rt_values.scalar``): a deferred call handed that very tensor
# (``log.info("%.3f", m)``) replays it as the number it was
NUMBER_KIND = "_stitch_number"

# the values an entry holds as they are (a constant argument, an appended value)
JSON_TYPES = (bool, int, float, str, type(None))


@dataclass(frozen=True)
class Arg:
    """One argument of a deferred call: a graph output, or a constant captured when traced."""

    kind: str  # "tensor" | "scalar" | "const" | "text" | "template" (text with values)
    # | "mapping" (a dict: value holds [key, Arg as a dict] pairs) | "sequence" (a
    # torch.Size, tuple or list holding sizes: value holds its type and its items as Args)
    output: int | None = None  # index into the extra outputs (tensor, scalar)
    value: Any = None  # JSON value (const); "int" | "float" | "bool" (scalar: a size);
    # template: literal strings and {"output", "how", "spec", "scalar"} records, in order
    str_text: str | None = None  # str() / repr() of an object that is not JSON (text)
    repr_text: str | None = None


@dataclass(frozen=True)
class Entry:
    """One deferred call."""

    kind: str  # "print" | "log" | "warn" | "append" | "call" (a helper by name) | "check"
    # | "rebind" (set an attribute or slot to a container rebuilt from the args)
    # | "add" (add the args, in order, to a counter: an attribute or slot, or a dict's item)
    # | "set_item" (set a dict's item to a value rebuilt from the args)
    location: str  # file:line of the call in the user's source
    args: tuple[Arg, ...] = ()
    options: dict = field(default_factory=dict)  # print: sep/end/stream; log: logger/method;
    # warn: category/filename/lineno/module; append: target (path of a list attribute);
    # check: site/type/message (raise type(message) when the bool output is false);
    # rebind: target and spec (the container's pytree spec, serialized; args its leaves);
    # add: target, key (a dict's item) and start (the value it held when exported, for a
    # target holding none); set_item: target, key and spec (as rebind)
    guard: int | None = None  # index of a bool output: replay only when it is true (branches)

    def to_json(self) -> dict:
        return {"kind": self.kind, "location": self.location,
                "args": [asdict(a) for a in self.args], "options": dict(self.options),
                "guard": self.guard}

    @staticmethod
    def from_json(data: dict) -> Entry:
        return Entry(data["kind"], data["location"], tuple(Arg(**a) for a in data["args"]),
                     dict(data["options"]), data.get("guard"))


@dataclass(frozen=True)
class Epilogue:
    entries: tuple[Entry, ...] = ()
    num_outputs: int = 0
    # leaves of the model's output that are Python numbers in eager (``h.mean().item()``
    # returned): (leaf index, "bool" | "int" | "float"); the graph returns 0-d tensors there
    scalars: tuple[tuple[int, str], ...] = ()
    # arguments the model takes as Python numbers that the graph takes as 0-d tensors
    # (number_inputs.py): made tensors before the graph runs
    number_inputs: tuple[NumberInput, ...] = ()
    # warnings the output's rebuild gives by itself (a class warning in its constructor):
    # (category, text), silenced while the graph's outputs are rebuilt, said by the replay
    # in the model's order (rebuilt.py)
    rebuilt: tuple[tuple[str, str], ...] = ()
    # the graph's check messages too long to sit in the check itself (CUDA takes fewer than
    # 255 bytes; ``rt_checks.check_text``): (key, encoded message)
    messages: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict:
        return {"num_outputs": self.num_outputs, "entries": [e.to_json() for e in self.entries],
                "scalars": [list(s) for s in self.scalars],
                "number_inputs": [n.to_json() for n in self.number_inputs],
                "rebuilt": [list(w) for w in self.rebuilt],
                "messages": [list(m) for m in self.messages]}

    @staticmethod
    def from_json(data: dict) -> Epilogue:
        return Epilogue(tuple(Entry.from_json(e) for e in data["entries"]), data["num_outputs"],
                        tuple((int(i), str(t)) for i, t in data.get("scalars", ())),
                        tuple(NumberInput.from_json(n) for n in data.get("number_inputs", ())),
                        tuple((str(c), str(t)) for c, t in data.get("rebuilt", ())),
                        tuple((str(k), str(m)) for k, m in data.get("messages", ())))

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def append_targets(self) -> list[str]:
        """The list attributes this epilogue appends to (model paths), in first-use order."""
        return list(dict.fromkeys(e.options["target"] for e in self.entries
                                  if e.kind == "append"))

    @property
    def rebind_targets(self) -> list[str]:
        """The attributes and slots this epilogue sets (``rebind`` entries), in order."""
        return list(dict.fromkeys(e.options["target"] for e in self.entries
                                  if e.kind == "rebind"))

    @property
    def counter_targets(self) -> list[str]:
        """The counters and dicts this epilogue adds to or sets items of (``add`` and
        ``set_item`` entries), in order."""
        return list(dict.fromkeys(e.options["target"] for e in self.entries
                                  if e.kind in ("add", "set_item")))
