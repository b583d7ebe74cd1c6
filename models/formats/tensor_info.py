"""The description of one tensor in a model file, shared by the GGUF and safetensors readers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class TensorInfo:
    """One tensor of a model file, as its header describes it.

    Attributes:
        name: The tensor's name in the file.
        ggml_type: The ggml type id (GGUF); -1 for safetensors.
        type_name: The ggml type name (`Q4_K`, `F16`) or the safetensors dtype (`BF16`, `I32`).
        shape: Dimensions in the file's own order: ggml's `ne` (innermost first) for GGUF,
            row-major (outermost first) for safetensors.
        offset: Byte offset of the data, relative to the start of the file's data section.
        nbytes: Size of the data in bytes.
    """

    name: str
    ggml_type: int
    type_name: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int

    @property
    def n_elements(self) -> int:
        """Number of elements (the product of the shape)."""
        n = 1
        for dim in self.shape:
            n *= dim
        return n
