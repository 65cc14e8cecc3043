"""Exact stand-ins for library calls torch.compile and torch.export cannot trace, installed
while stitch traces (census, export, forced sides) and never in the user's eager runs.

Each shim is exact by construction: it takes over only when the original call would leave
every tensor as it is, and otherwise calls the original. Recorded as data (``SHIMS``) so the
report and the docs can list them.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch._subclasses.fake_tensor as fake_tensor
import torch.fx.experimental.proxy_tensor as proxy_tensor
from torch._dynamo.eval_frame import skip_code
from torch.fx.experimental.symbolic_shapes import statically_known_false, statically_known_true
from torch.utils import _pytree as pytree

from .sdpa_shim import scaled_dot_product_attention
from .sym_min_max import min_max, non_strict_utils

# tensors computed from constants alone whose values a trace keeps (see SHIMS)
CONSTANT_NUMEL_LIMIT = 64

_original_to = torch.nn.Module.to


def _module_to(self, *args, **kwargs):
    """``module.to(dtype/device)`` when every parameter and buffer already has that dtype and
    device: the original rebinds each tensor to itself (``param.data = param``), which fake
    tensors refuse ("Couldn't swap Linear.weight") and Dynamo breaks on; return ``self``."""
    try:
        device, dtype, _non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the original raises the user's error
        return _original_to(self, *args, **kwargs)
    if memory_format is not None:
        return _original_to(self, *args, **kwargs)
    device = torch.device(device) if device is not None else None
    for t in (*self.parameters(), *self.buffers()):
        if device is not None and t.device != device:
            return _original_to(self, *args, **kwargs)
        if dtype is not None and (t.is_floating_point() or t.is_complex()) and t.dtype != dtype:
            return _original_to(self, *args, **kwargs)
    return self


_original_batch_norm = torch.nn.functional.batch_norm


def _batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    """``F.batch_norm`` in inference (running statistics, not training): the op the
    composite calls for a non-empty input, called directly. The composite first tests
    ``input.numel() == 0`` (to return an empty result by another path), and that test on a
    batch known only at run time (a detection head's rois) is a guard no trace can make
    ("Could not guard on data-dependent expression Eq(12544*u17, 0)"); the op gives the
    same empty result for an empty input. Anything else: the original."""
    if training or running_mean is None or running_var is None \
            or not all(isinstance(t, torch.Tensor | None) for t in (input, weight, bias)) \
            or torch.overrides.has_torch_function_variadic(input, running_mean, running_var,
                                                           weight, bias):
        return _original_batch_norm(input, running_mean, running_var, weight, bias, training,
                                    momentum, eps)
    return torch.ops.aten._native_batch_norm_legit_no_training(
        input, weight, bias, running_mean, running_var, momentum, eps)[0]


_original_as_tensor = torch.as_tensor
_original_tensor = torch.tensor


_TENSOR_FUNCTION = torch.Tensor.__torch_function__.__func__


def _plain(x) -> bool:
    """A tensor whose class does not override ``__torch_function__`` (a fake tensor while
    tracing is one; ``has_torch_function`` says True for it under export's function mode)."""
    function = getattr(type(x), "__torch_function__", None)
    return isinstance(x, torch.Tensor) and (
        function is torch._C._disabled_torch_function_impl
        or getattr(function, "__func__", None) is _TENSOR_FUNCTION)


def _stackable(data, dtype, device) -> bool:
    """``data`` a non-empty list or tuple of plain real 0-d tensors of one dtype, none needing
    grad (eager warns on those), on the device the new tensor gets (``device``, else the
    default device): what eager makes of it is the stack of their values, in their dtype
    unless ``dtype`` says otherwise."""
    if type(data) not in (list, tuple) or not data:
        return False
    if not all(_plain(x) and x.dim() == 0 and not x.requires_grad and not x.is_complex()
               for x in data):
        return False
    target = torch.device(device) if device is not None else torch.get_default_device()
    first = data[0]
    return all(x.dtype == first.dtype and x.device == target for x in data)


def _symbolic_leaves(data) -> bool:
    """``data`` (a number or a nested list of them) holds a symbolic number, while stitch
    traces outside Dynamo: torch.export sends ``torch.tensor`` of such data to its Python
    implementation, by identity, which a shim is not; ``torch._refs.tensor`` is that
    implementation, and keeps the numbers symbolic."""
    return not torch.compiler.is_dynamo_compiling() and any(
        isinstance(v, torch.SymInt | torch.SymFloat | torch.SymBool)
        for v in pytree.tree_leaves(data))


def _as_tensor(data, dtype=None, device=None):
    """``torch.as_tensor([t, ...])`` of 0-d tensors (TAPAS 4.52's segment shapes,
    ``torch.as_tensor([index.num_segments])``): eager reads each value into a new tensor;
    a trace cannot read a value its fake tensor does not hold ("The tensor has a non-zero
    number of elements, but its data is not allocated yet"). The stack of the detached
    values is that tensor (a copy: ``stack`` never aliases). Of symbolic numbers: as
    ``_tensor``. Anything else, or while Dynamo traces (which keeps values of constants
    itself): the original."""
    if not torch.compiler.is_dynamo_compiling() and _stackable(data, dtype, device):
        return torch.stack(data).to(dtype=dtype)
    if not isinstance(data, torch.Tensor) and _symbolic_leaves(data):
        return torch._refs.tensor(data, dtype=dtype, device=device)
    return _original_as_tensor(data, dtype=dtype, device=device)


def _tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """``torch.tensor([t, ...])`` of 0-d tensors: as ``_as_tensor`` (a copy either way)."""
    if not torch.compiler.is_dynamo_compiling() and not requires_grad and not pin_memory \
            and _stackable(data, dtype, device):
        return torch.stack(data).to(dtype=dtype)
    if _symbolic_leaves(data):  # ``[v.item(), 1.0]``, ``[float(w - 1) / 2, ...]``
        return torch._refs.tensor(data, dtype=dtype, device=device,
                                  requires_grad=requires_grad, pin_memory=pin_memory)
    return _original_tensor(data, dtype=dtype, device=device, requires_grad=requires_grad,
                            pin_memory=pin_memory)


_original_new_tensor = torch.Tensor.new_tensor


def _new_tensor(self, data, *args, **kwargs):
    """``t.new_tensor([...])`` of symbolic numbers (kornia's ``nlaf.new_tensor([wf, hf])``
    of sizes): torch.export makes each a constant, so the program raised ``Guard failed``
    at every other image size; as ``_tensor``, in ``t``'s dtype and device unless given.
    Anything else (other arguments too): the original."""
    if not args and set(kwargs) <= {"dtype", "device", "requires_grad"} \
            and not isinstance(data, torch.Tensor) and _symbolic_leaves(data):
        dtype, device = kwargs.get("dtype"), kwargs.get("device")
        return torch._refs.tensor(data, dtype=dtype if dtype is not None else self.dtype,
                                  device=device if device is not None else self.device,
                                  requires_grad=kwargs.get("requires_grad", False))
    return _original_new_tensor(self, data, *args, **kwargs)


_original_linspace = torch.linspace
_SYMBOLIC = (torch.SymInt, torch.SymFloat)


def _linspace(start, end, steps, *, out=None, dtype=None, layout=torch.strided, device=None,
              pin_memory=False, requires_grad=False):
    """``torch.linspace`` with a symbolic number (``steps`` a dynamic size: kornia's
    ``warp_affine`` grid, ``torch.linspace(-1.0, 1.0, w_out)``): torch.export makes the
    count a constant, so the program raised ``Guard failed`` at every other image size.
    torch's Python implementation (``torch._refs.linspace``) keeps it symbolic, with the
    same values up to rounding (equal at 2, 5 and 12 steps, one float32 ulp apart at 100:
    measured). Anything else, or while Dynamo traces: the original."""
    if out is None and not torch.compiler.is_dynamo_compiling() \
            and any(isinstance(v, _SYMBOLIC) for v in (start, end, steps)) \
            and not any(isinstance(v, torch.Tensor) for v in (start, end)):
        return torch._refs.linspace(start, end, steps, dtype=dtype, device=device,
                                    layout=layout, pin_memory=pin_memory,
                                    requires_grad=requires_grad)
    return _original_linspace(start, end, steps, out=out, dtype=dtype, layout=layout,
                              device=device, pin_memory=pin_memory,
                              requires_grad=requires_grad)


_original_take_along_dim = torch.take_along_dim


def _take_along_dim(input, indices, dim=None, *, out=None):
    """``torch.take_along_dim`` as its ATen implementation spells it (broadcast both but
    along ``dim``, then ``gather``), in Python: torch.export makes the input's size along
    ``dim`` a constant through the C++ composite, so the program raised ``Guard failed`` on
    every other size (torch_geometric's median and quantile aggregations sort the nodes and
    take their group index along them); ``gather`` keeps it symbolic. Only where a size is
    symbolic (a trace) and the call is one the composite takes; anything else: the
    original."""
    if (out is None and not torch.compiler.is_dynamo_compiling()
            and isinstance(input, torch.Tensor) and isinstance(indices, torch.Tensor)
            and indices.dtype == torch.long and input.dim() == indices.dim()
            and any(isinstance(n, torch.SymInt) for n in (*input.shape, *indices.shape))):
        if dim is None:
            return input.reshape(-1).gather(0, indices.reshape(-1))
        dim = dim + input.dim() if dim < 0 else dim
        sizes = list(input.shape)
        sizes[dim] = indices.shape[dim]
        taken = indices.broadcast_to(torch.broadcast_shapes(sizes, indices.shape))
        sizes = list(indices.shape)
        sizes[dim] = input.shape[dim]
        return torch.gather(input.broadcast_to(torch.broadcast_shapes(sizes, input.shape)),
                            dim, taken)
    if out is not None:
        return _original_take_along_dim(input, indices, dim, out=out)
    return _original_take_along_dim(input, indices, dim)


def _tensor_take_along_dim(self, indices, dim=None):
    """``Tensor.take_along_dim``: as ``torch.take_along_dim`` (``_take_along_dim``)."""
    return _take_along_dim(self, indices, dim)


_original_cdist = torch.cdist
_MM_ROWS = 25  # ATen's cdist: Euclidean by matrix products above this many rows


def _cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """``torch.cdist`` whose choice of kernel depends on a symbolic row count: for p = 2 ATen
    computes by matrix products when either input has more than 25 rows, and first sends an
    empty input elsewhere; torch.export can make neither test on a size known only at run
    time (torch_geometric's ``MemPooling``: ``Could not guard on data-dependent expression
    u0*u4 > 25``) and fixes a dynamic one to the traced side. Here the two kernels ATen
    chooses between run under ``torch.cond`` on its row test, each called as ATen calls it.
    With a known, non-zero column count an empty input has no rows, and its result is empty
    whichever kernel runs. Anything else, or while Dynamo traces: the original."""
    if (compute_mode == "use_mm_for_euclid_dist_if_necessary" and p == 2
            and not torch.compiler.is_dynamo_compiling()
            and _plain(x1) and _plain(x2) and x1.dim() >= 2 and x2.dim() >= 2
            and all(type(t.shape[-1]) is int and t.shape[-1] > 0 for t in (x1, x2))):
        rows = (x1.shape[-2], x2.shape[-2])
        if any(isinstance(r, torch.SymInt) for r in rows):
            big = torch.sym_max(*rows) > _MM_ROWS
            if not (statically_known_true(big) or statically_known_false(big)):
                return torch.cond(big, _cdist_mm, _cdist_direct, (x1, x2))
    return _original_cdist(x1, x2, p, compute_mode)


def _cdist_mm(x1, x2):
    return torch.ops.aten._euclidean_dist(x1, x2)


def _cdist_direct(x1, x2):
    return torch.ops.aten._cdist_forward(x1, x2, 2.0, None)


_original_new_full = torch.Tensor.new_full


def _new_full(self, size, fill_value, *args, **kwargs):
    """``t.new_full(size, fill)`` with a 0-d tensor as the fill (torch_geometric's
    ``SortAggregation``: ``batch_x.new_full((B, self.k - N, D), fill_value)``,
    ``fill_value = x.detach().min() - 1``): the op reads the fill as a Python number, a
    number from data while tracing, which torch.export cannot carry out of a cond arm
    ("Pending unbacked symbols"). The fill converted to the result's dtype and broadcast
    instead: the same values (a number converts to the dtype as the tensor does), no
    gradient through the fill, as the op. Anything else: the original."""
    if (not args and isinstance(fill_value, torch.Tensor) and fill_value.dim() == 0
            and _plain(self) and _plain(fill_value)
            and set(kwargs) <= {"dtype", "device", "requires_grad"}):
        dtype = kwargs.get("dtype") or self.dtype
        device = kwargs.get("device") or self.device
        out = fill_value.detach().to(dtype=dtype, device=device).expand(size).contiguous()
        return out.requires_grad_() if kwargs.get("requires_grad") else out
    return _original_new_full(self, size, fill_value, *args, **kwargs)


@dataclass(frozen=True)
class Shim:
    owner: object  # a class or a module
    attr: str
    replacement: object
    what: str


SHIMS = (
    Shim(torch.nn.Module, "to", _module_to,
         "module.to(dtype/device) that converts nothing returns the module (transformers' "
         "Switch router: self.classifier = self.classifier.to(self.dtype))"),
    Shim(torch.nn.functional, "batch_norm", _batch_norm,
         "batch norm in inference calls its op directly, without the composite's test for "
         "an empty input, which a batch known only at run time cannot pass (Faster R-CNN "
         "v2's box head)"),
    Shim(torch, "as_tensor", _as_tensor,
         "torch.as_tensor of a list of 0-d tensors is their stack (a trace cannot read the "
         "values: TAPAS 4.52's segment shapes)"),
    Shim(torch, "tensor", _tensor,
         "torch.tensor of a list of 0-d tensors is their stack, as torch.as_tensor"),
    Shim(torch.Tensor, "new_tensor", _new_tensor,
         "t.new_tensor of symbolic numbers is torch's Python implementation of torch.tensor, "
         "in t's dtype and device, as torch.tensor of them (kornia's LAF normalisation)"),
    Shim(torch, "linspace", _linspace,
         "torch.linspace with a symbolic number of steps (a dynamic size) is torch's Python "
         "implementation, which keeps the count symbolic (kornia's warp_affine grid)"),
    Shim(torch, "take_along_dim", _take_along_dim,
         "torch.take_along_dim with a symbolic size is its ATen implementation in Python "
         "(broadcast, then gather), which keeps the size along dim symbolic "
         "(torch_geometric's median and quantile aggregations)"),
    Shim(torch.Tensor, "take_along_dim", _tensor_take_along_dim,
         "Tensor.take_along_dim: as torch.take_along_dim"),
    Shim(torch, "cdist", _cdist,
         "torch.cdist (p = 2) with a symbolic row count computes both of ATen's kernels' "
         "choices under torch.cond on its more-than-25-rows test, which a trace cannot make "
         "on a size known only at run time (torch_geometric's MemPooling)"),
    Shim(torch.Tensor, "new_full", _new_full,
         "t.new_full(size, fill) with a 0-d tensor fill is the fill in t's dtype, broadcast "
         "(the op reads it as a Python number, which a trace cannot carry out of a cond "
         "arm: torch_geometric's SortAggregation)"),
    Shim(torch.nn.functional, "scaled_dot_product_attention", scaled_dot_product_attention,
         "F.scaled_dot_product_attention on CPU over a sequence length from data runs ATen's "
         "choice of kernel, by its zero-length test, under torch.cond, where every other "
         "constraint is decided without a guard (torch_geometric's set-attention "
         "aggregations: MultiheadAttention over the largest graph's node count)"),
    Shim(non_strict_utils, "_tensor_min_max", min_max,
         "min and max of two floats one of which is symbolic (a size's arithmetic) are "
         "torch.sym_min and sym_max, as torch.export makes them for a SymInt, not a guard "
         "on their order (kornia's LAF normalisation: min(hf, wf))"),
    Shim(fake_tensor, "CONSTANT_NUMEL_LIMIT", CONSTANT_NUMEL_LIMIT,
         f"fake tensors keep the values of tensors computed only from constants up to "
         f"{CONSTANT_NUMEL_LIMIT} elements (torch: 1), so a shape built as a small tensor "
         f"and read back (TAPAS 4.52: torch.cat of sizes, then .tolist() into view) is the "
         f"same plain int as in eager, not a size from data"),
    Shim(proxy_tensor, "CONSTANT_NUMEL_LIMIT", CONSTANT_NUMEL_LIMIT,
         "the same limit where make_fx tracks such constants"),
)

# A shim called from the code Dynamo generates around a graph (``torch.as_tensor`` of a
# numpy array the model writes in place, looked up by name) runs as Python, never as a
# frame Dynamo compiles: compiled, its own conversion of the array called the shim again,
# without end (RecursionError). Called from traced code, it is inlined as before.
for _shim in SHIMS:
    if callable(_shim.replacement) and hasattr(_shim.replacement, "__code__"):
        skip_code(_shim.replacement.__code__)

# draws from Python's or numpy's generator no output depends on (capture/draws.py): while
# stitch traces, each such function returns the number it drew when measured (Dynamo
# breaks on numpy's generator); the epilogue makes the real draws after the graph
_dead_draws: dict[tuple[str, str], object] = {}


def know_dead_draws(draws) -> None:
    """The dead draws of the model being exported (a plain-number result each)."""
    _dead_draws.clear()
    for d in draws:
        if type(d.value) in (bool, int, float):
            _dead_draws.setdefault((d.module, d.name), d.value)


def _stand_in(value):
    def drawn(*args, **kwargs):
        return value
    return drawn


_INHERITED = object()  # an attribute a class only inherits: deleted on restore
_lock = threading.RLock()
_originals: list[tuple[type, str, object]] = []  # (owner, attr, original) while installed
_depth = [0]  # nested and concurrent users: the last one out restores


@contextlib.contextmanager
def shimmed() -> Iterator[None]:
    """Install every shim (re-entrant); the originals are back on exit, whatever happens."""
    with _lock:
        if _depth[0] == 0:
            for shim in SHIMS:
                # a method a class inherits (Tensor.new_tensor, from TensorBase) is deleted
                # again on the way out, not left set on the class
                inherited = isinstance(shim.owner, type) and shim.attr not in vars(shim.owner)
                _originals.append((shim.owner, shim.attr,
                                   _INHERITED if inherited else getattr(shim.owner, shim.attr)))
                setattr(shim.owner, shim.attr, shim.replacement)
            for (module, name), value in _dead_draws.items():
                owner = sys.modules.get(module)
                if owner is not None and hasattr(owner, name):
                    _originals.append((owner, name, getattr(owner, name)))
                    setattr(owner, name, _stand_in(value))
        _depth[0] += 1
    try:
        yield
    finally:
        with _lock:
            _depth[0] -= 1
            if _depth[0] == 0:
                while _originals:
                    owner, attr, original = _originals.pop()
                    if original is _INHERITED:
                        delattr(owner, attr)
                    else:
                        setattr(owner, attr, original)
