"""Spellings of data-dependent control flow, as small ``nn.Module`` sources, for stitch.

A form is one construct (``if``, ``elif``, a conditional expression, ``while``, a
``while True:`` left by a ``break`` on the test, ``for``, an
early ``return``, ``break``, ``continue``, ``raise`` (alone, or an ``if``/``elif`` chain of raises), ``assert``, ``torch._assert`` as
``_assert`` (``from torch import _assert``), ``try``/``except``, a loop over the rows of a
tensor with a branch per row, the rows' results stacked)
crossed with where it sits (the forward, a loop over layers, another ``if``, a helper
function, a submodule, a method of a plain object, a closure), what it tests (a tensor
comparison, an ``.item()`` read, ``bool(t)``, ``any``/``all``, ``torch.isnan``,
``torch.equal``, a chained comparison, ``and``/``or``/``not``, ``max`` of a ``tolist()``,
a dynamic dimension, a list of sizes), what it carries out (tensors of the same or another shape, Python numbers and
bools, None-or-tensor, a tuple, a dict, a list, an attribute) and what it does inside (print
or log or warn with a format spec over ``.item()``, append, set a dict item, count, mutate a
module global without ``global``, append to a list nothing reads), each test and effect also written over several lines.

Every form is named ``construct/position/predicate/carries-X/effect-Y``; its id is the first
10 hex digits of the name's sha1 (unique over the cross product), so both stay the same across runs. ``source(form)`` is the
module's text; ``source(form, sides=True)`` is the same module with every data-dependent
test wrapped in ``_side(i, test)``, which records the outcome, so a runner can pick inputs
that take every side (``tests/forms/run.py``) from the candidates ``inputs(form)`` gives.

How each construct is spelled (``_site``): ``while (test) and k < 3`` (bounded: a test on a
size or a NaN never turns false); ``for i in range(1 + int(test))`` (a trip count read from
data); ``break``/``continue`` in the loop over layers where the form sits in one, else in a
``for j in range(3)`` of their own; ``raise``/``assert``/``_assert`` reject the inputs on one side, so
those inputs are only held out, never examples; a conditional expression holds no statement,
so its effect follows it unconditionally.

The forward of ``if/top/item-cmp/carries-int/effect-print`` (id 5629c36a5f)::

    def forward(self, x):
        h = x * 1.5
        n = 0
        if h.mean().item() > 0.5:
            print(f"f5629c36a5f mean={h.mean().item():.2f}")
            n = n + 1
        else:
            n = n - 2
        return h + n, n
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from dataclasses import dataclass

import torch

CONSTRUCTS = ("if", "elif", "ifexp", "while", "for", "return", "break", "continue", "raise",
              "assert", "torch-assert", "try", "while-true", "raise-elif", "map-rows")
POSITIONS = ("top", "loop", "nested", "helper", "submodule", "object", "closure")

# what a test reads: the tensor ``h`` the site sees (``x * 1.5``, through layers that scale)
PREDICATES = {
    "tensor-cmp": "h.sum() > 0",
    "item-cmp": "h.mean().item() > 0.5",
    "bool": "bool(h.max() > 1.0)",
    "any": "(h > 2.0).any()",
    "all": "(h > 0).all()",
    "isnan": "torch.isnan(h).any()",
    "equal": "torch.equal(h, h.abs())",
    "chained": "0 < h.mean().item() < 1",
    "and": "h.sum() > 0 and h.max().item() < 3.0",
    "or": "h.min() > 0 or h.mean().item() < -1.0",
    "not": "not h.mean() > 0",
    "any-gen": "any(t.max() > 2.0 for t in (h, h * 0.5))",  # a generator over tensors
    "max-tolist": "max((h > 0).sum(-1).tolist()) > 4",  # a fold of a list read from data
    "shape0": "h.shape[0] > 3",
    "shape1-mod": "h.shape[1] % 8",
    "shape-or": "h.shape[0] > 3 or h.shape[1] % 8 != 0",
    "shape-any": "any(s % 4 != 0 for s in h.shape)",
    "shape-list": "list(h.shape) != [4, 8]",  # a cache key (RT-DETR's anchors: shapes != ...)
    # a test written over two lines (in parentheses, as formatters wrap a long one)
    "and-lines": "(\n    h.sum() > 0\n    and h.max().item() < 3.0\n)",
}
SHAPE_PREDICATES = ("shape0", "shape1-mod", "shape-or", "shape-any", "shape-list")
ELIF_TEST = "h.abs().max() > 2.0"  # the second test of an elif chain (a magnitude)
NESTED_TEST = "h[:, -1].max() > -5.0"  # the ``if`` a nested form sits in (NaN is in column 0)


@dataclass(frozen=True)
class Carry:
    """A value the construct sets: ``target = values[i]`` on side i, read by ``result``."""

    target: str
    values: tuple[str, str, str]
    init: str  # the line before the construct ("" when ``h`` itself)
    result: str  # what the function returns


CARRIES = {
    "tensor": Carry("h", ("h * 2.0", "h - 1.0", "h * 0.5"), "", "h"),
    "reshaped": Carry("h", ("h.sum(0)", "h - 1.0", "h.mean(-1) * 0.5"), "", "h"),
    "int": Carry("n", ("n + 1", "n - 2", "n + 5"), "n = 0", "h + n, n"),
    "float": Carry("s", ("s * 0.5", "s + 0.25", "s * 3.0"), "s = 1.0", "h * s, s"),
    "bool": Carry("flag", ("True", "False", "not flag"), "flag = False", "h, flag"),
    "optional": Carry("extra", ("h.mean(0)", "None", "h.amax(0)"), "extra = None",
                      "h if extra is None else h + extra"),
    "tuple": Carry("pair", ("(h * 2.0, h.sum())", "(h - 1.0, h.mean())", "(h, h.amax())"),
                   "pair = (h, h.sum())", "pair[0] + pair[1]"),
    "dict": Carry("d", ('{"a": h * 2.0, "b": h.sum()}', '{"a": h - 1.0, "b": h.mean()}',
                        '{"a": h, "b": h.amax()}'), 'd = {"a": h, "b": h.sum()}',
                  'd["a"] + d["b"]'),
    "list": Carry("items", ("[h * 2.0, h + 1.0]", "[h - 1.0, h * 0.5]", "[h, h]"),
                  "items = [h, h]", "items[0] + items[1]"),
    "attr": Carry("{obj}.h", ("h * 2.0", "h - 1.0", "h * 0.5"), "{obj}.h = h", "h + {obj}.h"),
}

# ``{obj}`` (replaced, not formatted) is the object the site's code holds (the model, the submodule, the plain object)
EFFECTS = {
    "none": "",
    "print": 'print(f"{tag} mean={h.mean().item():.2f}")',
    "log": 'logger.warning("{tag} sum=%.3f", h.sum().item())',
    "warn": 'warnings.warn(f"{tag} max={h.max().item():.1f}")',
    "append": "{obj}.seen.append(h.sum())",
    "dict-set": 'STATS["{tag}"] = h.mean()',
    "counter": "{obj}.n += 1",
    "global": "HISTORY.append(h.min().item())",
    # sizes in the text (a tuple, a torch.Size), through a logger fetched at the call
    "print-shape": 'print(f"{tag} shape={tuple(h.shape)} size={h.shape}")',
    "log-getlogger": 'logging.getLogger("forms").warning("{tag} rows %s", list(h.shape))',
    "log-percent": 'logger.warning("{tag} mean=%.2f max=%5.1f" % (h.mean().item(), h.max().item()))',
    # a list the function grows and never reads (``steps = []`` where the function starts)
    "dead-append": "steps.append(h.sum())",
    # a call over several lines, one argument per line
    "log-lines": 'logger.warning(\n    "{tag} sum=%.3f max=%.1f",\n    h.sum().item(),\n'
                 '    h.max().item(),\n)',
}


@dataclass(frozen=True)
class Form:
    construct: str
    position: str
    predicate: str
    carry: str
    effect: str

    @property
    def name(self) -> str:
        return (f"{self.construct}/{self.position}/{self.predicate}/carries-{self.carry}/"
                f"effect-{self.effect}")

    @property
    def id(self) -> str:
        return hashlib.sha1(self.name.encode()).hexdigest()[:10]


def all_forms() -> list[Form]:
    """The full cross product, in a fixed order."""
    return [Form(*combo) for combo in itertools.product(
        CONSTRUCTS, POSITIONS, PREDICATES, CARRIES, EFFECTS)]


def parse(name: str) -> Form:
    construct, position, predicate, carry, effect = name.split("/")
    return Form(construct, position, predicate, carry.removeprefix("carries-"),
                effect.removeprefix("effect-"))


def sample(n: int, seed: int = 0) -> list[Form]:
    """``n`` distinct forms, constructs in turn (so each is as frequent as the others), the
    rest drawn with ``random.Random(seed)``: the same list for the same arguments."""
    rng = random.Random(seed)
    seen: set[Form] = set()
    out: list[Form] = []
    while len(out) < min(n, len(CONSTRUCTS) * len(POSITIONS) * len(PREDICATES)
                         * len(CARRIES) * len(EFFECTS)):
        form = Form(CONSTRUCTS[len(out) % len(CONSTRUCTS)], rng.choice(POSITIONS),
                    rng.choice(list(PREDICATES)), rng.choice(list(CARRIES)),
                    rng.choice(list(EFFECTS)))
        if form not in seen:
            seen.add(form)
            out.append(form)
    return out


# -- inputs ------------------------------------------------------------------------------

def inputs(form: Form, seed: int = 1) -> list[torch.Tensor]:
    """Candidate inputs: values on both sides of every test's threshold (signs, magnitudes,
    a NaN, all non-negative, small and positive: a test of ``0 < mean < 1`` in a loop that
    doubles ``h`` passes three times only for those); other shapes where the form tests a
    shape."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(4, 8, generator=g)
    mixed = []
    if form.construct == "map-rows" and form.predicate not in SHAPE_PREDICATES:
        # rows of each sign in every input, over several numbers of rows (a dynamic batch)
        mixed = [torch.cat([base[:r].abs() * scale + 0.05, -base[:k].abs() * scale - 0.05])
                 for r, k, scale in ((2, 2, 1.0), (3, 3, 0.1), (1, 4, 2.0), (4, 1, 0.3))]
    if form.predicate in SHAPE_PREDICATES:
        sized = [torch.randn(rows, cols, generator=g) * scale for rows, cols, scale in (
            (4, 8, 2.0), (6, 8, 0.1), (2, 8, 2.0), (3, 8, 0.1), (4, 12, 0.1), (5, 16, 2.0),
            (3, 6, 2.0), (6, 16, 0.1))]
        return [*sized, -20 - torch.randn(5, 8, generator=g).abs()]
    nan = base.clone()
    nan[0, 0] = float("nan")
    return [*mixed, base, base.abs() * 2 + 1, -(base.abs() * 2 + 1), torch.zeros(4, 8), base * 0.1,
            torch.full((4, 8), 0.4) + base * 0.01, -20 - base.abs(), nan, base.abs() * 0.3,
            base.abs() * 0.02 + 0.05]


