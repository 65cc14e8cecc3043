"""The stock Triton variant of an ONNX artifact, for GPU servers.

Triton's ONNX Runtime backend runs the graph with TensorRT as its execution accelerator
(the ``If``/``Loop`` of the stitched graph stay inside); a Python-backend step replays the
epilogue (and raises failed checks) per request; an ensemble chains them, so clients see
the model's inputs and outputs under the same names as the Python-backend model:

    <model>_graph      platform: "onnxruntime_onnx", KIND_GPU, gpu_execution_accelerator tensorrt
    <model>_epilogue   backend: "python" (stitch.serve.python_backend.EpilogueTritonModel)
    <model>_pipeline   platform: "ensemble"

**Written, not served here**: the Triton server PyTriton bundles has the Python backend only
(no ONNX Runtime backend) and this machine has no GPU.
"""

from __future__ import annotations

import os
import shutil

from .spec import TRITON_DTYPES, ServeSpec

ONNX_TYPES = {1: "TYPE_FP32", 2: "TYPE_UINT8", 3: "TYPE_INT8", 5: "TYPE_INT16",
              6: "TYPE_INT32", 7: "TYPE_INT64", 9: "TYPE_BOOL", 10: "TYPE_FP16",
              11: "TYPE_FP64", 16: "TYPE_BF16"}

EPILOGUE_PY = '''"""The epilogue step of a stitch ONNX pipeline (written by stitch export --triton-repo):
checks and epilogue of model.onnx (the artifact, read for its metadata), per request."""

import os
import site
import sys

_before = list(sys.path)
for _d in filter(None, os.environ.get("STITCH_SITE_DIRS", "").split(os.pathsep)):
    site.addsitedir(_d)
sys.path[:] = [p for p in sys.path if p not in _before] + _before

import triton_python_backend_utils as pb_utils  # noqa: E402

from stitch.serve.python_backend import EpilogueTritonModel  # noqa: E402


class TritonPythonModel(EpilogueTritonModel):
    utils = pb_utils
'''


def _value_info(value) -> tuple[str, str, list[int]]:
    tensor = value.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
    return value.name, ONNX_TYPES.get(tensor.elem_type, "TYPE_INVALID"), dims


def _tensors(items) -> str:
    return ",\n".join(f'  {{ name: "{n}" data_type: {t} dims: [ {", ".join(map(str, d))} ] }}'
                      if d else f'  {{ name: "{n}" data_type: {t} dims: [ 1 ] '
                      "reshape: { shape: [ ] } }" for n, t, d in items)


def graph_config(name: str, inputs, outputs) -> str:
    return (f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\n'
            f"input [\n{_tensors(inputs)}\n]\noutput [\n{_tensors(outputs)}\n]\n"
            "instance_group [ { kind: KIND_GPU count: 1 } ]\n"
            "optimization { execution_accelerators { gpu_execution_accelerator: [ {\n"
            '  name: "tensorrt"\n'
            '  parameters { key: "precision_mode" value: "FP32" } } ] } }\n')


def epilogue_config(name: str, graph_outputs, user_outputs) -> str:
    return (f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
            f"input [\n{_tensors(graph_outputs)}\n]\noutput [\n{_tensors(user_outputs)}\n]\n"
            "instance_group [ { kind: KIND_CPU count: 1 } ]\n")


def ensemble_config(name: str, model: str, inputs, outputs, feeds: dict[str, str],
                    graph_outputs) -> str:
    """``feeds``: graph input name -> ensemble input name."""
    def maps(kind: str, pairs) -> str:
        return " ".join(f'{kind} {{ key: "{k}" value: "{v}" }}' for k, v in pairs)

    inner = [(n, f"graph_{n}") for n, _, _ in graph_outputs]
    steps = (f'  {{ model_name: "{model}_graph" model_version: -1\n'
             f"    {maps('input_map', feeds.items())}\n    {maps('output_map', inner)} }},\n"
             f'  {{ model_name: "{model}_epilogue" model_version: -1\n'
             f"    {maps('input_map', inner)}\n"
             f"    {maps('output_map', [(n, n) for n, _, _ in outputs])} }}")
    return (f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 0\n'
            f"input [\n{_tensors(inputs)}\n]\noutput [\n{_tensors(outputs)}\n]\n"
            f"ensemble_scheduling {{ step [\n{steps}\n] }}\n")


def write_stock_onnx(artifact: str, directory: str, model: str, graph, spec: ServeSpec) -> str:
    """Write the three stock models beside ``model``; returns the pipeline's folder."""
    import onnx

    proto = onnx.load_from_string(graph.model)
    graph_inputs = [_value_info(v) for v in proto.graph.input]
    graph_outputs = [_value_info(v) for v in proto.graph.output]
    user_inputs = [(s.name, TRITON_DTYPES[s.dtype], list(s.shape)) for s in spec.inputs]
    user_outputs = [(s.name, TRITON_DTYPES[s.dtype], list(s.shape)) for s in spec.outputs]
    by_index = {index: name for index, name in graph.feeds}
    feeds = {by_index[i]: s.name for i, s in enumerate(spec.inputs) if i in by_index}
    written = {
        f"{model}_graph": graph_config(f"{model}_graph", graph_inputs, graph_outputs),
        f"{model}_epilogue": epilogue_config(f"{model}_epilogue", graph_outputs, user_outputs),
        f"{model}_pipeline": ensemble_config(f"{model}_pipeline", model, user_inputs,
                                             user_outputs, feeds, graph_outputs),
    }
    for name, config in written.items():
        os.makedirs(os.path.join(directory, name, "1"), exist_ok=True)
        with open(os.path.join(directory, name, "config.pbtxt"), "w") as f:
            f.write(config)
    shutil.copyfile(artifact, os.path.join(directory, f"{model}_graph", "1", "model.onnx"))
    shutil.copyfile(artifact, os.path.join(directory, f"{model}_epilogue", "1", "model.onnx"))
    with open(os.path.join(directory, f"{model}_epilogue", "1", "model.py"), "w") as f:
        f.write(EPILOGUE_PY)
    return os.path.join(directory, f"{model}_pipeline")
