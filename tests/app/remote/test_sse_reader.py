"""The event stream's line splitter and its cap, on byte chunks cut anywhere."""

from __future__ import annotations

import pytest

from app.remote.sse_reader import MalformedStream, read_events, split_lines

STREAM = b'data: {"a": 1}\r\n\r\n: ping\r\rdata: {"b":\ndata: 2}\n\ndata: [DONE]\n\n'


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(STREAM)])
def test_lines_and_events_do_not_depend_on_where_chunks_are_cut(size: int):
    chunks = [STREAM[i:i + size] for i in range(0, len(STREAM), size)]
    assert list(split_lines(chunks)) == [
        'data: {"a": 1}', "", ": ping", "", 'data: {"b":', "data: 2}", "", "data: [DONE]", "",
    ]
    assert list(read_events(chunks)) == [{"a": 1}, {"b": 2}]


def test_a_line_may_be_as_long_as_the_cap_and_no_longer():
    assert list(split_lines([b"x" * 10, b"\n"], max_line=10)) == ["x" * 10]
    assert list(split_lines([b"x" * 10 + b"\r", b"\n"], max_line=10)) == ["x" * 10]
    with pytest.raises(MalformedStream, match="longer than 10 bytes"):
        list(split_lines([b"x" * 6, b"x" * 5], max_line=10))  # refused before the line ends
    with pytest.raises(MalformedStream, match="longer than 10 bytes"):
        list(split_lines([b"x" * 11 + b"\n"], max_line=10))


def test_an_event_of_many_lines_has_the_same_cap():
    with pytest.raises(MalformedStream, match="longer than 10 bytes"):
        list(read_events([b"data: xxxxx\n" * 3], max_event_bytes=10))
