"""`tailor chat --file`, `tailor index FOLDER --name NAME` and `tailor chat --knowledge NAME`, through the
installed command, the engine process and the starter model; real PDFs written by fpdf2. What is asserted is
what went into the message (the lines on stderr naming each file and passage), never the tiny model's
wording."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.services.documents.index.store import DocumentIndex
from tests.app.services.documents.makers import encrypted_pdf, filler, pdf_with_pages

TAILOR = str(Path(sys.executable).with_name("tailor"))
ROOT = Path(__file__).resolve().parents[3]  # the checkout whose code the command runs
QUESTION = "What is the name of the lighthouse keeper's parrot?"
ANSWER = "The lighthouse keeper's parrot is named Archimedes Quill."


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "TAILOR_HOME": str(home), "PYTHONPATH": str(ROOT)}


def tailor(*args: str, home: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TAILOR, *args], capture_output=True, text=True, timeout=timeout, env=_env(home))


@pytest.fixture
def long_report(tmp_path: Path) -> Path:
    """60 pages of filler; the answer on page 37 alone."""
    return pdf_with_pages(tmp_path / "report.pdf", {37: f"{filler(37, 60)} {ANSWER}"}, 60)


def test_a_60_page_pdf_too_long_for_the_context_sends_the_passage_of_page_37(tmp_path: Path, long_report: Path):
    result = tailor("chat", "--file", str(long_report), "--temperature", "0", "--max-tokens", "8", "--json",
                    QUESTION, home=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    note = next(line for line in lines if line.startswith("tailor: report.pdf · "))
    found = re.fullmatch(r"tailor: report\.pdf · 60 pages · ([\d,]+) tokens: too long for the context; "
                         r"(\d+) passages? retrieved", note)
    assert found, note
    tokens = int(found[1].replace(",", ""))
    assert tokens > 8_192  # counted by the model's tokenizer: more than the whole context
    cited = [line for line in lines if line.startswith("tailor: [")]
    assert len(cited) == int(found[2])
    assert re.fullmatch(r"tailor: \[1\] report\.pdf · page 37 · characters [\d,]+–[\d,]+", cited[0])
    stats = json.loads(result.stdout.splitlines()[-1])
    assert stats["prompt_tokens"] + 8 <= 8_192  # the passages fit the context beside the reply


def test_a_file_that_fits_goes_in_whole_and_its_tokens_reach_the_prompt(tmp_path: Path):
    notes = tmp_path / "notes.md"
    notes.write_text(f"# Keeper\n\n{ANSWER}\n")
    common = ("chat", "--temperature", "0", "--max-tokens", "4", "--json")
    plain = tailor(*common, QUESTION, home=tmp_path)
    with_file = tailor(*common, "--file", str(notes), QUESTION, home=tmp_path)
    assert with_file.returncode == 0, with_file.stderr
    note = next(line for line in with_file.stderr.splitlines() if line.startswith("tailor: notes.md"))
    tokens = int(re.fullmatch(r"tailor: notes\.md · ([\d,]+) tokens, whole", note)[1].replace(",", ""))
    assert "tailor: [1] notes.md · whole · characters 0–" in with_file.stderr
    grown = json.loads(with_file.stdout.splitlines()[-1])["prompt_tokens"] - \
        json.loads(plain.stdout.splitlines()[-1])["prompt_tokens"]
    assert grown >= tokens  # the document's own tokens, and the heading and instructions around it


@pytest.mark.parametrize("which", ["encrypted", "missing", "junk", "unknown knowledge", "endpoint"])
def test_a_refused_document_is_one_line_before_anything_loads(tmp_path: Path, which: str):
    args: tuple[str, ...]
    if which == "encrypted":
        args = ("--file", str(encrypted_pdf(tmp_path / "secret.pdf")))
    elif which == "missing":
        args = ("--file", str(tmp_path / "gone.txt"))
    elif which == "junk":
        (tmp_path / "junk.txt").write_bytes(bytes(range(256)) * 64)
        args = ("--file", str(tmp_path / "junk.txt"))
    elif which == "unknown knowledge":
        args = ("--knowledge", "handbook")
    else:
        (tmp_path / "notes.txt").write_text(ANSWER)
        args = ("--endpoint", "http://127.0.0.1:9", "--file", str(tmp_path / "notes.txt"))
    result = tailor("chat", *args, QUESTION, home=tmp_path, timeout=60)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    expected = {"encrypted": "tailor: error: secret.pdf is encrypted", "missing": "tailor: error: gone.txt ",
                "junk": "tailor: error: junk.txt ", "unknown knowledge": "tailor: error: no knowledge index is "
                "named 'handbook' (there is none yet); make one with `tailor index FOLDER --name handbook`",
                "endpoint": "tailor: error: --file and --knowledge are for a model this machine loads"}[which]
    assert line.startswith(expected)
    assert result.stdout == "" and not (tmp_path / "logs").exists()  # no engine was started


def test_a_knowledge_index_answers_each_question_with_its_passages(tmp_path: Path, long_report: Path):
    folder = tmp_path / "handbook"
    folder.mkdir()
    long_report.rename(folder / "report.pdf")
    (folder / "ferry.txt").write_text("The ferry leaves at noon from the north pier.")
    indexed = tailor("index", str(folder), "--name", "handbook", home=tmp_path, timeout=60)
    assert indexed.returncode == 0, indexed.stderr
    assert "indexing 2/2 files" in indexed.stderr
    assert "tailor: 'handbook': 2 files indexed" in indexed.stderr
    assert (tmp_path / "data" / "knowledge" / "handbook.sqlite3").is_file()
    again = tailor("index", str(folder), "--name", "handbook", home=tmp_path, timeout=60)
    assert "0 files indexed (0 passages), 2 unchanged" in again.stderr

    result = tailor("chat", "--knowledge", "handbook", "--temperature", "0", "--max-tokens", "8", QUESTION,
                    home=tmp_path)
    assert result.returncode == 0, result.stderr
    cited = [line for line in result.stderr.splitlines() if line.startswith("tailor: [")]
    assert re.fullmatch(r"tailor: \[1\] report\.pdf · page 37 · characters [\d,]+–[\d,]+", cited[0])
    assert not any("ferry" in line for line in cited)


def test_ctrl_c_stops_indexing_after_the_file_it_reads_and_keeps_what_it_indexed(tmp_path: Path):
    folder = tmp_path / "logs-folder"
    folder.mkdir()
    for n in range(400):  # enough that the run is still reading when the signal comes
        (folder / f"day{n:03}.txt").write_text("\n\n".join(filler(n * 10 + i, 80) for i in range(40)))
    process = subprocess.Popen([TAILOR, "index", str(folder), "--name", "days"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=_env(tmp_path),
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        seen = b""
        deadline = time.monotonic() + 60
        while b"indexing 1/400" not in seen:  # the first file is in: the run is under way
            assert time.monotonic() < deadline and process.poll() is None, seen
            seen += os.read(process.stderr.fileno(), 4096)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    err = (seen + err).decode()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    kept = re.search(r"tailor: cancelled: (\d+) files indexed \(\d+ passages\), 0 unchanged, 0 removed, 0 skipped "
                     r"kept in 'days'; the index holds (\d+) documents", err)
    assert kept, err
    assert 1 <= int(kept[1]) == int(kept[2]) < 400
    with DocumentIndex(tmp_path / "data" / "knowledge" / "days.sqlite3") as index:
        assert index.counts()[0] == int(kept[1])  # every file it reported is in, whole


def test_with_an_embedding_model_in_the_library_the_passages_are_embedded_and_page_37_still_answers(
        tmp_path: Path, long_report: Path, tiny_bert: Path):
    from models.library import ModelStore

    ModelStore(tmp_path / "data").import_gguf(tiny_bert)
    folder = tmp_path / "handbook"
    folder.mkdir()
    long_report.rename(folder / "report.pdf")
    words = tailor("index", str(folder), "--name", "words", "--no-embeddings", home=tmp_path, timeout=120)
    assert words.returncode == 0 and "embedded" not in words.stderr and "by meaning" not in words.stderr
    indexed = tailor("index", str(folder), "--name", "handbook", home=tmp_path, timeout=120)
    assert indexed.returncode == 0, indexed.stderr
    assert re.search(r"tailor: [\d,]+ passages embedded with tiny-bert\.gguf", indexed.stderr)
    result = tailor("chat", "--knowledge", "handbook", "--temperature", "0", "--max-tokens", "8", QUESTION,
                    home=tmp_path)
    assert result.returncode == 0, result.stderr
    cited = [line for line in result.stderr.splitlines() if line.startswith("tailor: [")]
    # The words find page 37 alone; fused with the (random) model's ranking it stays first.
    assert re.fullmatch(r"tailor: \[1\] report\.pdf · page 37 · characters [\d,]+–[\d,]+", cited[0])
    assert len(cited) > 1 and "knowledge:" not in result.stderr  # the meaning brought more; nothing to say
