"""Generate the Python code of ``protos/automem/v1`` (``make protos``).

The generated modules live in ``automem/v1`` (never edited by hand)
and are importable as ``automem.v1.memory_pb2`` etc. The client distribution
(``clients/python``) ships its own copy under ``automem_client._proto.automem.v1``
(:func:`generate_client`), so installing it never puts an ``automem`` package on the path.
``tests/unit/test_protos.py`` regenerates both into a temporary directory and fails when the
checked-in code differs.
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


#: Where the client distribution's copy of the generated code lives.
CLIENT_ROOT = ROOT / "clients" / "python"
CLIENT_PACKAGE = "automem_client._proto"


def generate_client(out_root: Path = CLIENT_ROOT) -> list[Path]:
    """Generate the stubs of the client distribution into
    ``out_root/automem_client/_proto/automem/v1``: the same code as :func:`generate` with
    its imports of ``automem.v1`` pointing at ``automem_client._proto.automem.v1``.

    The descriptors keep their proto file names and package (``automem.v1``), so in a
    process that loads both copies (a test running server and client) the second adds the
    identical files to the default pool and shares the first one's message classes; copies
    built from different protos would clash there, which ``tests/unit/test_protos.py``
    prevents. Returns the generated files; errors as :func:`generate`.
    """
    import tempfile

    target = out_root / Path(*CLIENT_PACKAGE.split(".")) / "automem" / "v1"
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        target.mkdir(parents=True, exist_ok=True)
        for old in target.glob("*_pb2*"):
            old.unlink()
        for source in fresh:
            text = source.read_text().replace("from automem.v1 import", f"from {CLIENT_PACKAGE}.automem.v1 import")
            (target / source.name).write_text(text)
    package = out_root / Path(*CLIENT_PACKAGE.split("."))
    for pkg in (package, package / "automem", target):
        (pkg / "__init__.py").write_text('"""Generated from protos/ by `make protos` (automem/protogen.py); never edited by hand."""\n')
    return sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


if __name__ == "__main__":
    for path in [*generate(), *generate_client()]:
        print(path.relative_to(ROOT), file=sys.stderr)
