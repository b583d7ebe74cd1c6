"""IncrementalDecoder: a reply decoded token by token is the text of the whole reply, in linear time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.torch.hf_tokenizer import FLUSH_CONTEXT_TOKENS, HfTokenizer, IncrementalDecoder
from tests.fixtures.tiny_hf import CORPUS, SPECIALS, write_tokenizer

# Multi-byte characters of 2, 3 and 4 bytes: the tiny byte-level vocabulary splits them across tokens.
TEXT = "Hello, fox 🦊 and ünïcode! 日本語のテキスト, naïve café — ok 👍🏽. The quick brown fox jumps. "


def _byte_level(directory: Path) -> HfTokenizer:
    write_tokenizer(directory, chat_template=None)
    return HfTokenizer(directory)


def _metaspace(directory: Path) -> HfTokenizer:
    """A SentencePiece-style tokenizer (▁ for spaces, the first one dropped by the decoder)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    alphabet = sorted(set("".join(CORPUS) + TEXT))
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", *SPECIALS], initial_alphabet=alphabet)
    tok.train_from_iterator(CORPUS, trainer)
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text('{"eos_token": "<|im_end|>"}')
    return HfTokenizer(directory)


def _reply(tok: HfTokenizer, n: int) -> list[int]:
    """n token ids of repeated TEXT with a special token every 97 tokens (skipped in the text)."""
    ids = tok.encode(TEXT * (n // 20 + 1))
    special = tok.tokenizer.token_to_id("<|im_start|>")
    for at in range(97, len(ids), 97):
        ids.insert(at, special)
    assert len(ids) >= n
    return ids[:n]


def _piecewise(tok: HfTokenizer, ids: list[int]) -> list[str]:
    decoder = IncrementalDecoder(tok)
    return [decoder.feed(t) for t in ids] + [decoder.flush()]


@pytest.mark.parametrize("make", [_byte_level, _metaspace])
def test_a_4000_token_reply_decoded_piecewise_is_the_whole_decode(tmp_path: Path, make) -> None:
    tok = make(tmp_path)
    ids = _reply(tok, 4000)
    pieces = _piecewise(tok, ids)
    assert "".join(pieces) == tok.decode(ids)
    assert not any("\ufffd" in p for p in pieces)
    assert "<|im_start|>" not in "".join(pieces)


def test_characters_split_across_tokens_wait_for_their_last_byte(tmp_path: Path) -> None:
    tok = _byte_level(tmp_path)
    fox = tok.encode("🦊")
    assert len(fox) > 1  # the test means something only if the emoji spans tokens
    decoder = IncrementalDecoder(tok)
    assert decoder.feed(tok.encode("a")[0]) == "a"
    assert [decoder.feed(t) for t in fox] == [""] * (len(fox) - 1) + ["🦊"]


def test_a_reply_cut_inside_a_character_flushes_what_the_whole_decode_gives(tmp_path: Path) -> None:
    tok = _byte_level(tmp_path)
    ids = _reply(tok, 400)
    cut = tok.encode("ok 🦊")[:-1]  # the emoji's last byte never comes
    pieces = _piecewise(tok, ids + cut)
    assert "".join(pieces) == tok.decode(ids + cut)
    assert pieces[-1].endswith("\ufffd")


def test_decoding_is_linear_in_the_reply_length(tmp_path: Path) -> None:
    """4x the tokens takes about 4x the time (re-decoding the reply for every token took 16x), and what the
    decoder holds never grows with the reply."""
    tok = _byte_level(tmp_path)
    short, long = _reply(tok, 1000), _reply(tok, 4000)
    decoder = IncrementalDecoder(tok)
    held = 0
    for token in long:
        decoder.feed(token)
        held = max(held, len(decoder._context) + len(decoder._pending))
    assert held <= FLUSH_CONTEXT_TOKENS + 8

    def best_s(ids: list[int]) -> float:
        best = float("inf")
        for _ in range(5):  # the best of five, in this process's CPU time: other programs add no time to it
            t = time.process_time()
            _piecewise(tok, ids)
            best = min(best, time.process_time() - t)
        return best

    best_s(short)  # warm-up
    ratio = best_s(long) / best_s(short)
    assert ratio < 6, f"4,000 tokens took {ratio:.1f}x the time of 1,000"
