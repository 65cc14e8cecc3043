"""Random graph-broken models as Python source, for differential fuzzing (hypothesis).

A program is a ``forward`` over one input built from nested data-dependent ifs (with elif,
else, early returns, and/or/not predicates, ``.item()`` reads, a flag whose ``if`` binds a
name that later ``if flag:`` blocks read), prints and logging calls
with tensor values (also inside branches), data-dependent asserts, scalar reads in
arithmetic, tensor-counted loops, buffer updates in branches, and calls into a submodule
that breaks itself; state kept outside the instance (a module global list, a class list
reached as ``type(self).history`` or ``Fuzz.history``, a list in a helper's closure)
appended to, also in branches; tensors written in place after a print took them; format
specs over tensors and scalar reads in log and print text; in-place writes (``add_``,
``index_add_``, item stores, ``h += v``) seen through a view, also in branches; loops over the
``nonzero()`` columns of a mask (expert dispatch); state set before it is read (a list
attribute, a tuple on the class, a module global under ``global``), at the top level or in
branches; a helper module reached as an attribute (``helpers.LOG.append``, ``helpers.note``);
Python arithmetic on a scalar read (``int(h.sum().item() * 10)``: doubles); a numpy draw no
output depends on (LayerDrop's, replayed); an early exit (``if <data>: break`` in a loop over
layers or a range, with prints and Python numbers around it); ``while <tensor>:`` halving. ``load_program`` writes it to a file and imports it, so stitch can read
its source like any user's.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

from hypothesis import strategies as st

from stitch.scratch import scratch_dir

HELPERS = "stitch_fuzz_helpers"  # a helper module the programs reach as an attribute
HELPERS_SOURCE = '''"""State a generated program changes through a module it imports (helpers.LOG)."""
LOG = []


def note(value):
    LOG.append(value)
'''

HEADER = '''import logging
import numpy as np
import stitch_fuzz_helpers as helpers
import torch
from torch import nn

logger = logging.getLogger("stitch.fuzz")
SEEN = []  # a module global the forward appends to
TOTAL = 0.0  # a module global the forward counts in (a float: replayed in order, exactly)
STATS = {"calls": 0}  # a module global dict the forward sets items of, or adds to
LATEST = None  # a module global the forward sets (before it reads it)


def _recorder():
    kept = []  # reachable only through record's closure cell

    def record(value):
        kept.append(value)

    record.kept = kept
    return record


record = _recorder()


class Breaks(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, h):
        g = self.lin(h)
        if g.mean() > 0:
            g = torch.relu(g)
        return g


class Fuzz(nn.Module):
    history = []  # on the class: shared by every instance and copy
    last = None  # on the class: set by the forward, never read before
    hits = 0  # on the class: counters the forward only adds to
    rows = 0

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l0 = nn.Linear(8, 8)
        self.l1 = nn.Linear(8, 8)
        self.sub = Breaks()
        self.register_buffer("count", torch.zeros(()))
        self.levels = None  # rebuilt by the forward before it reads it
        self.calls = 0  # a counter on the instance

    def forward(self, x):
        global TOTAL, LATEST
        h = torch.tanh(self.l0(x)) + x * 0.1
        n, scale = 0, 1.0  # Python numbers the branches may change
'''

EXPRS = ["torch.tanh(self.l1(h))", "h * 0.5 + 0.25", "-h", "h + self.count", "self.sub(h)",
         "torch.sigmoid(h) - 0.5"]
PREDS = ["h.mean() > {c}", "h.sum().item() > {c}", "(h.max() > {c}) and (h.min() < {d})",
         "not h.mean() > {c}", "h.abs().mean().item() > {c} or h.mean() < {d}",
         "float(h.mean()) > {c}"]
CONSTS = ["0.0", "0.1", "-0.1", "0.3", "-0.3"]
STATE = ["SEEN.append(h.sum())", "type(self).history.append(h.mean())",
         "Fuzz.history.append(h.max())", "record(h.min())", "helpers.LOG.append(h.mean())",
         "helpers.note(h.max())"]
INPLACE = ["h.add_(0.5)", "h[0] = h[1] * 2.0", "h.index_add_(0, torch.tensor([3]), h[:1] * 0.5)",
           "h[:, 1] += 1.0", "h += 0.25"]
NUMBERS = ["n += 1", "n -= 2", "n = n * 2", "scale = scale * 0.5", "scale = scale + 0.25"]
COUNTERS = ["self.calls += 1", "type(self).hits += 1", "Fuzz.rows += h.shape[0]",
            "TOTAL -= 0.1", "self.calls = self.calls + 2"]
ITEMS = ["STATS['m'] = h.mean()", "STATS['calls'] += 1", "STATS['pair'] = [h.sum(), {t}]"]
FORMATS = ["logger.warning(f'f{t} {{h.mean().item():.3f}} {{h.sum():.2f}}')",
           "print('q{t} {{:.2f}} {{!r}}'.format(h.max(), h.shape[0]))",
           "print(f'r{t} {{h.min()!r}}')"]


def state_lists(module) -> list:
    """The lists a generated program keeps outside its instances (to compare)."""
    return [module.SEEN, module.Fuzz.history, module.record.kept, module.helpers.LOG]


def scratch_state(module, model) -> tuple:
    """The state a generated program sets on every call (to compare after each call)."""
    return (model.levels, *shared_scratch(module))


def shared_scratch(module) -> tuple:
    """The set-before-read state outside the instance (class, module global)."""
    return (module.Fuzz.last, module.LATEST)


def set_shared_scratch(module, values: tuple) -> None:
    module.Fuzz.last, module.LATEST = values


def counters(module, model) -> tuple:
    """The counters a generated program adds to: the instance's, then the shared ones."""
    return (model.calls, *shared_counters(module))


