"""Speculative decoding: cheap drafts of the next k tokens, verified by the target in one pass.

A drafter proposes up to `chunk.lookahead` tokens after each decoding sequence: prompt lookup
(the tokens that followed the latest earlier occurrence of the sequence's last n-gram, which
pays off when the reply copies from the prompt) or a draft model (a smaller model with the
same tokenizer, keeping its own KV cache under the same block tables). The target evaluates
the last token and the drafts together; drafts are accepted by rejection sampling, which keeps
the target's distribution exactly; with greedy decoding a draft is accepted only when it is
the target's argmax, so the output is the plain greedy output, token for token.
"""

from __future__ import annotations

from typing import Protocol

import torch

from engine.torch.arch import CausalLM
from engine.torch.attention import KVCache
from engine.torch.model_runner import ModelRunner, WorkItem
from engine.torch.sampler import filtered_probs, step_generator
from engine.torch.scheduler import ScheduledBatch, ScheduledChunk


class Drafter(Protocol):
    def propose(self, chunks: list[ScheduledChunk]) -> list[tuple[list[int], torch.Tensor | None]]:
        """Per decode chunk: its draft tokens (at most chunk.lookahead) and their draft distributions
        [len, vocab], or None for a deterministic drafter."""
        ...

    def observe(self, batch: ScheduledBatch, accepted: dict[int, int]) -> None:
        """The target ran `batch`; accepted[i] is how many drafts of chunk i it kept."""
        ...


class PromptLookupDrafter:
    """Drafts by n-gram match: find the latest earlier occurrence of the last n tokens, copy what followed."""

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def propose(self, chunks: list[ScheduledChunk]) -> list[tuple[list[int], torch.Tensor | None]]:
        return [(lookup(c.seq.token_ids, c.lookahead, self.max_ngram, self.min_ngram), None) for c in chunks]

    def observe(self, batch: ScheduledBatch, accepted: dict[int, int]) -> None:
        pass


def lookup(tokens: list[int], k: int, max_ngram: int = 3, min_ngram: int = 1) -> list[int]:
    """Up to k tokens that followed the latest earlier occurrence of the longest matching tail n-gram."""
    if k <= 0:
        return []
    n_tokens = len(tokens)
    for n in range(min(max_ngram, n_tokens - 1), min_ngram - 1, -1):
        tail = tokens[n_tokens - n :]
        for start in range(n_tokens - n - 1, -1, -1):
            if tokens[start : start + n] == tail:
                follow = tokens[start + n : start + n + k]
                if follow:
                    return follow
    return []


class DraftModelDrafter:
    """A smaller model of the same family and tokenizer, its KV cache laid out by the target's block tables."""

    def __init__(self, model: CausalLM, runner_config, num_blocks: int, block_size: int):
        c = model.config
        kv = KVCache(c.num_layers, num_blocks, block_size, c.num_kv_heads, c.head_dim, model.dtype, model.device)
        self.runner = ModelRunner(model, kv, runner_config, cuda_graphs=False)
        # seq_id -> first position whose draft K/V are missing (the last draft, when all were accepted).
        self._behind: dict[int, int] = {}

    @torch.inference_mode()
    def propose(self, chunks: list[ScheduledChunk]) -> list[tuple[list[int], torch.Tensor | None]]:
        drafts: list[list[int]] = [[] for _ in chunks]
        probs: list[list[torch.Tensor]] = [[] for _ in chunks]
        live = [i for i, c in enumerate(chunks) if c.lookahead > 0]
        # First step: the newest token (and a draft the draft model has not seen yet, if any).
        items = []
        for i in live:
            c = chunks[i]
            start = min(self._behind.pop(c.seq.seq_id, c.start), c.start)
            items.append(WorkItem(c.seq.token_ids[start : c.end], start, c.seq.block_table))
        while live:
            logits, picked = self.runner.forward_items(items, [[len(it.tokens) - 1] for it in items])
            next_live, next_items = [], []
            for i, rows in zip(live, picked, strict=True):
                c = chunks[i]
                opts = c.seq.sampling
                row = logits[rows[0]]
                if opts.temperature <= 0.0:
                    token = int(row.argmax())
                    p = None
                else:
                    p = filtered_probs(row, opts.temperature, opts.top_k, opts.top_p)
                    gen = step_generator(opts.seed if opts.seed is not None else 0, c.end + len(drafts[i]), row.device)
                    token = int(torch.multinomial(p, 1, generator=gen))
                drafts[i].append(token)
                if p is not None:
                    probs[i].append(p)
                if len(drafts[i]) < c.lookahead:
                    next_live.append(i)
                    next_items.append(WorkItem([token], c.end + len(drafts[i]) - 1, c.seq.block_table))
            live, items = next_live, next_items
        return [(d, torch.stack(p) if p else None) for d, p in zip(drafts, probs, strict=True)]

    @torch.inference_mode()
    def observe(self, batch: ScheduledBatch, accepted: dict[int, int]) -> None:
        # Prefill chunks: the draft model computes the same positions into its own cache.
        prefills = [c for c in batch.chunks if c.lookahead == 0 and c.end - c.start > 1]
        if prefills:
            items = [WorkItem(c.seq.token_ids[c.start : c.end], c.start, c.seq.block_table) for c in prefills]
            self.runner.forward_items(items, [[] for _ in items])
        for i, c in enumerate(batch.chunks):
            n = accepted.get(i)
            if n is None and c.end - c.start == 1:  # a decode without drafts: the draft model skipped it
                self._behind[c.seq.seq_id] = min(self._behind.get(c.seq.seq_id, c.start), c.start)
            elif n is not None and n == c.lookahead > 0:  # the last draft was accepted, never fed to it
                self._behind[c.seq.seq_id] = c.end + n - 1
        if len(self._behind) > 4096:
            self._behind.clear()


