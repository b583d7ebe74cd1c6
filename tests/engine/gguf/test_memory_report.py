"""The GGUF memory report: llama.cpp's buffers per device, KV cells in use, the rest of the process."""

from __future__ import annotations

import json
from pathlib import Path

import llama_cpp
import pytest

from engine.client import EngineClient
from engine.device_memory import DeviceMeter, build_report, nvml_index
from engine.gguf.backend import GgufBackend
from engine.gguf.llama_handle import LlamaHandle, LlamaSettings
from engine.gguf.log_bridge import BufferSizes, LlamaLogBridge
from engine.gguf.memory_report import (
    count_cells,
    device_of,
    distinct_prefix_tokens,
    kv_cells_in_use,
    parts_by_device,
)
from engine.protocol import (
    ChatMessage,
    Done,
    GenerateRequest,
    Loaded,
    LoadRequest,
    MemoryReport,
    SamplingParams,
)
from engine.status_file import status_path
from tests.engine.helpers import collect, wait_for
from tests.fixtures.llama_buffers import cells_llama_cpp_holds

GREEDY = SamplingParams(temperature=0.0, max_tokens=12, seed=1)
SYSTEM = "You are a patient assistant. " * 30  # a long shared system prompt (> 64 tokens)


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("name", "device"),
    [("CPU", "cpu"), ("CPU_Mapped", "cpu"), ("CPU_REPACK", "cpu"), ("CUDA_Host", "cpu"), ("CUDA0", "cuda:0"),
     ("CUDA1", "cuda:1"), ("Vulkan0", "vulkan:0")],
)
def test_buffer_names_map_to_devices(name: str, device: str):
    assert device_of(name) == device


def test_parts_add_up_per_device():
    buffers = BufferSizes()
    for kind, name, n in [("weights", "CPU_Mapped", 100), ("weights", "CUDA0", 900), ("kv", "CUDA0", 50),
                          ("kv", "CPU", 5), ("compute", "CUDA0", 30), ("compute", "CUDA_Host", 7)]:
        buffers.add(kind, name, n)
    assert parts_by_device(buffers) == {
        "cpu": {"weights": 100, "kv": 5, "compute": 7},
        "cuda:0": {"weights": 900, "kv": 50, "compute": 30},
    }


def test_shared_prefixes_count_once():
    a, b, c = (1, 2, 3, 4, 5), (1, 2, 3, 9), (7, 8)
    assert distinct_prefix_tokens([a, b, c]) == 5 + 1 + 2
    spans = {0: (0, 4), 1: (0, 3), 2: (0, 1)}
    known = {0: a, 1: b, 2: c}
    assert count_cells(spans, known, shared=True) == 8
    assert count_cells(spans, known, shared=False) == 11  # separate streams hold their own copies
    assert count_cells(spans, {0: a}, shared=True) == 5 + 4 + 2  # unknown tokens: counted in full


class FakeNvml:
    """NVML as pynvml answers for one 24 GB GPU on which this process holds 3 GB."""

    def __init__(self, pid: int):
        self.pid, self.inits = pid, 0

    def init(self) -> None:
        self.inits += 1

    def shutdown(self) -> None: ...
    def device_count(self) -> int:
        return 2

    def device(self, index: int) -> object:
        return index

    def name(self, handle: object) -> str:
        return f"NVIDIA GeForce RTX 4090 #{handle}"

    def uuid(self, handle: object) -> str:
        return f"GPU-{handle}abc"

    def memory(self, handle: object) -> tuple[int, int, int]:
        return 24_000_000_000, 19_000_000_000, 5_000_000_000

    def process_memory(self, handle: object) -> dict[int, int | None]:
        return {self.pid: 3_000_000_000, 4242: 2_000_000_000}


def test_gpu_other_is_nvml_per_process_use_minus_llama_buffers():
    import os

    nvml = FakeNvml(os.getpid())
    meter = DeviceMeter(nvml)
    parts = {"cpu": {"weights": 10, "kv": 0, "compute": 5},
             "cuda:0": {"weights": 2_000_000_000, "kv": 400_000_000, "compute": 100_000_000}}
    report = build_report(parts, meter, kv_used=512, kv_total=4096)
    build_report(parts, meter, kv_used=512, kv_total=4096)
    assert nvml.inits == 1  # NVML is started once, not at every report
    gpu = report.device("cuda:0")
    assert gpu is not None and gpu.name == "NVIDIA GeForce RTX 4090 #0"
    assert gpu.other_bytes == 3_000_000_000 - 2_500_000_000
    assert (gpu.free_bytes, gpu.total_bytes) == (19_000_000_000, 24_000_000_000)
    assert gpu.kv_used_bytes == 400_000_000 // 8 and gpu.kv_used_tokens == 512
    assert report.device("cpu").kv_total_tokens == 0  # no KV layers in RAM


