"""`make bench`: run every benchmark and print its figures."""

from __future__ import annotations

import importlib
import pkgutil

import tests.bench as bench


def main() -> None:
    for name in sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name != "__main__"):
        module = importlib.import_module(f"tests.bench.{name}")
        if hasattr(module, "main"):  # the others are parts the benches share
            print(f"== {name}", flush=True)
            module.main()


if __name__ == "__main__":
    main()
