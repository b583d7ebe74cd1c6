"""Several replies on one loaded GGUF model: one llama.cpp batch per step, as llama-server's slots do.

Each running reply has a slot (a live sequence of the KV cache, kv_sequences.py). A step decodes
one batch: either every generating reply's next token together (with its speculative drafts when
it runs alone), or the next chunk of the oldest prompt not yet in the cache; while both wait they
take turns, so a new request starts while the others stream. After the batch each generating reply
samples from its own rows. A cancelled reply leaves at the next step, its prompt half prefilled or
not; a reply the KV cache has no room for ends with context_overflow while the others go on.

Why a prompt's chunk never shares a batch with other replies' tokens: llama.cpp's CPU attention
takes another kernel from 64 queries in a batch on (tiled, and it rounds otherwise: the starter
model's logits moved by 0.72 measured), so a prompt batched with others, or tokens batched with a
prompt, would not give what they give alone. Decoded as here (each prompt in the chunks it has
alone, the generating tokens together: one query each), every reply's logits are bit for bit those
of the same reply alone, wherever its cells lie in the cache (tests/engine/gguf/test_parallel_replies.py).
"""

from __future__ import annotations

import codecs
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.backend import BackendError
from engine.gguf.kv_sequences import KvCacheFull
from engine.gguf.llama_batch import BatchRow
from engine.gguf.llama_handle import LlamaHandle
from engine.gguf.llama_mtmd import NoFreeCells, ProjectorError
from engine.gguf.llama_sampler import Sampler
from engine.gguf.media_prompt import MediaPrompt, MediaSpan
from engine.gguf.prefix_cache import common_prefix_len
from engine.gguf.prefix_reuse import MIN_RESTORE_GAIN, PrefixReuse
from engine.gguf.sampling import make_sampler
from engine.gguf.speculation import DraftPolicy
from engine.protocol import Done, FinishReason, GenerateRequest
from engine.reply.stream import ReplyStream

# (the conversation so far, how many at most for a match of so many tokens) -> drafts. A drafter that
# follows an earlier passage says how long the match is (prompt_lookup.py); a draft model says 0.
Drafter = Callable[[Sequence[int], Callable[[int], int]], list[int]]
Outcome = Done | BackendError


@dataclass(eq=False)
class RunningReply:
    """One reply in its slot: its prompt going into the cache, then its tokens."""

    request: GenerateRequest
    slot: int
    prompt: list[int]
    cached: int  # prompt tokens found in the cache
    reply: ReplyStream
    sampler: Sampler
    policy: DraftPolicy
    drafter: Drafter | None
    cancelled: Callable[[], bool]
    decoder: codecs.IncrementalDecoder = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))
    prefilled: int = 0  # prompt tokens in the cache (cached ones included)
    context: list[int] = field(default_factory=list)  # the prompt and the tokens accepted: what drafts follow
    next_tokens: list[int] = field(default_factory=list)  # what goes into the next batch once generating
    drafts: list[int] = field(default_factory=list)  # the drafts among them, in the cache until refuted
    step_start: float | None = None  # when the step being measured began (None: not measured)
    outcome: Outcome | None = None
    # The answer's grammar while the reply still reasons: its sampler takes it when the answer starts.
    grammar: str | None = None
    special: bool = False  # its format's markers are control tokens: their text is read too
    # A prompt with images or audio: which of its tokens are media, and the chunks that evaluate them.
    media: MediaPrompt | None = None

    @property
    def generating(self) -> bool:
        return self.prefilled >= len(self.prompt)

    def finish(self, finish: FinishReason) -> None:
        tail = self.decoder.decode(b"", final=True)
        self.outcome = self.reply.done(finish, self.cached, tail, self.policy.acceptance)
        self._release()

    def fail(self, error: BackendError) -> None:
        self.outcome = error
        self._release()

    def _release(self) -> None:
        self.sampler.close()
        if self.media is not None:
            self.media.close()


@dataclass(slots=True)
class _Part:
    """One reply's rows in a batch."""

    reply: RunningReply
    first: int  # batch index of its first row
    tokens: list[int]
    samples: bool  # its logits are sampled after the batch (generating, or its prompt's last chunk)
    media: MediaSpan | None = None  # a media of the prompt: evaluated by the projector, alone in its batch


