"""What travels to the GPU machine: the dependency wheels, the CUDA llama-cpp-python wheel and the working
tree, against the 64 MiB the machine is sent.

    python -m tests.gpu.wheels [--deps DIR] [--wheels DIR]    # the inventory, its size and the carry list
    python -m tests.gpu.wheels --missing-here [--deps DIR]    # the wheels this Python lacks (run.sh installs them)

`make gpu-deps` downloads tests/gpu/wheels.txt into build/wheels/deps/ and runs this. Only the standard
library is used here: run.sh runs it before anything is installed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

MIB = 1 << 20
CARRY_LIMIT = 64 * MIB
REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = Path(__file__).with_name("wheels.txt")
DEFAULT_WHEELS = REPO / "build" / "wheels"
# Not carried: the GPU machine's own Python has them (wheels.txt says why each is left out).
EXPECTED_THERE = ("torch", "numpy", "transformers")
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


def normalize(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(slots=True, frozen=True)
class Pin:
    name: str
    version: str


@dataclass(slots=True, frozen=True)
class WheelFile:
    path: Path
    name: str  # normalized
    version: str
    py: str
    abi: str
    platform: str
    size: int

    @property
    def fits_cp312_linux(self) -> bool:
        """Installable by CPython 3.12 on x86-64 Linux (the GPU machine)."""
        py_ok = any(t in ("py3", "cp312") or (t.startswith("cp3") and self.abi == "abi3" and int(t[3:]) <= 12)
                    for t in self.py.split("."))
        abi_ok = any(t in ("none", "abi3", "cp312") for t in self.abi.split("."))
        plat_ok = any(t == "any" or (t.endswith("x86_64") and ("linux" in t)) for t in self.platform.split("."))
        return py_ok and abi_ok and plat_ok


def installed(name: str) -> bool:
    """Whether this Python has the distribution `name` (any version)."""
    for spelling in (name, name.replace("-", "_")):
        try:
            metadata.distribution(spelling)
            return True
        except metadata.PackageNotFoundError:
            continue
    return False


def missing_here(deps: Path) -> list[Path]:
    """The wheels in `deps` whose distribution this Python does not have: what run.sh installs."""
    wheels = [w for w in (parse_wheel(p) for p in sorted(deps.glob("*.whl"))) if w is not None]
    return [w.path for w in wheels if not installed(w.name)]


def read_pins(path: Path = REQUIREMENTS) -> list[Pin]:
    pins = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins.append(Pin(normalize(name), version.strip()))
    return pins


def parse_wheel(path: Path) -> WheelFile | None:
    match = _WHEEL.match(path.name)
    if match is None:
        return None
    return WheelFile(path, normalize(match["name"]), match["version"], match["py"], match["abi"], match["plat"],
                     path.stat().st_size)


def find_cuda_wheel(wheels: Path) -> WheelFile | None:
    """The CUDA llama-cpp-python wheel `make gpu-wheel` built (build/wheels/cuda13-90/...), the newest if several;
    TAILOR_GPU_WHEEL names another."""
    named = os.environ.get("TAILOR_GPU_WHEEL")
    candidates = [Path(named)] if named else sorted(wheels.glob("cuda*/llama_cpp_python-*.whl"),
                                                    key=lambda p: p.stat().st_mtime)
    parsed = [w for w in (parse_wheel(p) for p in candidates if p.is_file()) if w is not None]
    return parsed[-1] if parsed else None


def cuda_libraries(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return sorted(n for n in zf.namelist() if re.search(r"ggml-cuda[^/]*\.so", n))


def tree_bytes(repo: Path = REPO) -> int:
    """Bytes of the working tree as it travels: tracked files and untracked ones git does not ignore. Without
    git (on the GPU machine, which gets a copy without .git) every file there but caches, the venv and build/
    (the carried folders in it are counted on their own)."""
    try:
        listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        skipped = {"__pycache__", ".git"}
        return sum(p.stat().st_size for p in repo.rglob("*") if p.is_file() and not skipped & set(p.parts)
                   and p.relative_to(repo).parts[0] not in ("build", ".venv"))
    return sum(p.stat().st_size for name in listed.split(b"\0") if name and (p := repo / os.fsdecode(name)).is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


@dataclass(slots=True, frozen=True)
class Inventory:
    deps: list[WheelFile]
    missing: list[Pin]  # pinned in wheels.txt, no wheel of that version in deps
    unfit: list[WheelFile]  # wheels CPython 3.12 on x86-64 Linux cannot install
    cuda_wheel: WheelFile | None
    cuda_libs: list[str]  # libggml-cuda* inside the CUDA wheel
    tree_bytes: int
    deps_bytes: int  # the whole deps folder (the vocabulary file too)
    carry: list[str]  # the paths to name in the run tool's `carry`, relative to the repo

    @property
    def total_bytes(self) -> int:
        return self.tree_bytes + self.deps_bytes + (self.cuda_wheel.size if self.cuda_wheel else 0)

    def problems(self) -> list[str]:
        out = []
        if self.missing:
            out.append("no wheel for " + ", ".join(f"{p.name}=={p.version}" for p in self.missing)
                       + ": run `make gpu-deps`")
        if self.unfit:
            out.append("not installable by CPython 3.12 on x86-64 Linux: " + ", ".join(w.path.name for w in self.unfit))
        if self.cuda_wheel is None:
            out.append("no CUDA llama-cpp-python wheel in build/wheels/cuda*/: run `make gpu-wheel ARCH=90`")
        elif not self.cuda_libs:
            out.append(f"{self.cuda_wheel.path.name} holds no libggml-cuda: it is not a CUDA build")
        if self.total_bytes > CARRY_LIMIT:
            out.append(f"{self.total_bytes / MIB:.1f} MiB would travel, over the {CARRY_LIMIT // MIB} MiB limit")
        return out


def take_inventory(deps: Path, wheels: Path = DEFAULT_WHEELS, repo: Path = REPO,
                   requirements: Path = REQUIREMENTS) -> Inventory:
    found = [w for w in (parse_wheel(p) for p in sorted(deps.glob("*.whl"))) if w is not None]
    have = {(w.name, w.version) for w in found}
    missing = [p for p in read_pins(requirements) if (p.name, p.version) not in have]
    cuda = find_cuda_wheel(wheels)
    carry = [os.path.relpath(p, repo) for p in ([deps] + ([cuda.path] if cuda else []))]
    return Inventory(
        deps=found, missing=missing, unfit=[w for w in found if not w.fits_cp312_linux], cuda_wheel=cuda,
        cuda_libs=cuda_libraries(cuda.path) if cuda else [], tree_bytes=tree_bytes(repo),
        deps_bytes=folder_bytes(deps), carry=carry,
    )


def describe(inv: Inventory) -> str:
    lines = [f"{'wheel':<72}{'MiB':>7}"]
    for w in sorted(inv.deps, key=lambda w: -w.size):
        lines.append(f"{w.path.name:<72}{w.size / MIB:7.2f}")
    others = inv.deps_bytes - sum(w.size for w in inv.deps)
    lines.append(f"{'(other files in the deps folder)':<72}{others / MIB:7.2f}")
    cuda = inv.cuda_wheel
    lines.append(f"{(cuda.path.name if cuda else 'CUDA llama-cpp-python wheel: none yet'):<72}"
                 f"{(cuda.size if cuda else 0) / MIB:7.2f}")
    lines.append(f"{'working tree (tracked + untracked, not ignored)':<72}{inv.tree_bytes / MIB:7.2f}")
    lines.append(f"{'total that travels (limit 64 MiB)':<72}{inv.total_bytes / MIB:7.2f}")
    lines.append(f"carry: {inv.carry}")
    lines.extend(f"problem: {p}" for p in inv.problems())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.gpu.wheels", description=__doc__.splitlines()[0])
    parser.add_argument("--deps", type=Path, default=DEFAULT_WHEELS / "deps")
    parser.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS)
    parser.add_argument("--export-vocab", action="store_true",
                        help="first write the starter model's vocabulary into the deps folder (the models' tokenizer)")
    parser.add_argument("--missing-here", action="store_true",
                        help="print the wheels of the deps folder this Python lacks, one path a line, and exit")
    args = parser.parse_args(argv)
    if args.missing_here:
        for path in missing_here(args.deps):
            print(path)
        return 0
    if args.export_vocab:
        from tests.gpu.gguf_models import VOCAB_FILE, export_vocab

        path = export_vocab(args.deps / VOCAB_FILE)
        print(f"wrote {path} ({path.stat().st_size / MIB:.2f} MiB)")
    inv = take_inventory(args.deps, args.wheels)
    print(describe(inv))
    return 1 if inv.missing or inv.unfit or inv.total_bytes > CARRY_LIMIT else 0


if __name__ == "__main__":
    sys.exit(main())
