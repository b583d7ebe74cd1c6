from app.gui.reply_runner import format_stats


def test_stats_line_says_how_much_came_from_cache_and_the_time_saved():
    line = format_stats(
        {"ttft_s": 0.05, "prompt_tokens": 2030, "cached_tokens": 2000, "gen_tokens": 9, "prefill_tok_s": 400.0,
         "decode_tok_s": 61.3}
    )
    assert "2,000 of 2,030 prompt tokens from cache (~5.0 s saved)" in line
    assert line.startswith("TTFT 0.05 s") and "decode 61.3 tok/s" in line


def test_nothing_cached_says_nothing_saved():
    line = format_stats({"ttft_s": 0.3, "prompt_tokens": 40, "cached_tokens": 0, "prefill_tok_s": 150.0})
    assert "0 of 40 prompt tokens from cache ·" in line and "saved" not in line
    assert format_stats(None) == ""