class ReplyBatch:
    """The replies running on one model, stepped together.

    Args:
        llama: the loaded model and context.
        prefixes: its prefix tiers; `prefixes.seqs.slots` replies run at once.
    """

    def __init__(self, llama: LlamaHandle, prefixes: PrefixReuse):
        self._llama = llama
        self._prefixes = prefixes
        self._seqs = prefixes.seqs
        self.running: list[RunningReply] = []  # in the order they came
        self._decoded_last = False  # the last batch was of generating replies (a prompt's chunk is next)

    @property
    def free_slots(self) -> int:
        return self._seqs.slots - len(self.running)

    def free_slot_for(self, prompt: Sequence[int]) -> int:
        """The free slot to run `prompt` in: the one whose cells share most of it (the same chat's next
        turn), else the lowest (a shared BOS or template opening is no match). With one chat at a time
        that is always sequence 0, as before there were slots."""
        taken = {r.slot for r in self.running}
        free = [s for s in range(self._seqs.slots) if s not in taken]
        if not free:
            raise BackendError("busy", f"All {self._seqs.slots} reply slots are in use.")

        def fit(s: int) -> tuple[int, int]:
            shared = common_prefix_len(self._seqs.tokens_of(s), prompt)
            return (shared if shared >= MIN_RESTORE_GAIN else 0, -s)

        return max(free, key=fit)

    def add(self, reply: RunningReply) -> None:
        """Run a reply whose slot holds its cached prefix already; idle slots' cells go (set_aside_idle)."""
        reply.prefilled = reply.cached
        reply.context = list(reply.prompt)
        self.running.append(reply)
        self.set_aside_idle(keep=reply.slot)

    def set_aside_idle(self, keep: int) -> None:
        """Free the cells of every idle slot but `keep` (saved to the prefix cache, whence a next turn
        restores them by a copy): each cell in use slows every running sequence's attention, as a
        unified cache attends up to its highest cell in use."""
        taken = {r.slot for r in self.running}
        for slot in range(self._seqs.slots):
            if slot != keep and slot not in taken and self._seqs.length(slot):
                self._prefixes.set_aside(slot)

    # ------------------------------------------------------------ one step

    def step(self) -> list[RunningReply]:
        """Run one batch; the replies that ended (their `outcome` set), taken out of the batch."""
        for reply in self.running:
            if reply.outcome is None and reply.cancelled():
                self._cancel(reply)
        while parts := self._plan():
            try:
                self._decode(parts)
            except KvCacheFull:
                self._fail_newest()
                continue  # the batch again, without it
            except ProjectorError as exc:  # this reply's media alone: the others go on
                parts[0].reply.fail(BackendError("bad_request", f"The model could not take a media: {exc}."))
                self._seqs.clear_live(parts[0].reply.slot)
                break
            for part in parts:
                self._seqs.appended(part.reply.slot, part.tokens)
                if not part.reply.generating:
                    part.reply.prefilled += len(part.tokens)
            alone = len(parts) == 1 and len(self.running) == 1  # a step of this reply alone: its cost is measured
            for part in parts:
                if part.samples:
                    self._after_decode(part, alone)
            break
        ended = [r for r in self.running if r.outcome is not None]
        self.running = [r for r in self.running if r.outcome is None]
        return ended

    def abort(self, error: BackendError) -> list[RunningReply]:
        """End every running reply with `error` (llama.cpp failed a batch: the cache is no longer known)."""
        ended, self.running = self.running, []
        for reply in ended:
            if reply.outcome is None:
                reply.fail(error)
        self._seqs.clear()
        return ended

    def _cancel(self, reply: RunningReply) -> None:
        """End a reply before its next batch: the drafts it had in the cache go."""
        self._seqs.trim_live(self._seqs.length(reply.slot) - len(reply.drafts), reply.slot)
        reply.drafts = []
        reply.finish("cancelled")

    def _plan(self) -> list[_Part]:
        """The next batch: every generating reply's tokens, or the next chunk of the oldest prompt not yet
        in the cache, in turns while both wait (each prompt goes in by the chunks it would have alone)."""
        live = [r for r in self.running if r.outcome is None]
        generating = [r for r in live if r.generating]
        waiting = [r for r in live if not r.generating]
        if waiting and (not generating or self._decoded_last):
            self._decoded_last = False
            reply = waiting[0]
            start, end = reply.prefilled, reply.prefilled + self._llama.n_batch
            if reply.media is not None:
                if (span := reply.media.span_at(start)) is not None:
                    # A prompt never ends in a media (the template's turn markers follow): nothing to sample.
                    return [_Part(reply, 0, reply.prompt[span.start : span.end], False, span)]
                end = min(end, reply.media.next_media(start))
            chunk = reply.prompt[start:end]
            return [_Part(reply, 0, chunk, start + len(chunk) == len(reply.prompt))]
        self._decoded_last = True
        parts, first = [], 0
        for reply in generating:
            parts.append(_Part(reply, first, list(reply.next_tokens), True))
            first += len(reply.next_tokens)
        return parts

    def _decode(self, parts: list[_Part]) -> None:
        """One llama_decode of every part; parked sequences are evicted while llama.cpp finds no room."""
        if parts[0].media is not None:
            self._evaluate_media(parts[0])
            return
        rows = []
        for part in parts:
            slot, start = part.reply.slot, self._seqs.length(part.reply.slot)
            every = bool(part.reply.drafts)  # drafts being verified: each row's logits
            for i, token in enumerate(part.tokens):
                last = i == len(part.tokens) - 1
                rows.append(BatchRow(token, start + i, slot, part.samples and (every or last)))
        for part in parts:  # anything past a sequence's books (a cancelled step's drafts) goes first
            self._llama.seq_rm(part.reply.slot, self._seqs.length(part.reply.slot), -1)
        while True:
            code = self._llama.decode_rows(rows)
            if code == 0:
                return
            if code != 1:  # 1: no KV slot for the batch; anything else is an error
                raise RuntimeError(f"llama_decode returned {code}")
            self._prefixes.on_full()  # evicts a parked sequence, or raises KvCacheFull

    def _evaluate_media(self, part: _Part) -> None:
        """A media of a prompt, through the projector into the reply's slot (its part is alone in the step)."""
        reply = part.reply
        assert reply.media is not None and part.media is not None
        self._llama.seq_rm(reply.slot, self._seqs.length(reply.slot), -1)
        while True:
            try:
                reply.media.evaluate(part.media, reply.slot)
                return
            except NoFreeCells:
                self._prefixes.on_full()  # evicts a parked sequence, or raises KvCacheFull

    def _fail_newest(self) -> None:
        """No room for the batch with every parked sequence gone: the reply that came last ends, its
        cells freed for the others; alone, the reply ends as the context's overflow."""
        victim = next(r for r in reversed(self.running) if r.outcome is None)
        others = sum(1 for r in self.running if r.outcome is None) - 1
        beside = f" with {others} other repl{'y' if others == 1 else 'ies'} running" if others else ""
        victim.fail(BackendError(
            "context_overflow", f"The KV cache is full{beside}. Start a new chat or raise the context length."))
        self._seqs.clear_live(victim.slot)

    def _after_decode(self, part: _Part, alone: bool) -> None:
        """Sample the reply's next token from its rows; with drafts, keep those the sampler picks itself
        (speculative decoding) and drop the rest from the cache."""
        r, llama, seqs = part.reply, self._llama, self._seqs
        drafts, row = r.drafts, 0
        last_row = part.first + len(part.tokens) - 1
        while True:
            token = r.sampler.sample(llama, part.first + row if drafts else last_row)
            r.reply.token()
            hit = row < len(drafts) and token == drafts[row]
            finish = _finish_after(llama, token, r)
            # Where plain decoding would be: the accepted tokens, this one not yet counted.
            n_kept = seqs.length(r.slot) - len(drafts) + row
            if finish is None and (r.reply.n_gen >= r.request.sampling.max_tokens or n_kept + 1 >= llama.n_ctx):
                finish = "length"
            if hit:
                row += 1  # its cell holds it already; the next row's logits are computed
                if finish is None:
                    continue
            seqs.trim_live(n_kept, r.slot)  # drop the drafts it refuted
            r.drafts = []
            # A reply whose answer has a required shape may not end while it thinks: its end of
            # generation becomes the close of the think block, and the answer follows the grammar.
            if (finish == "stop" and r.grammar is not None and llama.is_end_of_generation(token)
                    and (forced := self._close_reasoning(r, force=True))):
                self._constrain(r)
                r.context += forced
                r.next_tokens, r.step_start = forced, None
                return
            if finish is not None:
                # Its drafts up to the token it ended on (those past it were never compared).
                r.policy.last(row + (row < len(drafts) and not hit), row)
                r.finish(finish)
                return
            now = time.perf_counter()
            if r.step_start is not None and alone:
                r.policy.record(len(drafts), row, now - r.step_start)
            r.step_start = now  # a step's cost: drafting and verifying
            forced = self._close_reasoning(r)
            if r.grammar is not None and r.reply.in_answer:
                self._constrain(r)
            r.context += [*drafts[:row], token, *forced]
            n_live = seqs.length(r.slot) + len(forced)
            room = min(r.request.sampling.max_tokens - r.reply.n_gen - 1, llama.n_ctx - n_live - 2)
            # Drafts only while the reply runs alone: beside others, one more token per step costs what
            # a draft would save (and the cost model measured steps of this reply alone).
            if r.drafter is not None and len(self.running) == 1 and not forced:
                r.drafts = r.drafter(r.context, functools.partial(r.policy.limit, room))
            else:
                r.step_start = None
            r.next_tokens = [token, *forced, *r.drafts]
            return

    def _close_reasoning(self, r: RunningReply, force: bool = False) -> list[int]:
        """The tokens that end the reply's reasoning when its budget is spent (or now, `force`): decoded
        with its next token as if the model had written them, their text read as the model's."""
        text = r.reply.close_reasoning(force)
        if not text:
            return []
        forced = self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        for token in forced:
            r.reply.add(r.decoder.decode(self._llama.detokenize([token], special=r.special)))
        return forced

    def _constrain(self, r: RunningReply) -> None:
        """The answer begins: from the next token on, the reply follows its grammar (checked at submit)."""
        grammar, r.grammar = r.grammar, None
        r.sampler.close()
        r.sampler = make_sampler(r.request.sampling, grammar, self._llama.vocab_pointer)
        r.drafter = None


def _finish_after(llama: LlamaHandle, token: int, r: RunningReply) -> FinishReason | None:
    """Why the reply ends at `token` (cancelled, end of generation, a stop string); None when it goes
    on, its text added to the reply."""
    if r.cancelled():
        return "cancelled"
    if llama.is_end_of_generation(token):
        return "stop"
    r.reply.add(r.decoder.decode(llama.detokenize([token], special=r.special)))
    return "stop" if r.reply.stopped else None
