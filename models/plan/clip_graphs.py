"""The graphs libmtmd's clip encoders build for one image, as shapes (models/plan/ggml_graph.py replays their
allocation).

Each builder follows its encoder's graph in llama.cpp (tools/mtmd/clip.cpp's build_vit, build_attn,
build_ffn, build_inp; models/siglip.cpp, models/qwen2vl.cpp, models/qwen3vl.cpp) op for op, in the same
order, because the order decides which tensors are alive together: the image, its patch embeddings, each
layer's normed input, Q, K and V, attention's output, the feed-forward's up (and gate) activations, and the
projection's output. The weights (shapes and types) come from the file's own tensors, so a file with or
without a bias, a gate or a pre-norm builds the graph llama.cpp builds for it.

Attention is flash attention, as libmtmd picks it when the backend has it (the CPU's and CUDA's do): K and V
are cast to f16 and no [patches × patches] score matrix is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from models.formats.tensor_info import TensorInfo
from models.plan.ggml_graph import Graph, Tensor

# Types whose feed-forward up and down matrices clip.cpp swaps when the file has them the other way round.
_FFN_SWAPPED = frozenset({"gemma3", "idefics3", "qwen2vl_merger", "qwen2.5vl_merger"})


@dataclass(slots=True, frozen=True)
class EncoderShape:
    """What a clip graph's shapes follow: the file's hyperparameters and its tensors by name."""

    projector_type: str
    n_embd: int
    n_heads: int
    n_layers: int
    patch_size: int
    merge: int
    tensors: dict[str, TensorInfo]
    window_pattern: int = 0  # qwen2.5-vl: every this-many-th layer attends fully, the others in windows
    projection_dim: int = 0  # clip.vision.projection_dim: qwen2.5-vl reorders its output rows at this width

    def has(self, name: str) -> bool:
        return name in self.tensors

    def weight(self, name: str) -> Tensor:
        t = self.tensors[name]
        return Graph.weight(t.shape, t.type_name)

    def optional(self, name: str) -> Tensor | None:
        return self.weight(name) if name in self.tensors else None


Builder = Callable[[EncoderShape, int], Graph]


def _norm(g: Graph, x: Tensor, s: EncoderShape, prefix: str, rms: bool = False) -> Tensor:
    """build_norm: (rms_)norm, then the weight and the bias where the file has them."""
    x = g.like("rms_norm" if rms else "norm", x)
    for part, op in (("weight", "mul"), ("bias", "add")):
        if (w := s.optional(f"{prefix}.{part}")) is not None:
            x = g.like(op, x, w)
    return x


def _linear(g: Graph, x: Tensor, s: EncoderShape, prefix: str) -> Tensor:
    x = g.mul_mat(s.weight(f"{prefix}.weight"), x)
    if (b := s.optional(f"{prefix}.bias")) is not None:
        x = g.like("add", x, b)
    return x


def _ffn(g: Graph, x: Tensor, s: EncoderShape, up: str, down: str, gate: str | None = None) -> Tensor:
    """build_ffn: up (and gate), the activation (in place, or a glu op making a new tensor), down."""
    tmp = _linear(g, x, s, up)
    if gate is not None and s.has(f"{gate}.weight"):
        x = g.like("glu", _linear(g, x, s, gate), tmp)
    else:
        x = g.like("unary", tmp)
    return _linear(g, x, s, down)


def _attention(g: Graph, s: EncoderShape, q: Tensor, k: Tensor, v: Tensor, layer: str,
               mask: Tensor | None = None) -> Tensor:
    """build_attn with flash attention: Q, K, V ordered first (ggml_build_forward_order), K and V cast to f16,
    the output projected by the layer's attn_out."""
    for t in (q, k, v):
        g.expand(t)
    q = g.permute(q, (0, 2, 1, 3))
    k = g.cast(g.permute(k, (0, 2, 1, 3)), "F16")
    v = g.cast(g.permute(v, (0, 2, 1, 3)), "F16")
    out = g.flash_attn(q, k, v, mask)
    out = g.reshape(out, (out.ne[0] * out.ne[1], out.ne[2] * out.ne[3]))
    return _linear(g, out, s, f"{layer}.attn_out")


