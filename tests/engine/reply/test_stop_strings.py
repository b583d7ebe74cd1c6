from engine.reply.stop_strings import StopStringFilter


def feed_all(filt: StopStringFilter, pieces: list[str]) -> str:
    return "".join(filt.feed(p) for p in pieces) + filt.flush()


def test_text_without_stops_passes_through():
    assert feed_all(StopStringFilter([]), ["Hello", ", world"]) == "Hello, world"


def test_stop_string_split_across_pieces_is_cut():
    filt = StopStringFilter(["</end>"])
    assert feed_all(filt, ["Paris is the capital.</", "en", "d> more"]) == "Paris is the capital."
    assert filt.stopped


def test_partial_match_that_does_not_complete_is_released():
    filt = StopStringFilter(["STOP"])
    out = [filt.feed("a ST"), filt.feed("ART b")]
    assert out[0] == "a "  # "ST" is held: it may begin STOP
    assert out[1] == "START b"
    assert not filt.stopped


def test_earliest_of_several_stops_wins():
    filt = StopStringFilter(["BB", "A"])
    assert feed_all(filt, ["xxAyyBB"]) == "xx"


def test_the_stop_string_that_ended_the_text_is_named():
    filt = StopStringFilter(["BB", "A"])
    assert filt.matched is None
    feed_all(filt, ["xxBByyA"])
    assert filt.matched == "BB"
    unstopped = StopStringFilter(["Z"])
    feed_all(unstopped, ["abc"])
    assert unstopped.matched is None
