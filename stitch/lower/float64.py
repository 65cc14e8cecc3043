"""The stitched graph run in float64: the yardstick for a lowered build that differs from
the graph run as is (float32) by more than ``torch.testing.assert_close`` allows.

A compiled build reorders sums, fuses ops and uses its own vectorised math, so on a deep
model or outputs of large magnitude it lands a few ulps from eager, beyond assert_close's
float32 defaults (rtol 1.3e-6, atol 1e-5) although it is no less accurate than eager
(timm's visformer, logits of magnitude 230: eager is 1.5e-4 RMS from float64, Inductor
1.8e-4). ``as_accurate`` accepts such a build where its error against the graph run in
float64 is within ``MULTIPLIER`` times eager's own error plus ``RELATIVE`` of the output's
RMS: the rule of torch's benchmark suite for compiled models (``torch._dynamo.utils.same``
with a float64 reference), with the absolute slack made relative to the output's scale.

The float64 graph is a copy: every floating dtype its nodes name (``aten.full(...,
dtype=torch.float32)``, ``_to_copy``) becomes float64, as do its floating parameters,
buffers and constants, in cond and loop bodies too; floating inputs are cast. Where that
copy cannot run (an op with no float64 kernel) or would take more than half the free memory
where the weights live (``_room_for``: a large model), there is no yardstick, and a build
must match under assert_close. Where the float64 run is not close to eager itself (a graph
that draws random numbers draws others in float64) it is no yardstick either (``TRUSTED``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from capture.isolation import rng_state, set_rng_state

MULTIPLIER = {torch.float16: 3.0, torch.bfloat16: 3.0}  # torch's rule; 2.0 otherwise
RELATIVE = 1e-4  # of the float64 output's RMS
TRUSTED = 1e-3  # eager's own RMS error, relative to the output's RMS, past which float64
# does not stand for what eager computes (random draws, which differ by dtype; a computation
# float32 cannot follow): no yardstick there


def _wide(value):
    if isinstance(value, torch.dtype) and value.is_floating_point and value != torch.float64:
        return torch.float64
    return value


def float64_module(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` (an fx GraphModule, with its subgraphs) computing in float64."""
    wide = copy.deepcopy(module)
    for sub in wide.modules():
        if isinstance(sub, torch.fx.GraphModule):
            for node in sub.graph.nodes:
                node.args = pytree.tree_map(_wide, node.args)
                node.kwargs = pytree.tree_map(_wide, node.kwargs)
            sub.recompile()
        for name, value in list(vars(sub).items()):  # constants held as plain attributes
            if isinstance(value, torch.Tensor) and value.is_floating_point() and \
                    not isinstance(value, torch.nn.Parameter):
                setattr(sub, name, value.double())
    return wide.double()


def _run(module, ex, why: list | None = None):
    """``module`` on ``ex`` cast to float64, tensors the graph makes with no dtype named
    (``full``, ``arange``, ``scalar_tensor`` of a float) made in float64 too; None where it
    raises (as the float32 graph does on an input a forced branch side cannot take: that
    input is not compared), what it raised appended to ``why``. The default dtype is the
    process's: it is float64 only for this run, which deployment makes before it serves."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return module(*pytree.tree_map(_cast, ex.args), **pytree.tree_map(_cast, ex.kwargs))
    except Exception as e:  # noqa: BLE001 - no yardstick for this input
        if why is not None:
            why.append(_said(e))
        return None
    finally:
        torch.set_default_dtype(default)


def _said(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"


def _cast(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.double()
    return value


def _room_for(module: torch.nn.Module) -> bool:
    """Whether the float64 copy fits: its floating tensors at 8 bytes an element take at
    most half the memory free where they live (host: available physical pages; CUDA: the
    device's free memory). A large model's copy would otherwise exhaust it; there is then no
    yardstick."""
    need: dict[str, int] = {}
    for t in [*module.parameters(), *module.buffers()]:
        if t.is_floating_point():
            need[t.device.type] = need.get(t.device.type, 0) + t.numel() * 8
    for kind, size in need.items():
        if kind == "cuda":
            free = torch.cuda.mem_get_info()[0]
        elif kind == "cpu":
            try:
                free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            except (ValueError, OSError, AttributeError):
                return False  # unknown: no copy
        else:
            return False
        if 2 * size > free:
            return False
    return True


class Float64Reference:
    """The float64 graph's outputs on ``inputs``, run in order from a fresh copy of
    ``module()`` (so a graph writing its buffers runs as the candidates do), computed on
    first use (most builds match under assert_close and never ask); None where the copy
    cannot be made, and for an input it raises on."""

    def __init__(self, module: Callable[[], torch.nn.Module], inputs: list,
                 before: Callable | None = None):
        self._module, self._inputs, self._before = module, inputs, before  # made on first use
        self._outputs: list | None = None
        self._failed = False
        self._why: list[str] = []  # per input, why the float64 graph gave no outputs

    def outputs(self) -> list | None:
        if self._outputs is None and not self._failed:
            saved = rng_state()  # asked for in the middle of a candidate's run: it goes on
            try:
                module = self._module()
                if not _room_for(module):
                    raise MemoryError("no room for the float64 copy")
                wide = float64_module(module)
                if self._before is not None:
                    self._before()  # the random-number state the candidates start from
                with torch.no_grad():
                    self._why = []
                    self._outputs = []
                    for ex in self._inputs:
                        why: list[str] = []
                        self._outputs.append(_run(wide, ex, why))
                        self._why.append(why[0] if why else "")
            except Exception as e:  # noqa: BLE001 - no yardstick: the strict comparison stands
                self._failed = True
                self._why = [_said(e)] * len(self._inputs)
            finally:
                set_rng_state(saved)
        return self._outputs

    def at(self, i: int) -> Callable[[], object]:
        """A thunk for example ``i``'s float64 outputs (None where there are none); its
        ``why()`` says why there are none."""
        def get():
            outputs = self.outputs()
            return None if outputs is None else outputs[i]

        def why() -> str:
            return self._why[i] if i < len(self._why) else ""
        get.why = why
        return get


def rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def as_accurate(eager: torch.Tensor, got: torch.Tensor, exact: torch.Tensor) -> tuple[bool, str]:
    """Whether ``got`` is as accurate as ``eager`` against ``exact`` (float64), and the
    numbers that say so."""
    if not exact.shape == got.shape == eager.shape or not exact.is_floating_point():
        return False, (f"shapes or dtype apart: eager {tuple(eager.shape)}, the build "
                       f"{tuple(got.shape)}, float64 {tuple(exact.shape)} {exact.dtype}")
    if not torch.equal(eager.isnan(), got.isnan()):
        return False, (f"NaN at {int((eager.isnan() != got.isnan()).sum())} element(s) where "
                       "eager has a number, or a number where eager has NaN")
    if eager.isnan().any():
        keep = ~eager.isnan()
        eager, got, exact = eager[keep], got[keep], exact[keep]
    if not exact.numel():
        return True, "no element"
    eager_error, error = rmse(eager, exact), rmse(got, exact)
    scale = exact.double().pow(2).mean().sqrt().item()
    if not eager_error <= TRUSTED * scale:
        return False, (f"the graph run in float64 is {eager_error:.3g} RMS from eager (output "
                       f"RMS {scale:.3g}): no yardstick")
    bound = MULTIPLIER.get(got.dtype, 2.0) * eager_error + RELATIVE * scale
    return error <= bound, (f"RMS error against float64 {error:.3g}, eager's {eager_error:.3g}, "
                            f"output RMS {scale:.3g}")
