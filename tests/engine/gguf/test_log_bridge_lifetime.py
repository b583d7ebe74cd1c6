"""llama.cpp calls its log callback until another is set: a bridge dropped while installed must not crash it."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO

SCRIPT = """
import gc, sys
import llama_cpp
from engine.gguf.log_bridge import LlamaLogBridge

def install_and_drop():
    LlamaLogBridge()  # installed as llama.cpp's callback, then dropped by Python

install_and_drop()
gc.collect()
llm = llama_cpp.Llama(sys.argv[1], n_ctx=256, verbose=False)  # llama.cpp logs while loading
llm.close()
print("loaded")
"""


def test_a_dropped_bridge_keeps_its_callback_alive(starter_model: Path):
    # In a child: the old failure was a segfault, which would take the test process down with it.
    gc.collect()
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(starter_model)], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "loaded"


SAVED_AND_PUT_BACK = """
import ctypes, gc, sys
import llama_cpp
from engine.gguf.log_bridge import LlamaLogBridge

LlamaLogBridge()  # an engine's bridge, installed
saved, user_data = llama_cpp.llama_log_callback(), ctypes.c_void_p()
llama_cpp.llama_log_get(ctypes.byref(saved), ctypes.byref(user_data))  # what a test saves around a block
LlamaLogBridge()  # another bridge installed inside the block
gc.collect()
llama_cpp.llama_log_set(saved, user_data)  # and the first one's callback put back after it
llm = llama_cpp.Llama(sys.argv[1], n_ctx=256, verbose=False)
llm.close()
print("loaded")
"""


def test_a_callback_saved_before_another_bridge_can_be_put_back(starter_model: Path):
    # tests/fixtures/tiny_families.py's kept_llama_log does this: with only the last bridge's callback
    # kept, the pointer it put back was freed, and the next load crashed the process (seen under xdist,
    # where the tests ran in another order).
    done = subprocess.run([sys.executable, "-c", SAVED_AND_PUT_BACK, str(starter_model)], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "loaded"
