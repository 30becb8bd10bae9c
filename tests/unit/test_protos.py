"""The checked-in generated code matches the .proto files."""

from pathlib import Path

from automem import protogen


def test_generated_code_is_up_to_date_with_protos(tmp_path: Path) -> None:
    fresh = protogen.generate(tmp_path)
    checked_in = protogen.OUT_ROOT
    names = {p.relative_to(tmp_path) for p in fresh}
    assert names == {p.relative_to(checked_in) for p in (checked_in / "automem" / "v1").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts}
    stale = [str(n) for n in names if (tmp_path / n).read_bytes() != (checked_in / n).read_bytes()]
    assert not stale, f"generated code is stale, run `make protos`: {stale}"


def test_generated_code_imports_from_installed_package() -> None:
    from automem.v1 import ingest_service_pb2_grpc, memory_pb2

    memory = memory_pb2.Memory(content="x", state=memory_pb2.MEMORY_STATE_ACTIVE)
    assert memory_pb2.Memory.FromString(memory.SerializeToString()).content == "x"
    assert hasattr(ingest_service_pb2_grpc, "IngestServiceStub")
