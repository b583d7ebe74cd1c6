"""Torch engine tests run torch on one thread: the ops of tiny models are too small to split, and on a
busy two-core machine OpenMP's waiting threads make every op hundreds of times slower."""

from __future__ import annotations

import torch

torch.set_num_threads(1)