# -- source ------------------------------------------------------------------------------

HEADER = '''"""Form {id}: {name}."""
import logging
import warnings

import torch
from torch import _assert, nn

logger = logging.getLogger("forms")
HISTORY = []  # a module global the form appends to (no ``global`` statement)
STATS = {{}}  # a module global dict the form sets items of
{sides}

class Scale(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = nn.Parameter(torch.tensor(factor))

    def forward(self, h):
        return h * self.factor

'''

SIDES = '''SIDES = set()  # (test, outcome) pairs seen: only in the copy that records them


def _side(test, value):
    SIDES.add((test, bool(value)))
    return value
'''

STATE_INIT = ["self.n = 0", "self.seen = []", "self.h = None"]


class _Tests:
    """Numbers the data-dependent tests of one source and wraps them when recording."""

    def __init__(self, record: bool) -> None:
        self.record, self.count = record, 0

    def __call__(self, test: str) -> str:
        self.count += 1
        return f"_side({self.count}, {test})" if self.record else test


def _indent(lines: list[str], by: int) -> list[str]:
    """Each line moved right by ``by``, every line of a statement written over several
    (a wrapped test) with it, as an editor moves a block."""
    return ["\n".join(" " * by + part if part else part for part in line.split("\n"))
            for line in lines]


