"""Importing a 200 MB ChatGPT export: wall time, and peak memory against the largest chat.

A ChatGPT-shaped conversations.json of 5,000 conversations and about 200 MB is written in a temporary
folder (tests/fixtures/chatgpt/generate.py: branches, thoughts, tool calls, hidden system messages; one
long chat of about 8 MB among them, so that the largest chat is large against the fixed costs), then
imported by `import_file` into a fresh history in a child process (its own interpreter). The child
measures its RSS before the import, cold (the modules imported, the history open) and warm (after
importing a small export first: the importer's chunk buffer, SQLite's page cache and the code paths are
in memory; what any import costs whatever its size: the constant), then resets the kernel's high-water
mark of its RSS (/proc/self/clear_refs) and reads it after the import (VmHWM: the exact peak, no
sampling to miss it). Target: (peak - constant) / the largest chat's bytes <= 2.

Then a chat of one 50 MB reply (TAILOR_BENCH_IMPORT_MESSAGE_MB) alone: one value the reader must hold
whole, the case where memory is a multiple of the chat rather than of a chunk.

    python -m tests.bench.import_memory     # TAILOR_BENCH_IMPORT_MB (default 200), _CHATS (5000), _BIG_MB (8)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fixtures.chatgpt.generate import write_export

ROOT = Path(__file__).resolve().parents[2]
MB = 1_000_000
TOTAL_MB = int(os.environ.get("TAILOR_BENCH_IMPORT_MB", "200"))
CHATS = int(os.environ.get("TAILOR_BENCH_IMPORT_CHATS", "5000"))
BIG_CHAT_BYTES = int(os.environ.get("TAILOR_BENCH_IMPORT_BIG_MB", "8")) * MB  # 0: no long chat
LONG_MESSAGE_MB = int(os.environ.get("TAILOR_BENCH_IMPORT_MESSAGE_MB", "50"))  # one message this long
WARM_UP_CHATS = 100  # about 4 MB: more than the chunk the reader holds and the 2 MB of SQLite's page cache


def _status(field: str) -> int:
    """A figure of /proc/self/status, in bytes."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024  # kB


def child(export: str, warm_up: str, db: str) -> None:
    """In the child: import `warm_up`, then `export`, into the history `db`; print the figures as JSON."""
    from app.services.history.store import ChatStore
    from app.services.transfer.importer import import_file

    store = ChatStore(db)
    cold = _status("VmRSS")
    import_file(store, Path(warm_up))
    warm = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the high-water mark starts again from the RSS now
    started = time.perf_counter()
    result = import_file(store, Path(export))
    wall = time.perf_counter() - started
    peak = _status("VmHWM")
    store.close()
    print(json.dumps({"wall_s": wall, "imported": len(result.imported), "problems": len(result.problems),
                      "error": result.error, "cold": cold, "warm": warm, "peak": peak}))


def write_one_message(path: Path, message_bytes: int) -> None:
    """A Tailor export of one chat whose reply is one message of `message_bytes` (ASCII text with lines)."""
    line = "All work and no play makes a long reply. " * 2 + "\n"
    text = line * (message_bytes // len(line))
    chat = {"id": "6f1c1a9e-0000-4000-8000-000000000050", "title": "One long reply", "created": 1.7e9,
            "updated": 1.7e9, "settings": {}, "folder": None, "pinned": False, "leaf": 2,
            "messages": [{"id": 1, "parent": None, "role": "user", "content": "Write it all.", "reasoning": "",
                          "reasoning_closed": True, "state": "complete", "stats": None, "created": 1.7e9},
                         {"id": 2, "parent": 1, "role": "assistant", "content": text, "reasoning": "",
                          "reasoning_closed": True, "state": "complete", "stats": None, "created": 1.7e9}]}
    path.write_text(json.dumps({"format": "tailor-chats", "version": 2, "chats": [chat]}), encoding="utf-8")


def measure_one_message(folder: Path) -> tuple[dict, int]:
    """The child's figures importing one chat of one LONG_MESSAGE_MB message, and the file's size."""
    export = folder / "one-message.json"
    write_one_message(export, LONG_MESSAGE_MB * MB)
    write_export(folder / "warm-up.json", WARM_UP_CHATS, WARM_UP_CHATS * 40_000, seed=2)
    out = subprocess.run(
        [sys.executable, "-m", "tests.bench.import_memory", "--child", str(export), str(folder / "warm-up.json"),
         str(folder / "one-message.sqlite3")], capture_output=True, text=True, cwd=ROOT, check=True,
    )
    return json.loads(out.stdout.splitlines()[-1]), export.stat().st_size


def measure(folder: Path) -> tuple[dict, object, float]:
    started = time.perf_counter()
    export = folder / "conversations.json"
    written = write_export(export, CHATS, TOTAL_MB * MB, BIG_CHAT_BYTES)
    write_export(folder / "warm-up.json", WARM_UP_CHATS, WARM_UP_CHATS * 40_000, seed=2)
    generated = time.perf_counter() - started
    out = subprocess.run(
        [sys.executable, "-m", "tests.bench.import_memory", "--child", str(export), str(folder / "warm-up.json"),
         str(folder / "history.sqlite3")], capture_output=True, text=True, cwd=ROOT, check=True,
    )
    return json.loads(out.stdout.splitlines()[-1]), written, generated


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tailor-import-bench-") as tmp:
        figures, written, generated = measure(Path(tmp))
    largest = written.largest_chat_bytes
    print(f"import_file_mb={written.bytes / MB:.1f} ({written.chats:,} ChatGPT conversations, "
          f"{written.messages:,} messages in all branches; written in {generated:.1f} s)")
    print(f"import_wall_s={figures['wall_s']:.1f} ({written.bytes / MB / figures['wall_s']:.1f} MB/s; "
          f"{figures['imported']:,} chats imported, {figures['problems']} left out, error: {figures['error']})")
    print(f"import_largest_chat_mb={largest / MB:.2f}")
    print(f"import_rss_cold_mb={figures['cold'] / MB:.1f} (the child's RSS before importing: modules, history open)")
    print(f"import_rss_constant_mb={figures['warm'] / MB:.1f} (its RSS after a {WARM_UP_CHATS}-chat import first)")
    print(f"import_peak_rss_mb={figures['peak'] / MB:.1f}")
    ratio = (figures["peak"] - figures["warm"]) / largest
    cold_ratio = (figures["peak"] - figures["cold"]) / largest
    print(f"import_memory_ratio={ratio:.2f} ((peak - constant) / largest chat; target <= 2; "
          f"{cold_ratio:.2f} against the cold RSS)")
    with tempfile.TemporaryDirectory(prefix="tailor-import-bench-") as tmp:
        one, size = measure_one_message(Path(tmp))
    one_ratio = (one["peak"] - one["warm"]) / size
    print(f"import_one_message_mb={size / MB:.1f} (one chat, one reply of {LONG_MESSAGE_MB} MB; imported in "
          f"{one['wall_s']:.1f} s; error: {one['error']})")
    print(f"import_one_message_peak_rss_mb={one['peak'] / MB:.1f} (constant {one['warm'] / MB:.1f})")
    print(f"import_one_message_ratio={one_ratio:.2f} ((peak - constant) / the chat's bytes; the README's bound)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:5])
    else:
        main()