def test_cuda_ordinals_follow_cuda_visible_devices():
    nvml = FakeNvml(1)
    assert nvml_index(0, nvml, visible="") == 0
    assert nvml_index(0, nvml, visible="1") == 1
    assert nvml_index(1, nvml, visible="1,0") == 0
    assert nvml_index(0, nvml, visible="GPU-1ab") == 1


@pytest.mark.gpu
def test_real_gpu_report_matches_nvml():
    from tests.models.hardware.test_profile import _nvidia_smi

    if _nvidia_smi("name") is None:
        pytest.skip("no NVIDIA GPU (nvidia-smi finds none)")
    usage = DeviceMeter().gpu(0)
    assert usage is not None and usage.total_bytes > 0 and 0 < usage.free_bytes <= usage.total_bytes


@pytest.mark.gpu
def test_offloaded_layers_are_reported_on_the_gpu(starter_model: Path):
    from tests.models.hardware.test_profile import _nvidia_smi

    if _nvidia_smi("name") is None or not llama_cpp.llama_supports_gpu_offload():
        pytest.skip("no NVIDIA GPU, or llama.cpp built without GPU offload")
    b = GgufBackend(LlamaLogBridge())
    b.load(LoadRequest(str(starter_model), n_ctx=2048, n_gpu_layers=99))
    try:
        report = b.memory()
    finally:
        b.close()
    gpu = report.device("cuda:0")
    assert gpu is not None and gpu.weights_bytes > 50e6 and gpu.kv_allocated_bytes > 0 and gpu.compute_bytes > 0
    usage = DeviceMeter().gpu(0)
    assert usage is not None and gpu.total_bytes == usage.total_bytes
    assert gpu.name == usage.name


# ---------------------------------------------------------------- real llama.cpp, in process


@pytest.fixture(scope="module")
def backend(starter_model: Path):
    b = GgufBackend(LlamaLogBridge())
    b.load(LoadRequest(str(starter_model), n_ctx=2048, n_threads=2))
    yield b
    b.close()


MIB = 1 << 20


def test_report_parts_agree_with_llama_cpp_s_own_figures(backend: GgufBackend):
    """The report reads llama.cpp's load log; llama.cpp's API says the same another way."""
    report = backend.memory()
    cpu = report.device("cpu")
    llm = backend._llama
    # The log states sizes in MiB with two decimals: each buffer is within 0.005 MiB of its bytes.
    assert abs(cpu.weights_bytes - llama_cpp.llama_model_size(llm.model_pointer)) <= 0.005 * MIB
    assert report.kv_tokens_total == cpu.kv_total_tokens == llama_cpp.llama_n_ctx(llm.context_pointer) == 2048
    assert cpu.kv_allocated_bytes == 30 * 2048 * 192 * 2 * 2  # 30 layers, 3 KV heads of 64, f16 K and V
    assert cpu.compute_bytes > 0  # llama.cpp states its compute buffers only in that log


def test_kv_bytes_per_cell_are_what_llama_cpp_saves_per_cell(backend: GgufBackend):
    """llama.cpp's state of a sequence holds each cell's K and V (and 12 bytes of position and ids):
    two fills tell the bytes of one cell, which times the context is the KV cache allocated."""
    ctx = backend._llama.context_pointer
    sizes = []
    for question in ("Hi!", "Tell me about the history of bread, in some detail please."):
        backend.generate(GenerateRequest(1, (ChatMessage("user", question),), GREEDY), lambda _t: None,
                         lambda: False)
        (seq, cells), = cells_llama_cpp_holds(ctx).items()
        sizes.append((cells, llama_cpp.llama_state_seq_get_size(ctx, seq)))
    (n1, bytes1), (n2, bytes2) = sizes
    assert n2 > n1
    per_cell = (bytes2 - bytes1) / (n2 - n1)
    cpu = backend.memory().device("cpu")
    assert abs(cpu.kv_allocated_bytes - per_cell * 2048) <= 0.001 * cpu.kv_allocated_bytes
    assert cpu.kv_used_bytes == cpu.kv_allocated_bytes * n2 // 2048