def _site(form: Form, obj: str, tests: _Tests, in_layers: bool) -> list[str]:
    """The construct's lines, at indentation 0, in a function whose tensor is ``h``."""
    carry = CARRIES[form.carry]
    target = carry.target.replace("{obj}", obj)
    a, b, c = carry.values
    effect = EFFECTS[form.effect].replace("{obj}", obj).replace("{tag}", f"f{form.id}")
    fx = effect.split("\n") if effect else []  # a statement over several lines, line by line
    test = PREDICATES[form.predicate]
    result = carry.result.replace("{obj}", obj)
    k = form.construct
    if k == "if":
        return [f"if {tests(test)}:", *_indent(fx, 4), f"    {target} = {a}", "else:",
                f"    {target} = {b}"]
    if k == "elif":
        return [f"if {tests(test)}:", *_indent(fx, 4), f"    {target} = {a}",
                f"elif {tests(ELIF_TEST)}:", f"    {target} = {b}", "else:",
                f"    {target} = {c}"]
    if k == "ifexp":  # no statement inside an expression: the effect comes after it
        return [f"{target} = {a} if {tests(test)} else {b}", *fx]
    if k == "while":
        return ["k = 0", f"while {tests(f'({test})')} and k < 3:", *_indent(fx, 4),
                f"    {target} = {a}", "    h = h - 1.0", "    k += 1"]
    if k == "while-true":  # ``while`` spelled with its test as the loop's only way out
        return ["k = 0", "while True:", f"    if not {tests(f'({test})')} or k >= 3:",
                "        break", *_indent(fx, 4), f"    {target} = {a}", "    h = h - 1.0",
                "    k += 1"]
    if k == "for":
        return [f"for i in range(1 + int({tests(test)})):", *_indent(fx, 4),
                f"    {target} = {a}", "    h = h - 0.5"]
    if k == "return":
        return [f"if {tests(test)}:", *_indent(fx, 4), f"    {target} = {a}",
                f"    return {result}", f"{target} = {b}"]
    if k in ("break", "continue"):
        body = [f"if {tests(test)}:", *_indent(fx, 4), f"    {target} = {a}", f"    {k}",
                f"{target} = {b}"]
        if in_layers:  # the loop over layers the site is already in
            return body
        return ["for j in range(3):", "    h = h * 0.9", *_indent(body, 4)]
    # after a raise or an assert the carry is set on every pass; in the loop over layers,
    # three passes of ``h.sum(0)`` reach a 0-d tensor and raise on every input: there the
    # reshaped carry halves ``h`` (its rank kept, a mean in (0, 1) kept there)
    after = "h * 0.5" if in_layers and form.carry == "reshaped" else a
    if k == "raise":
        return [f"if {tests(test)}:", *_indent(fx, 4),
                '    raise ValueError(f"input rejected: {h.shape[0]} rows")',
                f"{target} = {after}"]
    if k == "raise-elif":  # a chain of raises, the rest in its else
        return [f"if {tests(test)}:", *_indent(fx, 4),
                '    raise ValueError(f"input rejected: {h.shape[0]} rows")',
                f"elif {tests(ELIF_TEST)}:", '    raise ValueError("too large")',
                "else:", f"    {target} = {after}"]
    if k == "assert":
        return [*fx, f'assert {tests(test)}, "input rejected"', f"{target} = {after}"]
    if k == "torch-assert":  # ``torch._assert`` by the name timm gives it
        return [*fx, f'_assert({tests(test)}, "input rejected")', f"{target} = {after}"]
    if k == "map-rows":  # a branch per row of ``h``, the rows' results stacked
        row_test = test if form.predicate in SHAPE_PREDICATES else _on_row(test)
        return ["rows = []", "for row in h.unbind(0):", f"    if {tests(row_test)}:",
                "        rows.append(row * 2.0)", "    else:", "        rows.append(row - 1.0)",
                "h = torch.stack(rows)", *fx, f"{target} = {a}"]
    if k == "try":
        return ["try:", *_indent(fx, 4), f"    if {tests(test)}:",
                '        raise ValueError("test held")', f"    {target} = {a}",
                "except ValueError:", f"    {target} = {b}"]
    raise ValueError(f"unknown construct {k!r}")