class SpeculativeRunner:
    """The Runner of LLMEngine with speculative decode steps (EngineConfig.num_speculative_tokens > 0)."""

    def __init__(self, target: ModelRunner, drafter: Drafter):
        self.target, self.drafter = target, drafter
        self.proposed = 0
        self.accepted = 0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0

    @torch.inference_mode()
    def run(self, batch: ScheduledBatch) -> list[int | list[int] | None]:
        chunks = batch.chunks
        spec = [i for i, c in enumerate(chunks) if c.lookahead > 0]
        proposals = dict(zip(spec, self.drafter.propose([chunks[i] for i in spec]), strict=True))
        items, wanted = [], []
        for i, c in enumerate(chunks):
            drafts = proposals[i][0] if i in proposals else []
            items.append(WorkItem(c.seq.token_ids[c.start : c.end] + drafts, c.start, c.seq.block_table))
            if c.end == c.seq.num_tokens:
                wanted.append(list(range(len(items[-1].tokens) - 1 - len(drafts), len(items[-1].tokens))))
            else:
                wanted.append([])
        self.target.max_step_tokens = max(self.target.max_step_tokens, sum(len(it.tokens) for it in items))
        logits, picked = self.target.forward_items(items, wanted)
        results: list[int | list[int] | None] = []
        accepted: dict[int, int] = {}
        for i, c in enumerate(chunks):
            if not picked[i]:
                results.append(None)
                continue
            rows = logits[picked[i]]
            if i not in proposals:
                results.append(self.target.sampler.sample(rows, [c.seq.sampling], [c.end])[0])
                continue
            drafts, draft_probs = proposals[i]
            tokens = self._verify(c, rows, drafts, draft_probs)
            accepted[i] = len(tokens) - 1
            self.proposed += len(drafts)
            self.accepted += len(tokens) - 1
            c.seq.num_drafts_proposed += len(drafts)
            c.seq.num_drafts_accepted += len(tokens) - 1
            results.append(tokens)
        self.drafter.observe(batch, accepted)
        return results

    def _verify(
        self, chunk: ScheduledChunk, rows: torch.Tensor, drafts: list[int], draft_probs: torch.Tensor | None
    ) -> list[int]:
        """Accepted drafts plus one token from the target (the correction, or the bonus after all)."""
        opts = chunk.seq.sampling
        out: list[int] = []
        if opts.temperature <= 0.0:
            best = rows.argmax(dim=-1).tolist()
            for j, d in enumerate(drafts):
                if best[j] != d:
                    break
                out.append(d)
            return [*out, best[len(out)]]
        for j, d in enumerate(drafts):
            position = chunk.end + j
            gen = self.target.sampler.generator(opts, position)
            p = filtered_probs(rows[j], opts.temperature, opts.top_k, opts.top_p)
            q = None if draft_probs is None else draft_probs[j, : p.shape[0]]
            if q is not None and q.shape[0] < p.shape[0]:  # a draft with fewer (padding) output rows
                q = torch.nn.functional.pad(q, (0, p.shape[0] - q.shape[0]))
            q_d = 1.0 if q is None else float(q[d])
            accept = min(1.0, float(p[d]) / q_d) if q_d > 0 else 0.0
            if float(torch.rand((), generator=gen, device=p.device)) < accept:
                out.append(d)
                continue
            # Rejected: sample from the residual max(0, p - q), normalized.
            residual = p.clone()
            if q is None:
                residual[d] = 0.0
            else:
                residual = torch.clamp(residual - q, min=0.0)
            if float(residual.sum()) <= 0:
                residual = p
            out.append(int(torch.multinomial(residual / residual.sum(), 1, generator=gen)))
            return out
        last = len(drafts)
        out.append(self.target.sampler.sample(rows[last : last + 1], [opts], [chunk.end + last])[0])
        return out