def test_kv_cells_in_use_come_from_llama_cpp(backend: GgufBackend):
    done = backend.generate(GenerateRequest(1, (ChatMessage("user", "Hello!"),), GREEDY), lambda _t: None,
                            lambda: False)
    report = backend.memory()
    # What llama.cpp's memory holds, read from its own API, not from Tailor's or llama-cpp-python's counters.
    (cells,) = cells_llama_cpp_holds(backend._llama.context_pointer).values()
    assert report.kv_tokens_used == cells
    # The last sampled token is evaluated only when another one follows it.
    assert done.stats.prompt_tokens + done.stats.gen_tokens - 1 <= cells <= done.stats.prompt_tokens + done.stats.gen_tokens
    cpu = report.device("cpu")
    assert cpu.kv_used_bytes == cpu.kv_allocated_bytes * cells // 2048


def test_a_pinned_prompt_and_the_chats_using_it_share_their_prefix_once(backend: GgufBackend, starter_model: Path):
    """A pinned system prompt stays parked in the KV cache; chats that start with it share its cells."""
    # llama.cpp has one log callback per process: the second backend shares the first one's bridge.
    backend = GgufBackend(backend._logs)
    try:
        backend.load(LoadRequest(str(starter_model), n_ctx=2048, n_threads=2, pinned_prompts=(SYSTEM,)))
        seqs = backend._prefixes.seqs
        (pinned,) = seqs.parked
        assert backend.memory().kv_tokens_used == len(pinned.tokens)
        tail = " Also consider these notes: " + "one two three four five six seven eight nine ten " * 8
        counts = []
        for i, question in enumerate(["Name a red fruit.", "Name a large sea animal.", "Name a red fruit."]):
            messages = (ChatMessage("system", SYSTEM), ChatMessage("user", question + tail))
            backend.generate(GenerateRequest(i, messages, GREEDY), lambda _t: None, lambda: False)
            counts.append((backend.memory().kv_tokens_used, len(seqs.live_tokens)))
            # llama.cpp's own view: the live sequence holds its positions from 0.
            assert llama_cpp.llama_memory_seq_pos_min(llama_cpp.llama_get_memory(backend._llama.context_pointer), 0) == 0
        # The first two chats continue the pinned prompt's cells: counted once.
        assert counts[0][0] == counts[0][1] and counts[1][0] == counts[1][1]
        # The third comes back from the RAM tier: the same first tokens again, in cells of its own.
        assert counts[2][0] == counts[2][1] + len(pinned.tokens)
    finally:
        backend.close()


def test_cells_shared_between_sequences_count_once(starter_model: Path):
    """A prefix copied to a second sequence (llama_memory_seq_cp) occupies its cells once."""
    llama = LlamaHandle(starter_model, LlamaSettings(n_ctx=512, n_threads=2, n_seq=2), lambda: None)
    try:
        assert llama.n_seq == 2 and llama_cpp.llama_n_seq_max(llama.context_pointer) == 2
        prefix = llama.tokenize(b"The quick brown fox jumps over the lazy dog.", add_bos=True, special=False)
        tail_a = llama.tokenize(b" Red", add_bos=False, special=False)
        tail_b = llama.tokenize(b" Blue green", add_bos=False, special=False)
        assert llama.decode(prefix + tail_a, 0, seq_id=0) == 0
        llama.seq_cp(0, 1, 0, len(prefix))
        assert llama.decode(tail_b, len(prefix), seq_id=1) == 0
        known = {0: prefix + tail_a, 1: prefix + tail_b}
        assert kv_cells_in_use(llama, known, shared=True) == len(prefix) + len(tail_a) + len(tail_b)
        assert kv_cells_in_use(llama, {}, shared=True) == 2 * len(prefix) + len(tail_a) + len(tail_b)
    finally:
        llama.close()


# ---------------------------------------------------------------- the engine process


@pytest.fixture
def engine(starter_model: Path, tmp_path: Path):
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    client.load(LoadRequest(str(starter_model), n_ctx=2048, status_dir=str(tmp_path / "engines"),
                            forecast={"weights_bytes": 1}))
    assert isinstance(wait_for(client, (Loaded,)), Loaded)
    yield client
    client.shutdown()


