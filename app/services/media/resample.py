"""One channel of audio from one sample rate to another: band-limited (windowed-sinc) interpolation in numpy.

A projector hears at one rate (16 kHz for every Whisper-style encoder) and files come at any (44.1 kHz,
48 kHz, 8 kHz from a phone line). Each output sample is a weighted sum of the input around its instant: a
sinc low-pass cut below the lower of the two Nyquist frequencies (so a 48 kHz file's content above 8 kHz
does not fold back into speech as noise), shaped by a Kaiser window. The filters are tabulated for
PHASES instants between two input samples; an output sample takes the nearest, a timing error of at most
1/(2 × PHASES) of an input sample, far below what the ear or an encoder resolves. Where the two rates'
ratio has fewer phases (48 → 16 kHz: one; 44.1 → 16 kHz: 160) the table is exact.

Output is computed in blocks, so its memory is bounded whatever the clip's length.
"""

from __future__ import annotations

import math

import numpy as np

ZERO_CROSSINGS = 16  # of the sinc on each side, at the lower rate: the filter's length
ROLLOFF = 0.945  # the pass band ends here, as a fraction of the lower Nyquist frequency
KAISER_BETA = 8.6  # side lobes near -80 dB
PHASES = 1024  # tabulated instants between two input samples, at most
_BLOCK_VALUES = 1 << 22  # taps × outputs computed at once (16 MB of float32)


def resampled_length(n: int, rate_in: int, rate_out: int) -> int:
    """Samples `n` samples at `rate_in` become at `rate_out`: the instants up to the last input sample."""
    return (n * rate_out + rate_in - 1) // rate_in


def resample(samples: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """`samples` (one channel) at `rate_in` Hz as float32 at `rate_out` Hz, the same length in time."""
    if rate_in <= 0 or rate_out <= 0:
        raise ValueError(f"sample rates must be above 0, not {rate_in} and {rate_out}")
    x = np.asarray(samples, dtype=np.float32)
    if rate_in == rate_out or x.size == 0:
        return x.copy()
    g = math.gcd(rate_in, rate_out)
    up, down = rate_out // g, rate_in // g  # output n sits at input instant n × down / up
    phases = min(up, PHASES)
    scale = min(1.0, rate_out / rate_in)  # the cut-off, relative to the input's Nyquist frequency
    half = math.ceil(ZERO_CROSSINGS / scale)  # taps on each side, in input samples
    table = _filters(phases, half, scale)
    padded = np.concatenate([np.zeros(half, np.float32), x, np.zeros(half + 1, np.float32)])
    n_out = resampled_length(x.size, rate_in, rate_out)
    out = np.empty(n_out, dtype=np.float32)
    taps = np.arange(2 * half)
    block = max(1, _BLOCK_VALUES // (2 * half))
    for first in range(0, n_out, block):
        n = np.arange(first, min(first + block, n_out), dtype=np.int64)
        instant = n * down
        base, rest = instant // up, instant % up
        phase = (rest * phases + up // 2) // up  # the nearest tabulated instant (exact when phases == up)
        carry = phase == phases  # rounded up to the next input sample
        base, phase = base + carry, np.where(carry, 0, phase)
        # tap j of output n weighs input base - half + 1 + j, at padded index base + 1 + j
        window = padded[(base + 1)[:, None] + taps]
        out[first : first + n.size] = np.einsum("ij,ij->i", window, table[phase])
    return out


def _filters(phases: int, half: int, scale: float) -> np.ndarray:
    """(phases, 2 × half) weights: row p is the low-pass sampled at offsets (1 - half + j) - p / phases."""
    offsets = (np.arange(2 * half) + 1 - half)[None, :] - (np.arange(phases) / phases)[:, None]
    cutoff = scale * ROLLOFF
    # a sinc of the pass band's width, in input samples, shaped by a Kaiser window over ±half
    weights = cutoff * np.sinc(cutoff * offsets)
    inside = np.clip(1.0 - (offsets / half) ** 2, 0.0, None)
    weights *= np.i0(KAISER_BETA * np.sqrt(inside)) / np.i0(KAISER_BETA)
    weights /= weights.sum(axis=1, keepdims=True)  # each phase passes a constant unchanged
    return weights.astype(np.float32)
