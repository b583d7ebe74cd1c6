from app.chat.stats_line import format_stats


def test_stats_line_says_how_much_came_from_cache_and_the_time_saved():
    line = format_stats(
        {"ttft_s": 0.05, "prompt_tokens": 2030, "cached_tokens": 2000, "gen_tokens": 9, "prefill_tok_s": 400.0,
         "decode_tok_s": 61.3}
    )
    assert "2,000 of 2,030 prompt tokens from cache (~5.0 s saved)" in line
    # The speeds come first: a narrow status bar cuts the end of the line.
    assert line.startswith("decode 61.3 tok/s · TTFT 0.05 s · prefill 400 tok/s")


def test_nothing_cached_says_nothing_saved():
    line = format_stats({"ttft_s": 0.3, "prompt_tokens": 40, "cached_tokens": 0, "prefill_tok_s": 150.0})
    assert line.endswith("0 of 40 prompt tokens from cache") and "saved" not in line
    assert format_stats(None) == ""


def test_a_speculative_reply_says_how_many_drafts_the_model_kept():
    line = format_stats({"ttft_s": 0.1, "prompt_tokens": 40, "cached_tokens": 0, "prefill_tok_s": 150.0,
                         "decode_tok_s": 90.0, "draft_acceptance": 0.634})
    assert line.startswith("decode 90.0 tok/s (63% of drafts kept) · TTFT")
    assert "drafts" not in format_stats({"decode_tok_s": 9.0, "draft_acceptance": None})