def _on_row(test: str) -> str:
    """A test on ``h`` written on one row of it, as a 1 x n tensor (``row[None]``)."""
    return re.sub(r"\bh\b", "row[None]", test)


def _body(form: Form, obj: str, tests: _Tests) -> list[str]:
    """The function body holding the site (after ``h`` is bound), ending in a return."""
    carry = CARRIES[form.carry]
    init = [carry.init.replace("{obj}", obj)] if carry.init else []
    if form.effect == "dead-append":
        init.insert(0, "steps = []")
    result = carry.result.replace("{obj}", obj)
    if form.position == "loop":
        site = _site(form, obj, tests, in_layers=True)
        return [*init, "for layer in self.layers:", "    h = layer(h)", *_indent(site, 4),
                f"return {result}"]
    if form.position == "nested":
        outer = tests(NESTED_TEST)
        site = _site(form, obj, tests, in_layers=False)
        return [*init, f"if {outer}:", *_indent(site, 4), "else:", "    h = -h",
                f"return {result}"]
    return [*init, *_site(form, obj, tests, in_layers=False), f"return {result}"]


def source(form: Form, sides: bool = False) -> str:
    """The module defining ``Form``, an ``nn.Module`` whose forward takes one tensor."""
    tests = _Tests(sides)
    lines: list[str] = []
    init = ["super().__init__()",
            "self.layers = nn.ModuleList([Scale(0.9), Scale(1.1), Scale(0.8)])", *STATE_INIT]
    p = form.position
    if p in ("top", "loop", "nested"):
        forward = ["h = x * 1.5", *_body(form, "self", tests)]
    elif p == "helper":
        lines += ["def helper(h, owner):", *_indent(_body(form, "owner", tests), 4), "", ""]
        forward = ["h = x * 1.5", "return helper(h, self)"]
    elif p == "submodule":
        lines += ["class Inner(nn.Module):", "    def __init__(self):",
                  "        super().__init__()", *_indent(STATE_INIT, 8), "",
                  "    def forward(self, h):", *_indent(_body(form, "self", tests), 8), "", ""]
        init.append("self.inner = Inner()")
        forward = ["h = x * 1.5", "return self.inner(h)"]
    elif p == "object":
        lines += ["class Policy:", "    def __init__(self):", *_indent(STATE_INIT, 8), "",
                  "    def apply(self, h):", *_indent(_body(form, "self", tests), 8), "", ""]
        init.append("self.policy = Policy()")
        forward = ["h = x * 1.5", "return self.policy.apply(h)"]
    elif p == "closure":
        forward = ["h = x * 1.5", "owner = self", "", "def step(h):",
                   *_indent(_body(form, "owner", tests), 4), "", "return step(h)"]
    else:
        raise ValueError(f"unknown position {p!r}")
    lines += ["class Form(nn.Module):", "    def __init__(self):", *_indent(init, 8), "",
              "    def forward(self, x):", *_indent(forward, 8)]
    header = HEADER.format(id=form.id, name=form.name, sides="\n" + SIDES if sides else "")
    return header + "\n" + "\n".join(lines) + "\n"


def state_holder(form: Form, model) -> object:
    """The object whose ``n``, ``seen`` and ``h`` the form's code changes."""
    return {"submodule": lambda: model.inner, "object": lambda: model.policy}.get(
        form.position, lambda: model)()


if __name__ == "__main__":
    print(f"{len(all_forms())} forms: {len(CONSTRUCTS)} constructs x {len(POSITIONS)} "
          f"positions x {len(PREDICATES)} tests x {len(CARRIES)} carried values x "
          f"{len(EFFECTS)} effects")
