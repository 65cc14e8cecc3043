"""Buffer updates as graph state for ONNX: each buffer the graph writes is fed as an input
and its new value is an output; the runner carries the values from call to call.

ONNX export makes buffers initializers (constants) and drops ``copy_`` into them, so a
stateful graph (``self.hits += 1`` in a branch) would never advance. Before exporting, the
update becomes an output; after, the buffer's initializer also becomes a graph input (an
ONNX input with an initializer is a default a caller may override), so a saved artifact
starts where the program started:

    before:  copy_(b_model_hits, getitem_1)
    after:   hits_new = clone(getitem_1); return (..., hits_new, ...)
             # ONNX: input "model.hits" (initializer = its value at export);
             # OnnxGraph.state == ("model.hits",)

Writes other than ``copy_`` (``add_`` on a buffer) are refused.
"""

from __future__ import annotations

import torch

from .built import BackendUnavailable
from .writes import buffer_writes

COPY = torch.ops.aten.copy_.default


def lift_buffer_updates(gm: torch.fx.GraphModule, signature) -> list:
    """Rewrite ``gm`` (a copy) in place; returns [(placeholder name, buffer target,
    new-value node)] in output order."""
    buffer_of = dict(signature.inputs_to_buffers)
    last: dict[str, tuple[str, torch.fx.Node]] = {}
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not COPY:
            continue
        target, value = node.args[0], node.args[1]
        if not isinstance(target, torch.fx.Node) or target.name not in buffer_of:
            continue
        want, got = target.meta.get("val"), getattr(value, "meta", {}).get("val")
        if want is None or got is None or want.shape != got.shape or want.dtype != got.dtype:
            raise BackendUnavailable(f"buffer {buffer_of[target.name]} is updated with a value "
                                     "of another shape or dtype (copy_ broadcasts or casts); "
                                     "not lifted for ONNX")
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(torch.ops.aten.clone.default, (value,))
        new.meta["val"] = got
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        last[target.name] = (buffer_of[target.name], new)
    _refuse_other_writes(gm, buffer_of)
    return [(name, target, new) for name, (target, new) in last.items()]


def _refuse_other_writes(gm: torch.fx.GraphModule, buffer_of: dict[str, str]) -> None:
    for node, buffer in buffer_writes(gm.graph, buffer_of):
        raise BackendUnavailable(
            f"buffer {buffer} is written in place by {node.target} "
            "(only copy_ updates are carried as ONNX state); ONNX export would drop "
            "the write")


def expose_state(model: bytes, state: list[str]) -> bytes:
    """Make each updated buffer's initializer a graph input too (its value the default)."""
    import onnx
    from onnx import helper

    proto = onnx.load_from_string(model)
    inputs = {i.name for i in proto.graph.input}
    initializers = {i.name: i for i in proto.graph.initializer}
    for name in state:
        if name in initializers and name not in inputs:  # absent: the graph never reads it
            init = initializers[name]
            proto.graph.input.append(
                helper.make_tensor_value_info(name, init.data_type, list(init.dims)))
    return proto.SerializeToString()


def initial_values(model: bytes, names: tuple[str, ...]) -> dict:
    """{state input name: numpy array} read back from the model's initializers, for the
    state inputs the graph reads (one it only writes was dropped as an input)."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load_from_string(model)
    fed = [n for n in names if n in {i.name for i in proto.graph.input}]  # others: unused
    found = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer
             if i.name in fed}
    missing = [n for n in fed if n not in found]
    if missing:
        raise BackendUnavailable(f"the ONNX graph has no initial value for state {missing}")
    return found
