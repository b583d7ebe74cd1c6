"""The local library: models in the Hugging Face cache (ours and other tools') plus imported GGUF files.

    store = ModelStore(data_dir=paths.data_dir)   # cache: HF_HUB_CACHE / HF_HOME / ~/.cache/huggingface/hub
    library = store.list()                       # repos -> revisions -> files; imported files; total size
    store.delete(library.repos[0])               # a LocalRepo, LocalRevision, LocalFile or ImportedModel
    store.open_folder_path(item)                 # the folder a file manager should open

Imported files are registered by path (never copied) in `{data_dir}/imported-models.json`; deleting
one only forgets it: the user's file stays where it is.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import scan_cache_dir

from models.download.records import load_pending
from models.formats.errors import InvalidModelFile
from models.formats.local_file import open_regular_file
from models.hub.cache import hub_cache_dir

IMPORTED_FILE = "imported-models.json"
GGUF_MAGIC = b"GGUF"


class StoreError(Exception):
    """A library operation that cannot be done (unknown model, not a GGUF file...)."""


@dataclass(frozen=True, slots=True)
class LocalFile:
    repo_id: str
    commit: str
    path_in_repo: str
    path: Path
    blob_path: Path
    size: int

    @property
    def is_gguf(self) -> bool:
        return self.path_in_repo.lower().endswith(".gguf")


@dataclass(frozen=True, slots=True)
class LocalRevision:
    repo_id: str
    commit: str
    refs: tuple[str, ...]
    snapshot_dir: Path
    files: tuple[LocalFile, ...]
    size: int
    complete: bool


@dataclass(frozen=True, slots=True)
class LocalRepo:
    repo_id: str
    repo_dir: Path
    revisions: tuple[LocalRevision, ...]
    size: int

    @property
    def complete(self) -> bool:
        return all(r.complete for r in self.revisions)

    @property
    def gguf_files(self) -> tuple[LocalFile, ...]:
        return tuple(f for r in self.revisions for f in r.files if f.is_gguf)


@dataclass(frozen=True, slots=True)
class ImportedModel:
    path: Path
    size: int
    exists: bool

    @property
    def is_gguf(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Library:
    repos: tuple[LocalRepo, ...] = ()
    imported: tuple[ImportedModel, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    @property
    def total_size(self) -> int:
        """Bytes on disk: blobs shared by revisions counted once, plus the imported files."""
        return sum(r.size for r in self.repos) + sum(m.size for m in self.imported)


Item = LocalRepo | LocalRevision | LocalFile | ImportedModel


class ModelStore:
    def __init__(self, data_dir: Path | str, cache_dir: Path | str | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else hub_cache_dir()

    # -- listing ---------------------------------------------------------------------------------

    def list(self) -> Library:
        repos: list[LocalRepo] = []
        warnings: list[str] = []
        if self.cache_dir.is_dir():
            info = scan_cache_dir(self.cache_dir)
            warnings = [str(w) for w in info.warnings]
            pending = {(r.repo_id, r.revision) for r in load_pending(self.cache_dir)}
            for repo in info.repos:
                if repo.repo_type != "model":
                    continue
                revisions = tuple(sorted(
                    (self._revision(repo.repo_id, rev, pending) for rev in repo.revisions),
                    key=lambda r: r.snapshot_dir.stat().st_mtime if r.snapshot_dir.exists() else 0, reverse=True))
                repos.append(LocalRepo(repo.repo_id, Path(repo.repo_path), revisions, repo.size_on_disk))
        repos.sort(key=lambda r: r.repo_id.lower())
        imported = tuple(self._imported(Path(p)) for p in self._read_imported())
        return Library(tuple(repos), imported, tuple(warnings))

    @staticmethod
    def _revision(repo_id: str, rev, pending: set[tuple[str, str]]) -> LocalRevision:
        snapshot = Path(rev.snapshot_path)
        files = tuple(sorted(
            (LocalFile(repo_id, rev.commit_hash, Path(f.file_path).relative_to(snapshot).as_posix(),
                       Path(f.file_path), Path(f.blob_path), f.size_on_disk) for f in rev.files),
            key=lambda f: f.path_in_repo))
        complete = (repo_id, rev.commit_hash) not in pending
        return LocalRevision(repo_id, rev.commit_hash, tuple(sorted(rev.refs)), snapshot, files,
                             rev.size_on_disk, complete)

    @staticmethod
    def _imported(path: Path) -> ImportedModel:
        try:
            return ImportedModel(path, path.stat().st_size, True)
        except OSError:
            return ImportedModel(path, 0, False)

    # -- imported files --------------------------------------------------------------------------

    def import_gguf(self, path: Path | str) -> ImportedModel:
        """Register a GGUF file by its path (not copied); raise StoreError unless it is one."""
        path = Path(path).expanduser().resolve()
        try:
            with open_regular_file(path) as f:  # a FIFO is refused, never waited on
                magic = f.read(4)
        except InvalidModelFile as exc:
            raise StoreError(f"cannot read {exc}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
        if magic != GGUF_MAGIC:
            raise StoreError(f"{path} is not a GGUF file")
        paths = self._read_imported()
        if str(path) not in paths:
            self._write_imported([*paths, str(path)])
        return self._imported(path)

    def _registry(self) -> Path:
        return self.data_dir / IMPORTED_FILE

    def _read_imported(self) -> list[str]:
        try:
            data = json.loads(self._registry().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [p for p in data if isinstance(p, str)] if isinstance(data, list) else []

    def _write_imported(self, paths: list[str]) -> None:
        registry = self._registry()
        registry.parent.mkdir(parents=True, exist_ok=True)
        tmp = registry.with_name(registry.name + ".tmp")
        tmp.write_text(json.dumps(paths, indent=1), encoding="utf-8")
        os.replace(tmp, registry)

    # -- finding, deleting, opening --------------------------------------------------------------

    def find(self, name: str, library: Library | None = None) -> Item:
        """The repo (by id) or file (by path: an imported file, or a file in the cache) named `name`."""
        library = library or self.list()
        for repo in library.repos:
            if repo.repo_id == name:
                return repo
        target = Path(name).expanduser()
        absolute = target.resolve() if target.exists() or target.is_symlink() else target.absolute()
        for model in library.imported:
            if model.path == absolute or model.path == target:
                return model
        for repo in library.repos:
            for revision in repo.revisions:
                for file in revision.files:
                    if target.absolute() == file.path.absolute():
                        return file
        raise StoreError(f"no local model named {name!r} (give a repo id like org/name or a file path)")

    def delete(self, item: Item) -> None:
        """Remove `item` from disk (an imported file is only forgotten, never deleted)."""
        if isinstance(item, ImportedModel):
            self._write_imported([p for p in self._read_imported() if Path(p) != item.path])
        elif isinstance(item, LocalRepo):
            shutil.rmtree(item.repo_dir)
        elif isinstance(item, LocalRevision):
            self._delete_revision(item)
        elif isinstance(item, LocalFile):
            self._delete_file(item)
        else:
            raise StoreError(f"cannot delete {item!r}")

    def _delete_file(self, item: LocalFile) -> None:
        item.path.unlink(missing_ok=True)
        _remove_unused_blobs(item.blob_path.parent.parent, [item.blob_path])

    @staticmethod
    def _delete_revision(item: LocalRevision) -> None:
        """The snapshot, the refs that point at it, and the blobs no other snapshot uses.

        (huggingface_hub's `delete_revisions` takes bare commit hashes, ambiguous across repos.)
        """
        repo_path = item.snapshot_dir.parent.parent
        shutil.rmtree(item.snapshot_dir, ignore_errors=True)
        refs = repo_path / "refs"
        if refs.is_dir():
            for ref in refs.rglob("*"):
                if ref.is_file() and ref.read_text(encoding="utf-8", errors="replace").strip() == item.commit:
                    ref.unlink()
        _remove_unused_blobs(repo_path, [f.blob_path for f in item.files])

    def open_folder_path(self, item: Item) -> Path:
        """The folder to show in a file manager for `item`."""
        if isinstance(item, LocalRepo):
            return item.revisions[0].snapshot_dir if item.revisions else item.repo_dir
        if isinstance(item, LocalRevision):
            return item.snapshot_dir
        if isinstance(item, LocalFile | ImportedModel):
            return item.path.parent
        raise StoreError(f"no folder for {item!r}")


def _remove_unused_blobs(repo_path: Path, blobs: list[Path]) -> None:
    used = {p.resolve() for p in (repo_path / "snapshots").rglob("*") if p.is_symlink()}
    for blob in blobs:
        if blob.resolve() not in used:
            blob.unlink(missing_ok=True)