def _ffn_names(s: EncoderShape, layer: str) -> tuple[str, str]:
    up, down = f"{layer}.ffn_up", f"{layer}.ffn_down"
    swapped = s.has(f"{down}.weight") and s.tensors[f"{down}.weight"].shape[0] == s.n_embd
    return (down, up) if swapped and s.projector_type in _FFN_SWAPPED else (up, down)


def _vit(g: Graph, s: EncoderShape, x: Tensor, n_pos: int) -> Tensor:
    """build_vit: a learned position embedding where the file has one, an optional pre-norm, then pre-norm
    transformer blocks (separate or fused Q, K, V) and an optional post-norm."""
    if (pos := s.optional("v.position_embd.weight")) is not None:
        x = g.like("add", x, pos)
    x = g.reshape(x, (s.n_embd, n_pos))
    if s.has("v.pre_ln.weight"):
        x = _norm(g, x, s, "v.pre_ln")
    d_head = s.n_embd // s.n_heads
    for il in range(s.n_layers):
        layer = f"v.blk.{il}"
        cur = _norm(g, x, s, f"{layer}.ln1")
        if s.has(f"{layer}.attn_qkv.weight"):  # fused: Q, K and V are views of one product
            qkv = _linear(g, cur, s, f"{layer}.attn_qkv")
            q, k, v = (g.view(qkv, (d_head, s.n_heads, n_pos, 1), (4 * d_head, qkv.nb[1], qkv.nb[1] * n_pos))
                       for _ in range(3))
        else:
            q, k, v = (g.reshape(_linear(g, cur, s, f"{layer}.attn_{n}"), (d_head, s.n_heads, n_pos, 1))
                       for n in "qkv")
        cur = _attention(g, s, q, k, v, layer)
        x = g.like("add", cur, x)
        cur = _norm(g, x, s, f"{layer}.ln2")
        cur = _ffn(g, cur, s, *_ffn_names(s, layer))
        x = g.like("add", x, cur)
    if s.has("v.post_ln.weight"):
        x = _norm(g, x, s, "v.post_ln")
    return g.reshape(x, (s.n_embd, n_pos, 1))