def _reply(client: EngineClient, messages: list[ChatMessage]) -> tuple[Done, MemoryReport]:
    reply = collect(client, client.generate(messages, GREEDY))
    assert isinstance(reply.end, Done), reply.end
    report = wait_for(client, (MemoryReport,))  # the report sent right after the reply
    assert isinstance(report, MemoryReport)
    return reply.end, report


def test_kv_in_use_grows_by_prompt_and_reply(engine: EngineClient):
    first = [ChatMessage("system", SYSTEM), ChatMessage("user", "What is the capital of France?")]
    done, report = _reply(engine, first)
    s = done.stats
    assert s.prompt_tokens + s.gen_tokens - 1 <= report.kv_tokens_used <= s.prompt_tokens + s.gen_tokens
    second = [*first, ChatMessage("assistant", done.text), ChatMessage("user", "And of Italy?")]
    done2, report2 = _reply(engine, second)
    s2 = done2.stats
    assert s2.cached_tokens > 0
    # The context now holds exactly the second prompt and its reply; the first turn's cells are reused.
    assert s2.prompt_tokens + s2.gen_tokens - 1 <= report2.kv_tokens_used <= s2.prompt_tokens + s2.gen_tokens
    assert report2.device("cpu").kv_used_bytes > report.device("cpu").kv_used_bytes


def test_conversations_sharing_a_prefix_hold_it_once(engine: EngineClient):
    a = [ChatMessage("system", SYSTEM), ChatMessage("user", "Name a red fruit.")]
    b = [ChatMessage("system", SYSTEM), ChatMessage("user", "Name a large animal that lives in the sea.")]
    done_a, _ = _reply(engine, a)
    done_b, report = _reply(engine, b)
    sa, sb = done_a.stats, done_b.stats
    assert sb.cached_tokens > 60  # the system prompt came from the cells already there
    # In use: B's prompt and reply, and at most A's tail beside them (where the backend keeps
    # A's sequence): the shared system prompt is counted once, never twice.
    assert sb.prompt_tokens + sb.gen_tokens - 1 <= report.kv_tokens_used
    assert report.kv_tokens_used <= sa.prompt_tokens + sa.gen_tokens + sb.prompt_tokens + sb.gen_tokens - sb.cached_tokens


def test_status_file_holds_the_latest_report_and_goes_with_the_engine(engine: EngineClient, tmp_path: Path):
    _reply(engine, [ChatMessage("user", "Hi")])
    path = status_path(tmp_path / "engines", engine.pid)
    status = json.loads(path.read_text())
    assert status["pid"] == engine.pid and status["forecast"] == {"weights_bytes": 1}
    assert status["model"]["n_ctx"] == 2048 and status["model"]["kv_type"] == "f16"
    assert MemoryReport.from_dict(status["memory"]).kv_tokens_used > 0
    engine.shutdown()
    assert not path.exists()


def test_unload_reports_an_empty_engine(engine: EngineClient, tmp_path: Path):
    from engine.protocol import Unloaded

    engine.unload()
    assert isinstance(wait_for(engine, (Unloaded,)), Unloaded)
    report = wait_for(engine, (MemoryReport,))
    assert isinstance(report, MemoryReport) and report.devices == () and report.kv_tokens_total == 0
    status = json.loads(status_path(tmp_path / "engines", engine.pid).read_text())
    assert status["model"] is None  # the engine runs, with no model


def test_idle_reports_only_what_changed():
    from dataclasses import replace

    from engine.host import MEMORY_NOISE_BYTES, _changed
    from engine.protocol import DeviceMemory

    cpu = DeviceMemory("cpu", 100, 50, 10, 30, 5, 8 << 30, 16 << 30, 20, 2048)
    report = MemoryReport((cpu,), 20, 2048)
    assert _changed(None, report)
    assert not _changed(report, replace(report, devices=(replace(cpu, free_bytes=cpu.free_bytes - (1 << 20)),)))
    assert _changed(report, replace(report, devices=(replace(cpu, free_bytes=cpu.free_bytes - MEMORY_NOISE_BYTES),)))
    assert _changed(report, replace(report, devices=(replace(cpu, prefix_cache_bytes=1),)))
    assert _changed(report, replace(report, prefix_cache_disk_bytes=4096))
    assert _changed(report, replace(report, kv_tokens_used=21))
    # The PyTorch engine's shared and kept-for-reuse blocks: the panel shows both.
    assert _changed(report, replace(report, kv_shared_tokens=16))
    assert _changed(report, replace(report, kv_cached_tokens=16))
