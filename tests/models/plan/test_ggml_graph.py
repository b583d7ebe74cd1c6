"""The replay of ggml's graph allocator on small graphs whose buffer can be worked out by hand (the encoder
graphs are checked against llama.cpp's own buffers in tests/engine/gguf/test_projector_forecast.py)."""

from __future__ import annotations

from models.plan.ggml_graph import Graph, reserved_bytes

ROW = 256 * 4  # one [256] f32 row: 1 KiB


def test_an_op_that_may_work_in_place_takes_its_input_s_memory_when_nothing_else_reads_it():
    g = Graph()
    x = g.input((256,))
    g.expand(g.like("unary", g.like("unary", x)))
    assert reserved_bytes(g) == ROW


def test_a_tensor_read_again_later_is_not_overwritten():
    g = Graph()
    x = g.input((256,))
    g.expand(g.like("add", g.like("unary", x), x))  # gelu(x) + x: the gelu needs a block of its own
    assert reserved_bytes(g) == 2 * ROW


def test_views_cost_nothing_and_a_freed_block_is_reused():
    g = Graph()
    x = g.input((256,))
    wide = g.mul_mat(Graph.weight((256, 1024)), x)  # 4 KiB, after the input
    narrow = g.mul_mat(Graph.weight((1024, 256)), g.reshape(wide, (1024, 1)))  # the input is free: it goes there
    g.expand(g.mul_mat(Graph.weight((256, 256)), narrow))  # the wide block is free again: it goes there
    assert reserved_bytes(g) == ROW + 4 * ROW


def test_sizes_are_padded_to_the_alignment():
    g = Graph()
    g.expand(g.like("norm", g.input((3,))))  # two 12-byte tensors
    assert reserved_bytes(g, alignment=32) == 64