def _patch_merge(g: Graph, x: Tensor, side: int, merge: int) -> Tensor:
    """build_patch_merge_permute (idefics3's pixel shuffle): merge × merge patches side by side in one row."""
    d = x.ne[0]
    x = g.reshape(x, (d, side, side))
    x = g.permute(g.reshape(x, (d * merge, side // merge, side)), (0, 2, 1, 3))
    x = g.cont(x, (d * merge * merge, side // merge, side // merge))
    x = g.permute(x, (0, 2, 1, 3))
    return g.cont(x, (x.ne[0], x.ne[1] * x.ne[2]))


def siglip(s: EncoderShape, image_size: int) -> Graph:
    """models/siglip.cpp for gemma3 (average-pooled, RMS-normed, projected) and idefics3 (pixel-shuffled,
    projected)."""
    g = Graph()
    side = image_size // s.patch_size
    n_pos = side * side
    image = g.input((image_size, image_size, 3, 1))
    # build_inp: the patch embedding convolution, as [n_embd, patches]
    x = g.conv_2d(s.weight("v.patch_embd.weight"), image, s.patch_size)
    x = g.cont(g.transpose(g.reshape(x, (n_pos, s.n_embd, 1))))
    if (b := s.optional("v.patch_embd.bias")) is not None:
        x = g.like("add", x, b)
    x = _vit(g, s, x, n_pos)
    if s.projector_type == "gemma3":
        x = g.cont(g.transpose(x), (side, side, s.n_embd, 1))
        x = g.pool_2d(x, s.merge)
        x = g.reshape(x, (x.ne[0] * x.ne[0], s.n_embd, 1))
        x = g.cont(g.transpose(x))
        x = g.like("rms_norm", x)
        x = g.like("mul", x, s.weight("mm.soft_emb_norm.weight"))
        # The projection is read transposed: a copy of it in the compute buffer, made before its input.
        x = g.mul_mat(g.cont(g.transpose(s.weight("mm.input_projection.weight"))), x)
    else:  # idefics3
        x = g.mul_mat(s.weight("mm.model.fc.weight"), _patch_merge(g, x, side, s.merge))
    g.expand(x)
    return g


def _temporal_patches(g: Graph, s: EncoderShape, image: Tensor, side: int) -> Tensor:
    """build_inp_with_temporal_merge for a still image (both frame convolutions read it), then the patches
    reordered so that each merge × merge group is adjacent (qwen2vl.cpp's "second conv dimension")."""
    x = g.like("add", g.conv_2d(s.weight("v.patch_embd.weight"), image, s.patch_size),
               g.conv_2d(s.weight("v.patch_embd.weight.1"), image, s.patch_size))
    return _merge_order(g, g.permute(x, (1, 2, 0, 3)), s.n_embd, side)


def _merge_order(g: Graph, x: Tensor, d: int, side: int) -> Tensor:
    x = g.cont(x, (d * 2, side // 2, side, 1))
    x = g.permute(g.reshape(x, (d * 2, side // 2, 2, side // 2)), (0, 2, 1, 3))
    return g.cont(x, (d, side * side, 1))


def qwen2vl(s: EncoderShape, image_size: int) -> Graph:
    """models/qwen2vl.cpp: Qwen2-VL (layer norms, GELU) and Qwen2.5-VL (RMS norms, a gated SiLU feed-forward,
    and window attention: a [patches × patches] mask, cast to f16, for all but every window_pattern-th
    layer), M-RoPE, then the merger's MLP over merge² patches."""
    g = Graph()
    side = image_size // s.patch_size
    n_pos = side * side
    rms = s.projector_type == "qwen2.5vl_merger"
    d_head = s.n_embd // s.n_heads
    x = _temporal_patches(g, s, g.input((image_size, image_size, 3, 1)), side)
    positions = g.input((n_pos * 4,), "I32")
    if s.has("v.pre_ln.weight"):
        x = _norm(g, x, s, "v.pre_ln", rms)
    mask = None
    if s.window_pattern:
        rows = g.input((n_pos // 4,), "I32")  # the merged tokens in window order
        mask = g.cast(g.input((n_pos, n_pos)), "F16")
        x = g.reshape(g.get_rows(g.reshape(x, (s.n_embd * 4, n_pos // 4)), rows), (s.n_embd, n_pos, 1))
    for il in range(s.n_layers):
        layer = f"v.blk.{il}"
        full = not s.window_pattern or (il + 1) % s.window_pattern == 0
        cur = _norm(g, x, s, f"{layer}.ln1", rms)
        q, k, v = (g.reshape(_linear(g, cur, s, f"{layer}.attn_{n}"), (d_head, s.n_heads, n_pos)) for n in "qkv")
        q, k = g.like("rope", q, positions), g.like("rope", k, positions)
        cur = _attention(g, s, q, k, v, layer, None if full else mask)
        x = g.like("add", cur, x)
        cur = _norm(g, x, s, f"{layer}.ln2", rms)
        up, down = _ffn_names(s, layer)
        cur = _ffn(g, cur, s, up, down, f"{layer}.ffn_gate")
        x = g.like("add", x, cur)
    if s.has("v.post_ln.weight"):
        x = _norm(g, x, s, "v.post_ln", rms)
    x = _ffn(g, g.reshape(x, (s.n_embd * 4, n_pos // 4, 1)), s, "mm.0", "mm.2")
    if s.window_pattern:
        rows = g.input((n_pos // 4,), "I32")  # the merged tokens back in row order
        x = g.get_rows(g.reshape(x, (s.projection_dim, n_pos // 4)), rows)
        x = g.reshape(x, (s.projection_dim, n_pos // 4, 1))
    g.expand(x)
    return g


def qwen3vl(s: EncoderShape, image_size: int) -> Graph:
    """models/qwen3vl.cpp: patches with a bias and a learned position embedding resized to the grid, fused QKV,
    M-RoPE, and the deepstack layers' own merger MLPs, whose outputs are concatenated to the main one's."""
    g = Graph()
    side = image_size // s.patch_size
    n_pos = side * side
    d, d_head, merge2 = s.n_embd, s.n_embd // s.n_heads, s.merge * s.merge
    x = _temporal_patches(g, s, g.input((image_size, image_size, 3, 1)), side)
    x = g.like("add", x, s.weight("v.patch_embd.bias"))
    pos = s.weight("v.position_embd.weight")
    per_side = int(round(pos.ne[1] ** 0.5))
    if per_side != side:  # resize_position_embeddings: interpolated to the patch grid
        pos = g.permute(g.reshape(pos, (d, per_side, per_side)), (2, 0, 1, 3))
        pos = g.cont(g.permute(g.interpolate(pos, (side, side, d, 1)), (1, 2, 0, 3)), (d, n_pos))
    x = g.like("add", x, _merge_order(g, pos, d, side))
    positions = g.input((n_pos * 4,), "I32")
    if s.has("v.pre_ln.weight"):
        x = _norm(g, x, s, "v.pre_ln")
    deepstack = None
    for il in range(s.n_layers):
        layer = f"v.blk.{il}"
        cur = _norm(g, x, s, f"{layer}.ln1")
        qkv = _linear(g, cur, s, f"{layer}.attn_qkv")
        q, k, v = (g.view(qkv, (d_head, s.n_heads, n_pos), (4 * d_head, qkv.nb[1])) for _ in range(3))
        q, k = g.like("rope", q, positions), g.like("rope", k, positions)
        cur = _attention(g, s, q, k, v, layer)
        x = g.like("add", cur, x)
        cur = _norm(g, x, s, f"{layer}.ln2")
        cur = _ffn(g, cur, s, f"{layer}.ffn_up", f"{layer}.ffn_down", f"{layer}.ffn_gate")
        x = g.like("add", x, cur)
        if s.has(f"v.deepstack.{il}.fc1.weight"):
            feat = _norm(g, g.reshape(x, (d * merge2, n_pos // merge2, 1)), s, f"v.deepstack.{il}.norm")
            feat = _ffn(g, feat, s, f"v.deepstack.{il}.fc1", f"v.deepstack.{il}.fc2")
            deepstack = feat if deepstack is None else g.concat(deepstack, feat, 0)
    if s.has("v.post_ln.weight"):
        x = _norm(g, x, s, "v.post_ln")
    x = _ffn(g, g.reshape(x, (d * 4, n_pos // 4, 1)), s, "mm.0", "mm.2")
    if deepstack is not None:
        x = g.concat(x, deepstack, 0)
    g.expand(x)
    return g


def generic_vit(s: EncoderShape, image_size: int) -> Graph:
    """For the types without a graph of their own here: the patch embedding, build_vit, and one projection to
    the text model's width (an estimate: their projectors and warmup sizes differ)."""
    g = Graph()
    side = image_size // s.patch_size
    n_pos = side * side
    x = g.conv_2d(s.weight("v.patch_embd.weight"), g.input((image_size, image_size, 3, 1)), s.patch_size)
    x = g.cont(g.transpose(g.reshape(x, (n_pos, s.n_embd, 1))))
    x = _vit(g, s, x, n_pos)
    x = g.mul_mat(Graph.weight((s.n_embd, s.projection_dim), "F16"), x)
    g.expand(x)
    return g
