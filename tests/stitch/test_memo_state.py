"""A cache the forward reads and refills when it misses (ultralytics' detection heads keep
``shape``/``anchors``/``strides``, timm's LeViT an ``attention_bias_cache`` dict): one graph
that recomputes it, the attributes set after each call as eager leaves them. A cache whose
hit gives other values than recomputing is state, and stays refused."""

from __future__ import annotations

import inspect
from typing import NamedTuple

import pytest
import torch

import stitch


def make_anchors(h, w, stride):
    ys = torch.arange(h, dtype=torch.float32) + 0.5
    xs = torch.arange(w, dtype=torch.float32) + 0.5
    yy, xx = torch.meshgrid(ys, xs, indexing="ij")
    return (torch.stack((xx, yy), -1).view(-1, 2) * stride,
            torch.full((h * w, 1), float(stride)))


class GridHead(torch.nn.Module):
    """As ultralytics' Detect: class defaults, recomputed when the input's shape changes."""

    dynamic = False
    shape = None
    anchors = torch.empty(0)
    strides = torch.empty(0)

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        shape = x.shape
        if self.dynamic or self.shape != shape:
            self.anchors, self.strides = make_anchors(x.shape[2], x.shape[3], 8)
            self.shape = shape
        return y.flatten(2).transpose(1, 2)[..., :2] * self.strides + self.anchors


class BiasCache(torch.nn.Module):
    """As timm's LeViT: a dict filled on the first call, keyed by device."""

    def __init__(self) -> None:
        super().__init__()
        self.biases = torch.nn.Parameter(torch.randn(4, 6))
        self.register_buffer("idxs", torch.tensor([0, 2, 5, 1]), persistent=False)
        self.cache = {}

    def forward(self, x):
        key = str(x.device)
        if key not in self.cache:
            self.cache[key] = self.biases[:, self.idxs]
        return x @ self.cache[key]


class StaleCache(GridHead):
    """Keyed on the batch only: a hit after a change of spatial size keeps the old grid."""

    def forward(self, x):
        y = self.conv(x)
        if self.shape != x.shape[0]:
            self.anchors, self.strides = make_anchors(x.shape[2], x.shape[3], 8)
            self.shape = x.shape[0]
        return y.flatten(2).transpose(1, 2)[..., :2].sum() + self.anchors.sum()


class ListKeyedHead(torch.nn.Module):
    """As ultralytics' RT-DETR decoder: keyed by a list of ``[h, w]``, the values plain
    tensors of the instance, which belong to the cache as much as its key."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)
        self.shapes = []
        self.anchors = torch.empty(0)
        self.valid_mask = torch.empty(0)

    def forward(self, x):
        y = self.conv(x)
        shapes = [[x.shape[2], x.shape[3]]]
        if self.shapes != shapes:
            self.anchors = make_anchors(x.shape[2], x.shape[3], 8)[0]
            self.valid_mask = (self.anchors < 40).all(-1, keepdim=True).float()
            self.shapes = shapes
        return (y.flatten(2).transpose(1, 2)[..., :2] + self.anchors) * self.valid_mask


def _check(model, examples, held_out):
    torch.manual_seed(0)
    before = dict(vars(model))
    program = stitch.export(model, examples[0], examples=[(e, {}) for e in examples[1:]])
    assert vars(model).keys() == before.keys()  # stitch.export never ran the model
    assert all(vars(model)[k] is v for k, v in before.items())
    eager = type(model)()
    eager.load_state_dict(model.state_dict())
    for x in held_out:
        with torch.no_grad():
            torch.testing.assert_close(program(x), eager(x))
    assert any("a cache the forward reads" in n for n in program.report.notes), \
        str(program.report)
    return program


def test_a_shape_keyed_grid_cache_is_recomputed_in_the_graph():
    torch.manual_seed(0)
    model = GridHead().eval()
    examples = [(torch.randn(1, 3, 8, 8),), (torch.randn(2, 3, 12, 16),)]
    _check(model, examples, [torch.randn(3, 3, 4, 20), torch.randn(3, 3, 4, 20),
                             torch.randn(1, 3, 8, 8)])


def test_the_epilogue_sets_the_cache_as_eager_leaves_it():
    torch.manual_seed(0)
    model = GridHead().eval()
    program = stitch.export(model, (torch.randn(1, 3, 8, 8),),
                            examples=[((torch.randn(2, 3, 12, 16),), {})])
    x = torch.randn(2, 3, 6, 10)
    program(x)
    assert model.shape == x.shape and type(model.shape) is torch.Size
    torch.testing.assert_close(model.anchors, make_anchors(6, 10, 8)[0])


def test_a_cache_keyed_by_a_list_with_tensor_values_is_recomputed_in_the_graph():
    torch.manual_seed(0)
    model = ListKeyedHead().eval()
    with torch.no_grad():  # a user's first call, at the last example's size: the values
        model(torch.randn(1, 3, 12, 12))  # keep their shapes over the analysis' passes
    _check(model, [(torch.randn(1, 3, 8, 8),), (torch.randn(2, 3, 8, 8),),
                   (torch.randn(1, 3, 12, 12),)],
           [torch.randn(3, 3, 8, 8), torch.randn(2, 3, 12, 12), torch.randn(1, 3, 10, 6)])


def test_a_dict_cache_filled_on_first_use_is_recomputed_in_the_graph():
    torch.manual_seed(0)
    model = BiasCache().eval()
    _check(model, [(torch.randn(2, 4),), (torch.randn(5, 4),)], [torch.randn(3, 4)])


def test_a_cache_whose_hit_differs_from_recomputing_stays_refused():
    torch.manual_seed(0)
    model = StaleCache().eval()
    with pytest.raises((stitch.UnsupportedSideEffectError, stitch.VerificationError)):
        stitch.export(model, (torch.randn(2, 3, 8, 8),),
                      examples=[((torch.randn(2, 3, 12, 16),), {})])


class Signature(NamedTuple):
    names: tuple
    default: object


class Record:
    def __init__(self) -> None:
        self.calls, self.last = 0, None


class SignatureMemo(torch.nn.Module):
    """As PyG's ``Inspector``: a dict of records (no tensors), filled when the module is
    built, that the forward tests and reads."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self._signatures = {}
        self.signature(self.lin.forward)

    def signature(self, func):
        if func.__name__ in self._signatures:
            return self._signatures[func.__name__]
        params = inspect.signature(func).parameters
        self._signatures[func.__name__] = Signature(tuple(params), Record())
        return self._signatures[func.__name__]

    def forward(self, x):
        names = self.signature(self.lin.forward).names
        return self.lin(x) * len(names)


