"""BoundSession: a lane's session run through ONNX Runtime's IO binding, buffers allocated once.

A lane (runtime/lanes.py) owns its sessions, so their input and output buffers can live on the
device for the whole run: each input is an OrtValue allocated at the first call with a given
set of input shapes and then refreshed in place (`update_inplace`: one host-to-device copy, no
allocation), and each output is bound to an OrtValue that ORT allocated on that first call (or
that was allocated up front when the model's output shapes are fixed). Buffers that never move
are also what a CUDA graph needs: the graph replays the captured kernels on the same addresses.

It offers the part of InferenceSession that livecam's models use (run, get_inputs,
get_outputs, get_providers), so processors do not know which one they hold. One thread at a time:
a lane's sessions belong to its thread. On the CPU provider the device is 'cpu', so the same
code runs (and is tested) without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

# ONNX Runtime's names for tensor types and the numpy dtypes they hold, stated once (read-only):
# bound outputs are allocated with them, sessions.input_dtype reads the float ones.
ORT_TYPES: Mapping[str, type[np.generic]] = MappingProxyType({
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(uint8)": np.uint8, "tensor(int32)": np.int32, "tensor(int64)": np.int64})


@dataclass
class _Bound:
    """The buffers of one set of input shapes."""

    binding: Any
    inputs: dict[str, Any]  # name -> OrtValue, refreshed in place
    outputs: dict[str, Any] | None  # name -> OrtValue once known (after the first run)
    run_options: Any = None  # with CUDA graphs, the graph id of these buffers


class BoundSession:
    """An InferenceSession behind IO binding on `device` ('cuda' or 'cpu')."""

    def __init__(self, session: Any, device: str = "cpu", device_id: int = 0, graphs: bool = False) -> None:
        self.session = session
        self.device = device
        self.device_id = device_id
        self.graphs = graphs  # the session captures CUDA graphs: one graph id per set of buffers
        self._output_meta = {o.name: o for o in session.get_outputs()}
        self._bound: dict[tuple[Any, ...], _Bound] = {}

    # ---- what processors use -------------------------------------------------------------------
    def get_inputs(self) -> Any:
        return self.session.get_inputs()

    def get_outputs(self) -> Any:
        return self.session.get_outputs()

    def get_providers(self) -> Any:
        return self.session.get_providers()

    def run(self, output_names: Sequence[str] | None, feeds: Mapping[str, np.ndarray],
            run_options: Any = None) -> list[np.ndarray]:
        """As InferenceSession.run: host arrays in, host arrays out (copies: the next call
        reuses the buffers)."""
        names = list(output_names) if output_names else list(self._output_meta)
        arrays = {k: np.ascontiguousarray(v) for k, v in feeds.items()}
        key = (tuple(names), *((k, a.shape, a.dtype.str) for k, a in sorted(arrays.items())))
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bind(names, arrays)
            if self.graphs:  # a graph replays on the addresses it was captured with
                from livecam.runtime.providers import import_onnxruntime

                bound.run_options = import_onnxruntime().RunOptions()
                bound.run_options.add_run_config_entry("gpu_graph_id", str(len(self._bound)))
            self._bound[key] = bound
        else:
            for name, array in arrays.items():
                bound.inputs[name].update_inplace(array)
        self.session.run_with_iobinding(bound.binding, run_options if run_options is not None else bound.run_options)
        if bound.outputs is None:
            # ORT allocated them on this first run, inside the binding (freed with its outputs in
            # onnxruntime 1.23): read them now, then bind buffers of our own of the same shapes.
            from onnxruntime import OrtValue

            results = [np.array(value.numpy(), copy=True) for value in bound.binding.get_outputs()]
            bound.outputs = {name: OrtValue.ortvalue_from_shape_and_type(list(r.shape), r.dtype.type, self.device,
                                                                         self.device_id)
                             for name, r in zip(names, results)}
            bound.binding.clear_binding_outputs()
            for name, value in bound.outputs.items():
                bound.binding.bind_ortvalue_output(name, value)
            return results
        return [np.array(bound.outputs[name].numpy(), copy=True) for name in names]

    # ---- buffers --------------------------------------------------------------------------------
    def _bind(self, names: list[str], arrays: Mapping[str, np.ndarray]) -> _Bound:
        from onnxruntime import OrtValue

        binding = self.session.io_binding()
        inputs = {}
        for name, array in arrays.items():
            # A buffer of its own, filled by copy: on the CPU, ortvalue_from_numpy wraps the
            # array's memory (no copy, and no reference in onnxruntime 1.23), which this call's
            # temporary array would leave dangling for the next update_inplace.
            inputs[name] = OrtValue.ortvalue_from_shape_and_type(list(array.shape), array.dtype.type, self.device,
                                                                 self.device_id)
            inputs[name].update_inplace(array)
            binding.bind_ortvalue_input(name, inputs[name])
        outputs: dict[str, Any] | None = {}
        for name in names:
            shape = self._output_meta[name].shape
            dtype = ORT_TYPES.get(self._output_meta[name].type)
            if outputs is not None and dtype is not None and all(isinstance(d, int) for d in shape):
                outputs[name] = OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, self.device,
                                                                      self.device_id)
            else:
                outputs = None  # a dynamic output: ORT allocates on the first run, reused after
                break
        if outputs is None:
            for name in names:
                binding.bind_output(name, self.device, self.device_id)
        else:
            for name, value in outputs.items():
                binding.bind_ortvalue_output(name, value)
        return _Bound(binding, inputs, outputs)