def shared_counters(module) -> tuple:
    """The counters outside the instance (class, module global): one for every copy."""
    return (module.Fuzz.hits, module.Fuzz.rows, module.TOTAL)


def set_counters(module, model, values: tuple) -> None:
    """Put ``values`` (as ``counters`` reads them) back: the instance's on ``model``."""
    model.calls = values[0]
    set_shared_counters(module, values[1:])


def set_shared_counters(module, values: tuple) -> None:
    module.Fuzz.hits, module.Fuzz.rows, module.TOTAL = values


def _pred(draw) -> str:
    return draw(st.sampled_from(PREDS)).format(c=draw(st.sampled_from(CONSTS)),
                                               d=draw(st.sampled_from(CONSTS)))


@st.composite
def _stmt(draw, depth: int, indent: str, top: bool, tag: list[int]) -> list[str]:
    kinds = ["assign", "assign", "print", "log", "assert", "scalar", "loop"]
    if depth < 2:
        kinds += ["if", "if"]
    if top:
        kinds.append("flag")
    if depth > 0:
        kinds.append("buffer")
    kinds += ["state", "late_write", "format", "inplace", "experts", "number", "scratch",
              "counter", "item", "rounding", "draw", "early_exit", "halving"]
    kind = draw(st.sampled_from(kinds))
    tag[0] += 1
    t = tag[0]
    if kind == "assign":
        return [f"{indent}h = {draw(st.sampled_from(EXPRS))}"]
    if kind == "print":
        return [f"{indent}print('p{t}', h.mean())"]
    if kind == "log":
        return [f"{indent}logger.warning('l{t} %.4f', h.sum())"]
    if kind == "assert":
        return [f"{indent}assert h.abs().max().item() < 1e4, 'a{t} overflow'"]
    if kind == "scalar":
        return [f"{indent}s{t} = h.abs().mean().item()", f"{indent}h = h / (s{t} + 1.0)"]
    if kind == "loop":
        return [f"{indent}k{t} = (h.mean() > 0).long() + 1",
                f"{indent}for _ in range(int(k{t}.item())):",
                f"{indent}    h = torch.tanh(h * 1.5)"]
    if kind == "number":  # a Python int or float changed (in a branch: carried by the cond)
        return [indent + draw(st.sampled_from(NUMBERS))]
    if kind == "counter":  # only added to (in a branch: when the branch ran)
        return [indent + draw(st.sampled_from(COUNTERS))]
    if kind == "item":  # a dict's items (in a branch: refused, a mutation in torch.cond)
        return [indent + draw(st.sampled_from(ITEMS)).format(t=t)]
    if kind == "rounding":  # Python arithmetic on a read rounds as doubles do
        return [f"{indent}b{t} = int(h.sum().item() * 10)", f"{indent}h = h + b{t} * 0.01"]
    if kind == "draw":  # a numpy draw no output depends on (LayerDrop in eval): replayed
        return [f"{indent}p{t} = np.random.uniform(0, 1)",
                f"{indent}if p{t} > 2.0:", f"{indent}    h = h * 0.0"]
    if kind == "buffer":
        return [f"{indent}self.count += 1"]
    if kind == "early_exit":  # `if <data>: break` in a loop over a fixed sequence
        before = draw(st.sampled_from(["", "h = h * 0.5", "n += 1", "print('x{t}', h.mean())"]))
        after = draw(st.sampled_from(["", "scale = scale * 0.5", "print('y{t}', h.sum())",
                                      "h = torch.tanh(self.l1(h))"]))
        layers = draw(st.sampled_from(["range(3)", "(self.l0, self.l1)"]))
        step = "h = torch.tanh(h * 1.2 + 0.1)" if layers == "range(3)" else \
            "h = torch.tanh(j{t}(h)) + h * 0.5"
        return [f"{indent}for j{t} in {layers}:", f"{indent}    " + step.format(t=t),
                f"{indent}    if {_pred(draw)}:",
                *([f"{indent}        " + before.format(t=t)] if before else []),
                f"{indent}        break",
                *([f"{indent}    " + after.format(t=t)] if after else [])]
    if kind == "halving":  # `while <tensor>:` (a torch.while_loop), a Python counter carried
        bound = draw(st.sampled_from(["0.5", "0.9", "2.0"]))
        return [f"{indent}while h.abs().max() > {bound}:", f"{indent}    h = h * 0.5",
                *([f"{indent}    n += 1"] if draw(st.booleans()) else [])]
    if kind == "state":
        return [indent + draw(st.sampled_from(STATE)).format(t=t)]
    if kind == "scratch":  # state set before it is read (the epilogue sets it again)
        return draw(st.sampled_from([
            [f"{indent}self.levels = [h * 0.5, h.mean(0)]",
             f"{indent}h = h + self.levels[1] * 0.1"],
            [f"{indent}type(self).last = (h.sum(), {t})"],
            [f"{indent}LATEST = h.amax(0)", f"{indent}h = h + LATEST * 0.1"]]))
    if kind == "late_write":  # the print must show h before the write
        return [f"{indent}h = h * 1.0", f"{indent}print('w{t}', h[0])",
                f"{indent}h.mul_(0.5)"]
    if kind == "format":
        return [indent + draw(st.sampled_from(FORMATS)).format(t=t)]
    if kind == "inplace":  # a view taken first sees the write, in eager and in the graph
        return [f"{indent}v{t} = h[:2]", indent + draw(st.sampled_from(INPLACE)),
                f"{indent}print('i{t}', v{t}.sum())"]
    if kind == "experts":  # a loop over the selected columns (mixture-of-experts dispatch)
        c = draw(st.sampled_from(CONSTS))
        return [f"{indent}for e{t} in (h.mean(0) > {c}).nonzero():",
                f"{indent}    h[:, e{t}[0]] = h[:, e{t}[0]] * 0.5 + self.l1.bias[e{t}[0]]"]
    if kind == "flag":  # a name bound under `if flag:` only, read under later ones
        c = draw(st.sampled_from(CONSTS))
        between = draw(st.lists(_stmt(depth + 1, indent, False, tag), max_size=1))
        return [f"{indent}f{t} = h.mean() > {c}",
                f"{indent}if f{t}:",
                f"{indent}    v{t} = {draw(st.sampled_from(EXPRS))}",
                *[line for stmt in between for line in stmt],
                f"{indent}if f{t}:",
                f"{indent}    h = h + v{t} * 0.5",
                f"{indent}if not f{t}:",
                f"{indent}    h = h - 0.25",
                f"{indent}h = h * (1.5 if f{t} else 0.5)"]
    lines = [f"{indent}if {_pred(draw)}:"]
    body = draw(st.lists(_stmt(depth + 1, indent + "    ", False, tag), min_size=1, max_size=2))
    lines += [line for stmt in body for line in stmt]
    if top and draw(st.booleans()):
        lines.append(f"{indent}    return h * 2.0, n, scale")
    shape = draw(st.sampled_from(["none", "else", "elif"]))
    if shape == "elif":
        lines.append(f"{indent}elif {_pred(draw)}:")
        lines += [f"{indent}    h = {draw(st.sampled_from(EXPRS))}"]
    if shape in ("else", "elif"):
        lines.append(f"{indent}else:")
        body = draw(st.lists(_stmt(depth + 1, indent + "    ", False, tag), min_size=1,
                             max_size=2))
        lines += [line for stmt in body for line in stmt]
    return lines


@st.composite
def programs(draw) -> str:
    tag = [0]
    stmts = draw(st.lists(_stmt(0, "        ", True, tag), min_size=1, max_size=4))
    body = [line for stmt in stmts for line in stmt]
    return HEADER + "\n".join(body) + "\n        return h * (1.0 + 0.1 * n) * scale, n, scale\n"


def load_program(source: str, directory: str | None = None):
    """Write ``source`` to a file, import it, and return a fresh ``Fuzz`` model."""
    directory = directory or scratch_dir()
    if HELPERS not in sys.modules:  # one helper module for every program of a run
        helpers = os.path.join(directory, HELPERS + ".py")
        with open(helpers, "w") as f:
            f.write(HELPERS_SOURCE)
        spec = importlib.util.spec_from_file_location(HELPERS, helpers)
        sys.modules[HELPERS] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[HELPERS])
    sys.modules[HELPERS].LOG.clear()  # each program starts from an empty list, as its own
    handle, path = tempfile.mkstemp(suffix=".py", prefix="fuzz_", dir=directory)
    with os.fdopen(handle, "w") as f:
        f.write(source)
    name = os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import does: its globals reachable by module name
    spec.loader.exec_module(module)
    return module
