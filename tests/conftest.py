"""Shared fixtures: the real starter model and files derived from it; the session's own user folders."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.isolation import UserFolders, isolate, real_user_folders

# Before anything imports the app or huggingface_hub (which reads its cache folder when imported):
# the real user's folders are watched, and this session's processes get folders of their own.
# Under pytest-xdist the controller watches them; each worker (started by the controller, so already
# away from the real folders) gets folders of its own and watches nothing.
_XDIST_WORKER = "PYTEST_XDIST_WORKER" in os.environ
_REAL_FOLDERS = [] if _XDIST_WORKER else real_user_folders()
_REAL_BEFORE = UserFolders.snapshot(_REAL_FOLDERS)
SESSION_HOME = isolate()
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Before llama.cpp or torch loads OpenMP (it reads the policy once, then): the suite runs two workers on
# two cores, each decoding in its own process and in engine processes beside it. Spinning OpenMP threads
# (libgomp's default, right on idle cores) wait at every barrier for a partner the OS gave to another
# process: a 3 s test took 20-57 s in the suite and once more than 300 s on a slower CI machine.
# Sleeping threads are what engine/openmp_policy.py chooses for a busy machine; this is one. Engine
# processes inherit it (a policy in the environment is the user's, and kept).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from engine.starter import starter_model_path  # noqa: E402 (after the folders are set)
from tests.fixtures.model_files import truncated_copy  # noqa: E402
from tests.qt_event_loops import event_loops_quit_at_once  # noqa: E402


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when anything under the real user's Tailor or hub folders was made or changed."""
    changed = UserFolders.snapshot(_REAL_FOLDERS).changes_since(_REAL_BEFORE)
    SESSION_HOME.remove()
    if changed:
        shown = "\n  ".join(changed[:20])
        session.config.get_terminal_writer().line(
            f"FAILED: the tests wrote outside their temporary folders ({len(changed)} paths):\n  {shown}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# Session fixtures too costly to build on every pytest-xdist worker: the tests that use one run on one
# worker (`make test` distributes with --dist loadgroup), so it is built once a run.
_ONE_WORKER_FIXTURES = ("family_corpus",)  # 80 quantized files: about 40 s of CPU


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups off the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for name in _ONE_WORKER_FIXTURES:
            if name in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(name))


@pytest.fixture(scope="session")
def starter_model() -> Path:
    return starter_model_path()


@pytest.fixture(scope="session")
def truncated_model(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return truncated_copy(starter_model, tmp_path_factory.mktemp("models") / "half-smollm2.gguf")


@pytest.fixture(scope="session")
def not_a_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "notes.gguf"
    path.write_text("These are my notes, not a model.\n" * 100)
    return path


@pytest.fixture(autouse=True)
def _qt_event_loops_still_run():
    """Fails the test that leaves Qt's event loops returning at once (tests/qt_event_loops.py)."""
    yield
    if event_loops_quit_at_once():
        pytest.fail("this test left Qt's event loops quitting at once (QCoreApplication.exit outside "
                    "app.exec, or a quit timer that outlived its test); they run again now")


@pytest.fixture(autouse=True)
def _tailor_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data and log folders."""
    home = tmp_path / "tailor-home"
    monkeypatch.setenv("TAILOR_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def family_corpus_dir(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("tiny-families")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)  # 1.2 GB; pytest would keep it for three sessions


@pytest.fixture(scope="session")
def family_corpus(starter_model: Path, family_corpus_dir: Path) -> dict[str, Path]:
    """The tiny architecture families at every quant (tests/fixtures/tiny_families.py), built once a session."""
    from tests.fixtures.tiny_families import corpus
    from tests.fixtures.tiny_gguf import borrow_tokenizer

    return corpus(family_corpus_dir, borrow_tokenizer(starter_model))


@pytest.fixture(scope="session")
def format_models(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The starter model under a reasoning or tool-calling model's template, by name
    (tests/fixtures/format_models.py), each written once a session."""
    from tests.fixtures.format_models import format_model

    folder = tmp_path_factory.mktemp("format-models")
    return lambda name: format_model(folder, name)


@pytest.fixture(scope="session")
def tiny_bert(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT embedding model with random weights and mean pooling (tests/fixtures/tiny_bert.py)."""
    from tests.fixtures.tiny_bert import write_tiny_bert
    from tests.fixtures.tiny_gguf import borrow_tokenizer

    return write_tiny_bert(tmp_path_factory.mktemp("embedding-models") / "tiny-bert.gguf", borrow_tokenizer(starter_model))