class RecordInDict(torch.nn.Module):
    """A record held in a dict, changed in place on every call: state, not a memo."""

    def __init__(self) -> None:
        super().__init__()
        self.stats = {"last": Record()}

    def forward(self, x):
        record = self.stats["last"]
        record.calls = record.calls + 1
        record.last = x.sum()
        return x * 2


def test_a_dict_of_records_the_forward_only_reads_is_no_state():
    torch.manual_seed(0)
    model = SignatureMemo().eval()
    held = dict(model._signatures)
    program = stitch.export(model, (torch.randn(2, 4),), examples=[((torch.randn(5, 4),), {})])
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(program(x), model(x))
    assert model._signatures == held and all(model._signatures[k] is v for k, v in held.items())


def test_a_record_in_a_dict_changed_on_every_call_stays_refused_naming_the_dict():
    with pytest.raises(stitch.UnsupportedSideEffectError, match="'stats'"):
        stitch.export(RecordInDict(), (torch.randn(3),), examples=[((torch.randn(3),), {})])


class AreaGridHead(GridHead):
    """GridHead after a reshape torch guards at batch 1 (ultralytics' YOLO12: area attention
    before the detection head): batch 1 is served only under oblivious sizes, where a trace
    from a cache warm at some shape would test that shape against the input's."""

    def forward(self, x):
        y = self.conv(x)
        b, c, h, w = y.shape
        areas = y.flatten(2).transpose(1, 2).reshape(b * 4, h * w // 4, c).softmax(-1)
        y = areas.reshape(b, h * w, c).transpose(1, 2).reshape(b, c, h, w) + y
        shape = x.shape
        if self.dynamic or self.shape != shape:
            self.anchors, self.strides = make_anchors(x.shape[2], x.shape[3], 8)
            self.shape = shape
        return y.flatten(2).transpose(1, 2)[..., :2] * self.strides + self.anchors


def test_a_cache_warm_from_the_users_call_is_traced_from_its_class_default(monkeypatch):
    """The user ran the model before exporting it: its cache holds that call's shape. The
    trace starts from the class's declared default instead (``shape = None``), so the graph
    recomputes the grid with no test of the input's shape against the user's call; the
    model as written (the converted strategy is made to fail, as YOLO12's break does) is
    then one program under oblivious sizes."""
    from stitch import pipeline
    from stitch.errors import UnfixableBreaksError

    def unfixable(*args, **kwargs):
        raise UnfixableBreaksError("1 graph break(s) remain that stitch cannot rewrite")

    monkeypatch.setattr(pipeline, "rewrite_and_export", unfixable)
    torch.manual_seed(0)
    model = AreaGridHead().eval()
    with torch.no_grad():
        model(torch.randn(1, 3, 4, 4))
    program = _check(model, [(torch.randn(1, 3, 4, 4),), (torch.randn(2, 3, 4, 4),),
                             (torch.randn(1, 3, 8, 8),)],
                     [torch.randn(1, 3, 4, 4), torch.randn(3, 3, 8, 8),
                      torch.randn(1, 3, 4, 4)])
    assert any("obliviously" in n for n in program.report.notes), str(program.report)


class TableBuffer(torch.nn.Module):
    """As timm's ConViT: a table rebuilt for the input's size, kept in a registered buffer
    that the forward sets to a tensor of another shape (torch.export writes such a buffer
    back in place, which cannot change its shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(1, 1, 1), persistent=False)

    def forward(self, x):
        n = x.shape[-1]
        if self.table.shape[1] != n:
            self.table = torch.arange(n * n, dtype=torch.float).reshape(1, n, n)
        return x @ self.table[0]


class TableFilledByAHelper(TableBuffer):
    """The same table, set by a helper method the forward calls."""

    def fill(self, n):
        self.table = torch.arange(n * n, dtype=torch.float).reshape(1, n, n)

    def forward(self, x):
        if self.table.shape[1] != x.shape[-1]:
            self.fill(x.shape[-1])
        return x @ self.table[0]


@pytest.mark.parametrize("cls", [TableBuffer, TableFilledByAHelper])
def test_a_buffer_the_forward_sets_to_another_shape_is_a_cache(cls):
    model = cls()
    program = stitch.export(model, (torch.randn(1, 4),), examples=[((torch.randn(2, 6),), {})])
    assert model.table.shape == (1, 1, 1)  # exporting left the model as it was
    assert any("'table' is a cache" in n for n in program.report.notes), str(program.report)
    for n in (4, 6, 5):
        x = torch.randn(3, n)
        torch.testing.assert_close(program(x), cls()(x))
        # the epilogue set the model's buffer, as the forward's own assignment does
        assert dict(model.named_buffers())["table"].shape == (1, n, n)
        assert "table" not in vars(model)


class TableRegisteredAgain(TableBuffer):
    """The table registered again (older rotary-embedding caches do so): stitch's copy
    cannot hold it as an attribute (``register_buffer`` refuses a name an attribute has)."""

    def forward(self, x):
        n = x.shape[-1]
        if self.table.shape[1] != n:
            self.register_buffer("table", torch.arange(n * n, dtype=torch.float).reshape(
                1, n, n), persistent=False)  # AGAIN
        return x @ self.table[0]


class RotaryRegisteredAgain(torch.nn.Module):
    """An older rotary cache: the table registered again for a longer input, its length
    kept beside it in a Python int (the warm-up left the length of the longest example with
    the original table restored: the census's own run of the model raised, and the refusal
    blamed the model)."""

    def __init__(self) -> None:
        super().__init__()
        self.grow(1)

    def grow(self, n):
        self.cached = n
        self.register_buffer("table", torch.arange(n * n, dtype=torch.float).reshape(
            1, n, n), persistent=False)

    def forward(self, x):
        n = x.shape[-1]
        if n > self.cached:
            self.grow(n)  # AGAIN
        return x @ self.table[0, :n, :n]


class GrowingBuffer(torch.nn.Module):
    """A buffer that grows on every call: no cache, state torch.export cannot carry."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(0, 4))

    def forward(self, x):
        self.seen = torch.cat([self.seen, x])  # GROWS
        return x * 2


def _line(cls, mark: str) -> str:
    import inspect

    lines, start = inspect.getsourcelines(cls)
    return f"{__file__}:{start + next(i for i, t in enumerate(lines) if mark in t)}"


def test_a_buffer_registered_again_at_another_shape_is_refused_naming_the_line():
    with pytest.raises(stitch.VerificationError) as refused:
        stitch.export(TableRegisteredAgain(), (torch.randn(1, 4),),
                      examples=[((torch.randn(2, 6),), {})])
    message = str(refused.value)
    assert "gives buffer table a tensor of another shape" in message, message
    path, line = _line(TableRegisteredAgain, "# AGAIN").rsplit(":", 1)
    assert f"{path}:{int(line) - 1}" in message, message  # the call starts a line above
    assert "rather than registering it again" in message, message


def test_a_table_registered_again_beside_its_length_is_refused_not_blamed_on_the_model():
    """The warm-up keeps a table the forward registered again at another shape, as it keeps
    the length beside it: the two describe one state a call of the model leaves."""
    with pytest.raises(stitch.VerificationError) as refused:
        stitch.export(RotaryRegisteredAgain(), (torch.randn(1, 4),),
                      examples=[((torch.randn(2, 6),), {})])
    message = str(refused.value)
    assert "raised by the model itself" not in message, message
    assert "'cached'" in message or "buffer table" in message, message


def test_a_buffer_that_grows_is_refused_naming_the_line():
    with pytest.raises(stitch.UnsupportedSideEffectError) as refused:
        stitch.export(GrowingBuffer(), (torch.randn(1, 4),), examples=[((torch.randn(2, 4),), {})])
    assert _line(GrowingBuffer, "# GROWS") in str(refused.value), str(refused.value)
