"""The Runner of LLMEngine: computes a scheduled batch over the paged KV cache and samples.

The chunks of one step (decodes and prefill chunks of many sequences) are flattened into one
token batch: every linear layer runs once for all of them, only attention is per sequence
(see attention.py). On CUDA a batch of decodes replays a CUDA graph captured for its padded
size, which removes the launch overhead that dominates small-batch decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.torch.arch import CausalLM
from engine.torch.attention import AttnMeta, KVCache, PrefillSpan, decode_slots, slots_at
from engine.torch.config import EngineConfig
from engine.torch.sampler import Sampler
from engine.torch.scheduler import ScheduledBatch, ScheduledChunk

GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)


class ModelRunner:
    def __init__(
        self,
        model: CausalLM,
        kv: KVCache,
        config: EngineConfig,
        sampler: Sampler | None = None,
        cuda_graphs: bool | None = None,
    ):
        self.model, self.kv, self.config = model, kv, config
        self.device = model.device
        self.sampler = sampler or Sampler(self.device)
        self.max_step_tokens = 0  # the largest batch seen, for the activation estimate
        self._graphs: DecodeGraphs | None = None
        if cuda_graphs is None:
            cuda_graphs = self.device.type == "cuda"
        if cuda_graphs:
            self._graphs = DecodeGraphs(self, min(config.max_num_seqs, GRAPH_BATCH_SIZES[-1]))

    @torch.inference_mode()
    def run(self, batch: ScheduledBatch) -> list[int | None]:
        logits, rows = self.logits(batch.chunks)
        results: list[int | None] = [None] * len(batch.chunks)
        wanted = [i for i, r in enumerate(rows) if r is not None]
        if wanted:
            chunks = [batch.chunks[i] for i in wanted]
            logits = logits[[rows[i] for i in wanted]]  # rows come decodes first; sample in chunk order
            tokens = self.sampler.sample(logits, [c.seq.sampling for c in chunks], [c.end for c in chunks])
            for i, token in zip(wanted, tokens, strict=True):
                results[i] = token
        return results

    def logits(self, chunks: list[ScheduledChunk]) -> tuple[torch.Tensor, list[int | None]]:
        """Logits [n, vocab] of the chunks that end their sequence; rows[i] is chunk i's row or None."""
        self.max_step_tokens = max(self.max_step_tokens, sum(c.end - c.start for c in chunks))
        if self._graphs is not None and len(chunks) <= self._graphs.max_batch and all(
            c.end - c.start == 1 for c in chunks
        ):
            return self._graphs.run(chunks), list(range(len(chunks)))
        items = [WorkItem(c.seq.token_ids[c.start : c.end], c.start, c.seq.block_table) for c in chunks]
        wanted = [[len(it.tokens) - 1] if c.end == c.seq.num_tokens else [] for c, it in zip(chunks, items, strict=True)]
        logits, picked = self.forward_items(items, wanted)
        return logits, [p[0] if p else None for p in picked]

    def forward_items(
        self, items: list[WorkItem], wanted: list[list[int]]
    ) -> tuple[torch.Tensor, list[list[int]]]:
        """Run `items` in one pass; logits of the rows `wanted[i]` (offsets within item i).

        Returns the logits and, per item, the indices of its wanted rows in them.
        """
        decodes = [i for i, it in enumerate(items) if len(it.tokens) == 1]
        others = [i for i, it in enumerate(items) if len(it.tokens) != 1]
        order = decodes + others
        ids, positions, meta = self.prepare([items[i] for i in order], len(decodes))
        hidden = self.model(ids, positions, self.kv, meta)
        rows: list[int] = []
        picked: list[list[int]] = [[] for _ in items]
        offset = 0
        for i in order:
            for r in wanted[i]:
                picked[i].append(len(rows))
                rows.append(offset + r)
            offset += len(items[i].tokens)
        logits = self.model.logits(hidden[rows]) if rows else hidden.new_empty(0, 0)
        return logits, picked

    def prepare(self, items: list[WorkItem], num_decodes: int) -> tuple[torch.Tensor, torch.Tensor, AttnMeta]:
        """Flat token ids, positions and attention metadata (with cache slots); one-token items first."""
        bs, device = self.kv.block_size, self.device
        ids: list[int] = []
        positions: list[int] = []
        for it in items:
            ids.extend(it.tokens)
            positions.extend(range(it.start, it.start + len(it.tokens)))
        pos = torch.tensor(positions, dtype=torch.long)
        tables = [torch.tensor(it.block_table, dtype=torch.long) for it in items]
        slot_parts = []
        offset = 0
        for it, table in zip(items, tables, strict=True):
            slot_parts.append(slots_at(table, pos[offset : offset + len(it.tokens)], bs))
            offset += len(it.tokens)
        meta = AttnMeta(slot_mapping=torch.cat(slot_parts).to(device), num_decodes=num_decodes)
        if num_decodes:
            lengths = [it.start + 1 for it in items[:num_decodes]]
            width = max(lengths)
            slots = decode_slots(tables[:num_decodes], lengths, width, bs, self.kv.scratch_slot)
            meta.decode_slots = slots.to(device)
            if min(lengths) < width:
                mask = torch.arange(width) < torch.tensor(lengths)[:, None]
                meta.decode_mask = mask.view(num_decodes, 1, 1, width).to(device)
        offset = num_decodes
        for it, table in zip(items[num_decodes:], tables[num_decodes:], strict=True):
            n = len(it.tokens)
            meta.prefills.append(PrefillSpan(offset, n, it.start + n, table.to(device)))
            offset += n
        return torch.tensor(ids, dtype=torch.long, device=device), pos.to(device), meta


