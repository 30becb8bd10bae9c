"""Generate the Python code of ``protos/automem/v1`` (``make protos``).

The generated modules live in ``automem/v1`` (never edited by hand)
and are importable as ``automem.v1.memory_pb2`` etc. ``tests/unit/test_protos.py``
regenerates into a temporary directory and fails when the checked-in code differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO_ROOT = ROOT / "protos"
OUT_ROOT = ROOT


def proto_files() -> list[Path]:
    """The ``.proto`` sources, sorted."""
    return sorted((PROTO_ROOT / "automem" / "v1").glob("*.proto"))


def generate(out_root: Path = OUT_ROOT) -> list[Path]:
    """Compile every proto into ``out_root``; returns the generated files.

    Raises RuntimeError when protoc fails, ModuleNotFoundError without grpcio-tools (a
    development tool: requirements-dev.txt, the ``dev`` extra; the installed service never
    needs it).
    """
    import grpc_tools
    from grpc_tools import protoc

    out_root.mkdir(parents=True, exist_ok=True)
    include = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *[str(p.relative_to(PROTO_ROOT)) for p in proto_files()],
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed: " + " ".join(args))
    for pkg in (out_root / "automem", out_root / "automem" / "v1"):
        (pkg / "__init__.py").touch()
    return sorted(p for p in (out_root / "automem" / "v1").rglob("*") if p.is_file())


if __name__ == "__main__":
    for path in generate():
        print(path.relative_to(ROOT), file=sys.stderr)
