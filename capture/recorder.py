"""A recording ``torch.compile`` backend: keeps every fragment graph and the order it runs in.

Each compiled fragment is wrapped so that a call appends an event to the recorder's
current run; the wrapper also notes the identity of input and output tensors, from which
the data flow between fragments is recovered (a tensor one fragment returned and a later
one received).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import torch


@dataclass
class FragmentRecord:
    index: int
    graph_module: torch.fx.GraphModule
    input_sources: tuple[str, ...]
    ends_with_break: bool
    break_reason: str


@dataclass
class FragmentCall:
    fragment: int
    input_ids: tuple[int, ...]
    output_ids: tuple[int, ...]


@dataclass
class Run:
    """What happened during one call of the compiled model."""

    calls: list[FragmentCall] = field(default_factory=list)
    # strong references for the run's duration, so that tensor ids are not reused
    keepalive: list = field(default_factory=list)


class RecordingBackend:
    """Use as ``torch.compile(model, backend=RecordingBackend())``."""

    def __init__(self) -> None:
        self.fragments: list[FragmentRecord] = []
        self.current: Run | None = None
        self.events: list | None = None  # optional shared timeline (see tracer.Timeline)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        index = len(self.fragments)
        reason = getattr(gm, "compile_subgraph_reason", None)
        self.fragments.append(
            FragmentRecord(
                index=index,
                graph_module=gm,
                input_sources=_input_sources(gm),
                ends_with_break=bool(getattr(reason, "graph_break", False)),
                break_reason=str(getattr(reason, "reason", "")),
            )
        )
        forward = gm.forward
        recorder = self

        def run_fragment(*args):
            out = forward(*args)
            run = recorder.current
            if run is not None:
                flat_out = out if isinstance(out, list | tuple) else (out,)
                tensors_in = [a for a in args if isinstance(a, torch.Tensor)]
                tensors_out = [o for o in flat_out if isinstance(o, torch.Tensor)]
                run.keepalive.extend(tensors_in + tensors_out)
                run.calls.append(
                    FragmentCall(index, tuple(map(id, tensors_in)), tuple(map(id, tensors_out)))
                )
                if recorder.events is not None:
                    recorder.events.append(("fragment", index))
            return out

        return run_fragment

    def start_run(self) -> Run:
        self.current = Run()
        return self.current

    def end_run(self) -> Run:
        run, self.current = self.current, None
        assert run is not None
        run.keepalive.clear()
        return run


def _input_sources(gm: torch.fx.GraphModule) -> tuple[str, ...]:
    """Where each placeholder comes from, e.g. ``L['self']._modules['l']._parameters['weight']``.

    Dynamo drops the placeholders' ``grapharg`` metadata before calling the backend, but the
    OutputGraph that is calling us still holds it; fall back to placeholder names.
    """
    names = tuple(n.name for n in gm.graph.nodes if n.op == "placeholder")
    frame = inspect.currentframe()
    try:
        for _ in range(12):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                break
            owner = frame.f_locals.get("self")
            graphargs = getattr(owner, "graphargs", None) if owner is not None else None
            if graphargs is not None and type(owner).__name__ == "OutputGraph":
                sources = tuple(_source_name(a.source) for a in graphargs)
                if len(sources) == len(names):
                    return sources
                break
    except Exception:  # noqa: BLE001 - best effort; names are a fine fallback
        pass
    finally:
        del frame
    return names


def _source_name(source) -> str:
    name = getattr(source, "name", source)
    return str(name() if callable(name) else name)