@dataclass(slots=True)
class WorkItem:
    """Tokens to evaluate at positions [start, start + len(tokens)) of a sequence with this block table."""

    tokens: list[int]
    start: int
    block_table: list[int]


class DecodeGraphs:
    """CUDA graphs of one decode step (model and logits), captured on first use for each padded batch
    size (1, 2, 4, ...) and context width (8, 16, 32, ... blocks), so short contexts gather little.

    Static input tensors are filled before each replay; padding rows write their K/V into the
    cache's scratch block and attend only to its first slot.
    """

    def __init__(self, runner: ModelRunner, max_batch: int, capture: bool = True):
        """capture=False runs each step eagerly over the same static buffers (checks their bookkeeping
        where no GPU is present)."""
        model, kv, device = runner.model, runner.kv, runner.device
        self.capture = capture
        self.steps: dict[tuple[int, int], Callable[[], torch.Tensor]] = {}
        self.model, self.kv, self.max_batch, self.device = model, kv, max_batch, device
        bs = kv.block_size
        self.max_width = -(-runner.config.max_model_len // bs) + 1
        self.ids = torch.zeros(max_batch, dtype=torch.long, device=device)
        self.positions = torch.zeros(max_batch, dtype=torch.long, device=device)
        self.slots = torch.full((max_batch,), kv.scratch_slot, dtype=torch.long, device=device)
        self.decode_slots = torch.full(
            (max_batch, self.max_width * bs), kv.scratch_slot, dtype=torch.long, device=device
        )
        self.mask = torch.zeros(max_batch, 1, 1, self.max_width * bs, dtype=torch.bool, device=device)
        self.sizes = [b for b in GRAPH_BATCH_SIZES if b <= max_batch]
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.outputs: dict[tuple[int, int], torch.Tensor] = {}
        self.pool = None

    def _width(self, blocks: int) -> int:
        width = 8
        while width < blocks:
            width *= 2
        return min(width, self.max_width)

    def _capture(self, b: int, w: int) -> None:
        bs, kv = self.kv.block_size, self.kv
        # Padding values first: the warm-up really runs, and must write nowhere but the scratch block.
        self.ids.zero_()
        self.positions.zero_()
        self.slots.fill_(kv.scratch_slot)
        self.decode_slots.fill_(kv.scratch_slot)
        self.mask.zero_()
        self.mask[..., 0] = True
        meta = AttnMeta(self.slots[:b], [], b, self.decode_slots[:b, : w * bs], self.mask[:b, :, :, : w * bs])

        def step() -> torch.Tensor:
            return self.model.logits(self.model(self.ids[:b], self.positions[:b], kv, meta))

        self.steps[(b, w)] = step
        if not self.capture:
            return
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):  # warm up kernels and the allocator outside capture
            step()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            self.outputs[(b, w)] = step()
        self.pool = graph.pool()
        self.graphs[(b, w)] = graph

    def run(self, chunks: list[ScheduledChunk]) -> torch.Tensor:
        n = len(chunks)
        b = next(size for size in self.sizes if size >= n)
        w = self._width(max(len(c.seq.block_table) for c in chunks))
        if (b, w) not in self.steps:
            self._capture(b, w)
        bs = self.kv.block_size
        ids = torch.tensor([c.seq.token_ids[c.start] for c in chunks], dtype=torch.long)
        pos = torch.tensor([c.start for c in chunks], dtype=torch.long)
        # Padding rows attend to the scratch block's first slot only, and write their K/V there.
        tables = [torch.tensor(c.seq.block_table, dtype=torch.long) for c in chunks]
        lengths = [c.start + 1 for c in chunks] + [1] * (b - n)
        pad = torch.tensor([self.kv.num_blocks], dtype=torch.long)
        rows = decode_slots(tables + [pad] * (b - n), lengths, w * bs, bs, self.kv.scratch_slot)
        slots = rows[torch.arange(b), torch.tensor(lengths) - 1]
        self.ids[:n].copy_(ids)
        self.ids[n:b].zero_()
        self.positions[:n].copy_(pos)
        self.positions[n:b].zero_()
        self.slots[:b].copy_(slots)
        self.decode_slots[:b, : w * bs].copy_(rows)
        self.mask[:b, :, :, : w * bs].copy_((torch.arange(w * bs) < torch.tensor(lengths)[:, None]).view(b, 1, 1, -1))
        if not self.capture:
            return self.steps[(b, w)]()[:n]
        self.graphs[(b, w)].replay()
        return self.outputs[(b, w)][:n]
