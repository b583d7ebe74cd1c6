"""The Runner of LLMEngine: computes a scheduled batch over the paged KV cache and samples.

The chunks of one step (decodes and prefill chunks of many sequences) are flattened into one
token batch: every linear layer runs once for all of them, only attention is per sequence
(see attention.py). On CUDA a batch of decodes replays a CUDA graph captured for its padded
size, which removes the launch overhead that dominates small-batch decoding.
"""

from __future__ import annotations

import torch

from engine.torch.arch import CausalLM
from engine.torch.attention import AttnMeta, KVCache, PrefillSpan
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
        decodes = [i for i, c in enumerate(chunks) if c.end - c.start == 1]
        prefills = [i for i, c in enumerate(chunks) if c.end - c.start != 1]
        self.max_step_tokens = max(self.max_step_tokens, sum(c.end - c.start for c in chunks))
        if self._graphs is not None and not prefills and len(decodes) <= self._graphs.max_batch:
            logits = self._graphs.run([chunks[i] for i in decodes])
            return logits, list(range(len(chunks)))
        ids, positions, slots, meta = self.prepare([chunks[i] for i in decodes + prefills], len(decodes))
        hidden = self.model(ids, positions, self.kv, meta)
        # The row of each chunk's last token, in the flat batch (decodes first).
        rows: list[int | None] = [None] * len(chunks)
        picked: list[int] = []
        offset = 0
        for i in decodes + prefills:
            c = chunks[i]
            offset += c.end - c.start
            if c.end == c.seq.num_tokens:
                rows[i] = len(picked)
                picked.append(offset - 1)
        logits = self.model.logits(hidden[picked]) if picked else hidden.new_empty(0, 0)
        return logits, rows

    def prepare(
        self, chunks: list[ScheduledChunk], num_decodes: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, AttnMeta]:
        """Flat token ids, positions, cache slots and attention metadata; decode chunks first."""
        bs, device = self.kv.block_size, self.device
        ids: list[int] = []
        positions: list[int] = []
        for c in chunks:
            ids.extend(c.seq.token_ids[c.start : c.end])
            positions.extend(range(c.start, c.end))
        pos = torch.tensor(positions, dtype=torch.long)
        tables = [torch.tensor(c.seq.block_table, dtype=torch.long) for c in chunks]
        slot_parts = []
        offset = 0
        for c, table in zip(chunks, tables, strict=True):
            p = pos[offset : offset + c.end - c.start]
            slot_parts.append(table[p // bs] * bs + p % bs)
            offset += c.end - c.start
        slots = torch.cat(slot_parts)
        meta = AttnMeta(slot_mapping=slots.to(device), num_decodes=num_decodes)
        if num_decodes:
            width = max(len(c.seq.block_table) for c in chunks[:num_decodes])
            padded = torch.full((num_decodes, width), self.kv.num_blocks, dtype=torch.long)
            lengths = torch.tensor([c.end for c in chunks[:num_decodes]])
            for r, table in enumerate(tables[:num_decodes]):
                padded[r, : len(table)] = table
            meta.decode_tables = padded.to(device)
            meta.decode_mask = (torch.arange(width * bs) < lengths[:, None]).view(num_decodes, 1, 1, -1).to(device)
        offset = num_decodes
        for c, table in zip(chunks[num_decodes:], tables[num_decodes:], strict=True):
            meta.prefills.append(PrefillSpan(offset, c.end - c.start, c.end, table.to(device)))
            offset += c.end - c.start
        return torch.tensor(ids, dtype=torch.long, device=device), pos.to(device), slots, meta


class DecodeGraphs:
    """CUDA graphs of one decode step (model and logits) for padded batch sizes 1, 2, 4, ...

    Static input tensors are filled before each replay; padding rows write their K/V into the
    cache's scratch block and attend only to its first slot.
    """

    def __init__(self, runner: ModelRunner, max_batch: int):
        model, kv, device = runner.model, runner.kv, runner.device
        self.model, self.kv, self.max_batch = model, kv, max_batch
        bs = kv.block_size
        self.width = -(-runner.config.max_model_len // bs) + 1
        self.ids = torch.zeros(max_batch, dtype=torch.long, device=device)
        self.positions = torch.zeros(max_batch, dtype=torch.long, device=device)
        self.slots = torch.full((max_batch,), kv.scratch_slot, dtype=torch.long, device=device)
        self.tables = torch.full((max_batch, self.width), kv.num_blocks, dtype=torch.long, device=device)
        self.mask = torch.zeros(max_batch, 1, 1, self.width * bs, dtype=torch.bool, device=device)
        self.mask[..., 0] = True
        self.sizes = [b for b in GRAPH_BATCH_SIZES if b <= max_batch]
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        pool = None
        with torch.inference_mode():
            for b in reversed(self.sizes):
                meta = AttnMeta(self.slots[:b], [], b, self.tables[:b], self.mask[:b])
                stream = torch.cuda.Stream(device)
                stream.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(stream):  # warm up kernels and the allocator outside capture
                    self.model.logits(self.model(self.ids[:b], self.positions[:b], kv, meta))
                torch.cuda.current_stream(device).wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    self.outputs[b] = self.model.logits(self.model(self.ids[:b], self.positions[:b], kv, meta))
                pool = graph.pool()
                self.graphs[b] = graph

    def run(self, chunks: list[ScheduledChunk]) -> torch.Tensor:
        n = len(chunks)
        b = next(size for size in self.sizes if size >= n)
        bs = self.kv.block_size
        ids = torch.tensor([c.seq.token_ids[c.start] for c in chunks], dtype=torch.long)
        pos = torch.tensor([c.start for c in chunks], dtype=torch.long)
        tables = torch.full((b, self.width), self.kv.num_blocks, dtype=torch.long)
        for r, c in enumerate(chunks):
            tables[r, : len(c.seq.block_table)] = torch.tensor(c.seq.block_table, dtype=torch.long)
        slots = torch.full((b,), self.kv.scratch_slot, dtype=torch.long)
        slots[:n] = tables[torch.arange(n), pos // bs] * bs + pos % bs
        lengths = torch.ones(b, dtype=torch.long)
        lengths[:n] = pos + 1
        self.ids[:n].copy_(ids, non_blocking=True)
        self.ids[n:b].zero_()
        self.positions[:n].copy_(pos, non_blocking=True)
        self.positions[n:b].zero_()
        self.slots[:b].copy_(slots, non_blocking=True)
        self.tables[:b].copy_(tables, non_blocking=True)
        self.mask[:b].copy_((torch.arange(self.width * bs) < lengths[:, None]).view(b, 1, 1, -1), non_blocking=True)
        self.graphs[b].replay()
        return self.outputs[b][:n]
