"""Which weight types llama.cpp's CPU backend copies into its own layout ("CPU_REPACK" buffers).

On the CPU, llama.cpp loads some quantized matrix weights a second time, interleaved for its
SIMD kernels (ggml-cpu/repack.cpp, `ggml_repack_get_optimal_repack_type`). The copy is as large
as the tensor and sits beside the memory-mapped file, so a CPU plan must count it. Which types
are repacked depends on the instructions the CPU backend was built for: this module turns
llama.cpp's own feature list (`llama_print_system_info()`: "AVX2 = 1 | ... | REPACK = 1") into
the set of ggml type ids, following that function of llama-cpp-python 0.3.36's llama.cpp.
"""

from __future__ import annotations

import platform
from pathlib import Path

from models.formats.ggml_types import GGML_TYPES

# Only matrices with a multiple of this many rows (ne[1]) are repacked: the x86 kernels
# interleave 8 rows. (Some ARM kernels need only 4; real models' row counts are multiples of 8.)
REPACK_ROW_MULTIPLE = 8


def _ids(*names: str) -> frozenset[int]:
    return frozenset(i for i, t in GGML_TYPES.items() if t.name in names)


_AVX2 = _ids("Q4_0", "Q4_K", "IQ4_NL", "MXFP4")
_AVX512 = _ids("Q2_K")
_NEON_DOTPROD = _ids("Q4_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "MXFP4", "Q8_0", "Q1_0")
_NEON_I8MM = _ids("Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "Q1_0")


def repack_types(features: frozenset[str]) -> frozenset[int]:
    """The ggml type ids repacked by a CPU backend with `features` (upper-case names, as llama.cpp prints them).

    A build without the repack buffer (no "REPACK" feature while others are listed) repacks nothing.
    """
    if features and "REPACK" not in features:
        return frozenset()
    out: set[int] = set()
    if "AVX2" in features:
        out |= _AVX2
    if "AVX512" in features:
        out |= _AVX512
    if "NEON" in features and "MATMUL_INT8" in features:
        out |= _NEON_I8MM
    if "NEON" in features and "DOTPROD" in features:
        out |= _NEON_DOTPROD
    return frozenset(out)


def parse_system_info(text: str) -> frozenset[str]:
    """The features set to 1 in `llama_print_system_info()`'s text ("CPU : SSE3 = 1 | AVX2 = 1 | ...")."""
    features = set()
    for part in text.replace(":", "|").split("|"):
        name, _, value = part.partition("=")
        if value.strip() == "1":
            features.add(name.strip().upper())
    return frozenset(features)


def guess_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The features a native llama.cpp build would have here, from the CPU's flags.

    Used only when llama.cpp itself could not be asked (its probe failed): on x86 the AVX2 flag
    of /proc/cpuinfo, on 64-bit ARM the dot-product and int8 matmul ones (Apple
    silicon has both).
    """
    machine = platform.machine().lower()
    try:
        text = cpuinfo.read_text(errors="replace").lower()
    except OSError:
        text = ""
    flags = set(text.split())
    features = {"REPACK"}
    if machine in ("x86_64", "amd64"):
        # AVX-512 only adds Q2_K, and wheels are often built without it (this machine's is): left out.
        if "avx2" in flags:
            features.add("AVX2")
    elif machine in ("arm64", "aarch64"):
        features.add("NEON")
        if "asimddp" in flags or platform.system() == "Darwin":
            features.add("DOTPROD")
        if "i8mm" in flags or platform.system() == "Darwin":
            features.add("MATMUL_INT8")
    return frozenset(features)


def repackable(tensor) -> bool:  # noqa: ANN001 - models.formats.tensor_info.TensorInfo
    """A matrix llama.cpp multiplies by (2-D, or 3-D experts) whose rows suit the repacked layout.

    Only quantized matrices are candidates; which types are repacked is the CPU's (`repack_types`).
    """
    return len(tensor.shape) in (2, 3) and tensor.shape[1] % REPACK_ROW_MULTIPLE == 0 and \
        GGML_TYPES[tensor.ggml_type].block_size > 1


def parts_by_type(tensors) -> tuple[tuple[int, int], ...]:  # noqa: ANN001 - iterable of TensorInfo
    """(ggml type, bytes) of the repackable matrices among `tensors`, one pair per type."""
    out: dict[int, int] = {}
    for t in tensors:
        if repackable(t):
            out[t.ggml_type] = out.get(t.ggml_type, 0) + t.nbytes
    return tuple(sorted(out.items()))


def cpu_repack_of(llama) -> frozenset[int]:  # noqa: ANN001 - models.hardware.backend_devices.LlamaDevices | None
    """The types llama.cpp here repacks: from its own feature list, else guessed from the CPU."""
    if llama is not None and llama.known and llama.cpu_features:
        return repack_types(frozenset(llama.cpu_features))
    return repack_types(guess_features())
