"""A ggml compute graph described by its tensors' shapes, and the buffer ggml's graph allocator reserves for it.

llama.cpp sizes a compute buffer by handing a graph to ggml's graph allocator (ggml/src/ggml-alloc.c,
`ggml_gallocr_reserve_n`) before any data exists: it walks the nodes in graph order, places each new tensor
in one growing buffer and frees it after its last reader, and the buffer's size is the highest address it
ever reached. That figure depends on more than the sum of the tensors alive at one moment: which ops write
into their input's memory, where a freed block sits, and which block a new tensor lands in. So rather than
fit a constant to it, this module replays that walk on a graph of shapes only:

- `Graph` builds tensors as ggml's ops shape them (a matrix product of [k, m] and [k, n] is [m, n] f32, a
  view shares its source's memory) and orders them as `ggml_build_forward_expand` does: depth first from the
  result, a node after its sources, taken in source order.
- `reserved_bytes` replays the allocator: graph inputs first, then each node; an op that may work in place
  (ggml_op_can_inplace: add, mul, the unary activations, rms_norm, rope...) takes over the memory of the
  first of its sources that this graph made, has no other reader left and the same layout; a tensor (or
  the source of views) is freed when its last reader has run; a new tensor takes the smallest free block
  that holds it, or else the end of the buffer, which grows.

Weights live in their own buffer and cost nothing here. Sizes are padded to the buffer's alignment (32
bytes on the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from models.formats.ggml_types import GGML_TYPES

CPU_ALIGNMENT = 32  # ggml's TENSOR_ALIGNMENT, the CPU buffer type's alignment

_TYPES = {t.name: t for t in GGML_TYPES.values()}
# Ops that may write into a source's memory (ggml-alloc.c's ggml_op_can_inplace, the ones graphs here use).
_INPLACE_OPS = frozenset({"add", "mul", "scale", "unary", "rms_norm", "rope", "soft_max"})
# Ops whose result is a view of its source (ggml_impl_is_view).
_VIEW_OPS = frozenset({"view", "reshape", "permute", "transpose"})


@dataclass(eq=False, slots=True)
class Tensor:
    """A tensor of the graph: ggml's `ne` (elements per dimension, innermost first) and `nb` (bytes of a step
    in each dimension), its type, the op that makes it and the tensors it reads."""

    ne: tuple[int, int, int, int]
    nb: tuple[int, int, int, int]
    type_name: str
    op: str  # "none" for weights and inputs
    srcs: tuple[Tensor, ...] = ()
    view_src: Tensor | None = None  # the tensor whose memory a view shares (never itself a view)
    is_input: bool = False

    @property
    def is_view(self) -> bool:
        return self.op in _VIEW_OPS

    @property
    def nbytes(self) -> int:
        t = _TYPES[self.type_name]
        return self.ne[0] // t.block_size * t.type_size * prod(self.ne[1:])


def _strides(ne: tuple[int, ...], type_name: str) -> tuple[int, int, int, int]:
    t = _TYPES[type_name]
    nb = [t.type_size, t.type_size * (ne[0] // t.block_size)]
    for n in ne[1:3]:
        nb.append(nb[-1] * n)
    return (nb[0], nb[1], nb[2], nb[3])


def _four(ne: tuple[int, ...]) -> tuple[int, int, int, int]:
    full = (*ne, 1, 1, 1, 1)
    return (full[0], full[1], full[2], full[3])


@dataclass(slots=True)
class Graph:
    """The nodes (computed tensors) and leafs (weights, inputs) of a graph, in ggml's order."""

    nodes: list[Tensor] = field(default_factory=list)
    leafs: list[Tensor] = field(default_factory=list)
    _visited: set[int] = field(default_factory=set)

    # ------------------------------------------------------------ order

    def expand(self, t: Tensor) -> None:
        """Add `t` and whatever it needs that is not yet in the graph (ggml_build_forward_expand, and
        ggml_build_forward_order, which orders the same way)."""
        stack: list[tuple[Tensor, int]] = [(t, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                if id(node) in self._visited:
                    continue
                self._visited.add(id(node))
            if i < len(node.srcs):
                stack.append((node, i + 1))
                src = node.srcs[i]
                if src is not node and id(src) not in self._visited:
                    stack.append((src, 0))
                continue
            (self.leafs if node.op == "none" else self.nodes).append(node)

    # ------------------------------------------------------------ leafs

    @staticmethod
    def weight(ne: tuple[int, ...], type_name: str = "F32") -> Tensor:
        """A tensor of the model's own buffer: read, never allocated here."""
        ne4 = _four(ne)
        return Tensor(ne4, _strides(ne4, type_name), type_name, "none")

    @staticmethod
    def input(ne: tuple[int, ...], type_name: str = "F32") -> Tensor:
        """A graph input (ggml_set_input): allocated before any node, freed after its last reader."""
        ne4 = _four(ne)
        return Tensor(ne4, _strides(ne4, type_name), type_name, "none", is_input=True)

    # ------------------------------------------------------------ ops that make a new tensor

    @staticmethod
    def _new(op: str, ne: tuple[int, ...], type_name: str, *srcs: Tensor) -> Tensor:
        ne4 = _four(ne)
        return Tensor(ne4, _strides(ne4, type_name), type_name, op, tuple(srcs))

    def like(self, op: str, a: Tensor, *others: Tensor) -> Tensor:
        """An op whose result has `a`'s shape and type, contiguous (ggml_dup_tensor): add, mul, norm,
        rms_norm, the activations, rope, the glu ops."""
        return self._new(op, a.ne, a.type_name, a, *others)

    def mul_mat(self, a: Tensor, b: Tensor) -> Tensor:
        return self._new("mul_mat", (a.ne[1], b.ne[1], b.ne[2], b.ne[3]), "F32", a, b)

    def cont(self, a: Tensor, ne: tuple[int, ...] | None = None) -> Tensor:
        return self._new("cont", ne or a.ne, a.type_name, a)

    def cast(self, a: Tensor, type_name: str) -> Tensor:
        """ggml_cast: a copy into a new tensor of another type (which lists itself as its second source)."""
        t = self._new("cpy", a.ne, type_name, a)
        t.srcs = (a, t)
        return t

    def im2col(self, kernel: Tensor, image: Tensor, stride: int, type_name: str) -> Tensor:
        """The patches of a 2D convolution without padding or dilation, one row per output position."""
        ow = (image.ne[0] - kernel.ne[0]) // stride + 1
        oh = (image.ne[1] - kernel.ne[1]) // stride + 1
        return self._new("im2col", (kernel.ne[0] * kernel.ne[1] * kernel.ne[2], ow, oh, image.ne[3]), type_name,
                         kernel, image)

    def conv_2d(self, kernel: Tensor, image: Tensor, stride: int) -> Tensor:
        """ggml_conv_2d: im2col (F16 unless the kernel is BF16), a matrix product, then [OW, OH, OC, N]."""
        cols = self.im2col(kernel, image, stride, "F32" if kernel.type_name == "BF16" else "F16")
        out = self.mul_mat(self.reshape(cols, (cols.ne[0], cols.ne[1] * cols.ne[2] * cols.ne[3])),
                           self.reshape(kernel, (kernel.ne[0] * kernel.ne[1] * kernel.ne[2], kernel.ne[3])))
        out = self.reshape(out, (cols.ne[1], cols.ne[2], cols.ne[3], kernel.ne[3]))
        return self.cont(self.permute(out, (0, 1, 3, 2)))

    def flash_attn(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
        srcs = (q, k, v) if mask is None else (q, k, v, mask)
        return self._new("flash_attn_ext", (v.ne[0], q.ne[2], q.ne[1], q.ne[3]), "F32", *srcs)

    def pool_2d(self, a: Tensor, kernel: int) -> Tensor:
        """An average or max pool with stride = kernel and no padding."""
        ne = ((a.ne[0] - kernel) // kernel + 1, (a.ne[1] - kernel) // kernel + 1, a.ne[2], a.ne[3])
        return self._new("pool_2d", ne, "F32", a)

    def get_rows(self, a: Tensor, rows: Tensor) -> Tensor:
        return self._new("get_rows", (a.ne[0], rows.ne[0], rows.ne[1], rows.ne[2]), "F32", a, rows)

    def concat(self, a: Tensor, b: Tensor, dim: int) -> Tensor:
        ne = list(a.ne)
        ne[dim] += b.ne[dim]
        return self._new("concat", tuple(ne), a.type_name, a, b)

    def interpolate(self, a: Tensor, ne: tuple[int, ...]) -> Tensor:
        return self._new("upscale", ne, a.type_name, a)

    # ------------------------------------------------------------ views

    def reshape(self, a: Tensor, ne: tuple[int, ...]) -> Tensor:
        ne4 = _four(ne)
        return Tensor(ne4, _strides(ne4, a.type_name), a.type_name, "reshape", (a,), a.view_src or a)

    def view(self, a: Tensor, ne: tuple[int, ...], nb: tuple[int, ...]) -> Tensor:
        """ggml_view_Nd: `nb` gives the strides of dimensions 1 and up."""
        ne4 = _four(ne)
        full = [_TYPES[a.type_name].type_size, *nb]
        while len(full) < 4:
            full.append(full[-1] * ne4[len(full) - 1])
        return Tensor(ne4, (full[0], full[1], full[2], full[3]), a.type_name, "view", (a,), a.view_src or a)

    def permute(self, a: Tensor, axes: tuple[int, int, int, int]) -> Tensor:
        """ggml_permute: dimension i of `a` becomes dimension axes[i]."""
        ne, nb = [0] * 4, [0] * 4
        for i, axis in enumerate(axes):
            ne[axis], nb[axis] = a.ne[i], a.nb[i]
        return Tensor(_four(tuple(ne)), _four(tuple(nb)), a.type_name, "permute", (a,), a.view_src or a)

    def transpose(self, a: Tensor) -> Tensor:
        return self.permute(a, (1, 0, 2, 3))


@dataclass(slots=True)
class _Slot:
    """The allocator's bookkeeping of one tensor (ggml-alloc.c's hash_node)."""

    children: int = 0
    views: int = 0
    own: bool = False  # allocated by this allocator, and not yet freed
    offset: int = 0


@dataclass(slots=True)
class _Blocks:
    """One buffer's free blocks, sorted by offset; the last one is the open end of the buffer."""

    alignment: int
    free: list[list[int]] = field(default_factory=lambda: [[0, 1 << 62]])
    size: int = 0  # the highest end any tensor reached: the buffer llama.cpp allocates

    def alloc(self, nbytes: int) -> int:
        n = _align(nbytes, self.alignment)
        best = -1
        for i, (_, size) in enumerate(self.free[:-1]):  # the smallest block that fits, the open end last
            if size >= n and (best < 0 or size <= self.free[best][1]):
                best = i
        block = self.free[best]
        offset = block[0]
        block[0] += n
        block[1] -= n
        if block[1] == 0:
            del self.free[best]
        self.size = max(self.size, offset + n)
        return offset

    def release(self, offset: int, nbytes: int) -> None:
        n = _align(nbytes, self.alignment)
        for i, block in enumerate(self.free):
            if block[0] + block[1] == offset:  # right after this block: grow it, and join the next one
                block[1] += n
                if i + 1 < len(self.free) and block[0] + block[1] == self.free[i + 1][0]:
                    block[1] += self.free[i + 1][1]
                    del self.free[i + 1]
                return
            if offset + n == block[0]:  # right before it: grow it down, and join the previous one
                block[0] = offset
                block[1] += n
                if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == block[0]:
                    self.free[i - 1][1] += block[1]
                    del self.free[i]
                return
        at = next((i for i, b in enumerate(self.free) if b[0] >= offset), len(self.free))
        self.free.insert(at, [offset, n])


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def reserved_bytes(graph: Graph, alignment: int = CPU_ALIGNMENT) -> int:
    """The compute buffer ggml's graph allocator reserves for `graph` on one backend."""
    slots: dict[int, _Slot] = {}
    blocks = _Blocks(alignment)

    def slot(t: Tensor) -> _Slot:
        return slots.setdefault(id(t), _Slot())

    def allocated(t: Tensor) -> bool:
        return (t.op == "none" and not t.is_input) or slot(t).own  # weights are in their own buffer

    def allocate(t: Tensor) -> None:
        if allocated(t) or t.is_view:
            return
        s = slot(t)
        s.own = True
        if t.op in _INPLACE_OPS:
            for parent in t.srcs:
                p = slot(parent)
                # A view is never its allocator's own (weights neither): only a tensor this graph made is reused.
                if not p.own or parent.ne != t.ne or parent.nb != t.nb or parent.type_name != t.type_name:
                    continue
                if p.children != 1 or p.views != 0:
                    continue
                s.offset, p.own = p.offset, False
                return
        s.offset = blocks.alloc(t.nbytes)

    def free(t: Tensor) -> None:
        s = slot(t)
        blocks.release(s.offset, t.nbytes)
        s.own = False

    for leaf in graph.leafs:
        allocate(leaf)
    for node in graph.nodes:
        if node.is_view:
            slot(node.view_src).views += 1
        for src in node.srcs:
            slot(src).children += 1
            if src.is_input:
                allocate(src)
    for node in graph.nodes:
        for src in node.srcs:
            allocate(src)
        allocate(node)
        for parent in node.srcs:
            p = slot(parent)
            p.children -= 1
            if p.children or p.views:
                continue
            if parent.is_view:
                source = slot(parent.view_src)
                source.views -= 1
                if source.views == 0 and source.children == 0 and source.own:
                    free(parent.view_src)
            elif p.own:
                free(parent)
    return blocks.size
