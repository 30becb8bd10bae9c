"""Request bodies of the REST API (AutoMem's field names); automem/gateway/usecases.py
turns them into protos.

Field types are loose where AutoMem's were (``metadata`` is any JSON value, so a non-object
is reported by the ingest service naming the field); pydantic reports wrong types as 400s
naming the field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class MemoryRequest(BaseModel):
    """``POST /memory``: one memory (AutoMem fields) plus supersede mode and review flag."""

    model_config = ConfigDict(extra="allow")

    content: str = Field(..., description="The memory text (required; at most the content limit).")
    tags: list[str] = Field(default_factory=list)
    importance: float | None = Field(None, description="0..1, default 0.5")
    metadata: Any = Field(None, description="A JSON object")
    type: str | None = Field(None, description="Decision, Pattern, Preference, Style, Habit, Insight, Context")
    confidence: float | None = Field(None, description="0..1")
    t_valid: str | None = None
    t_invalid: str | None = None
    timestamp: str | None = None
    embedding: list[float] | None = None
    supersedes_memory_id: str | None = None
    supersede_relation: str | None = Field(None, description="INVALIDATED_BY (default) or EVOLVED_INTO")
    supersede_reason: str | None = None
    require_review: bool = False
    scope: str | None = None


class BatchMemoryRequest(BaseModel):
    """``POST /memory/batch``: ``{memories: [...]}``, at most 500."""

    memories: list[MemoryRequest]
    scope: str | None = None


class UpdateMemoryBody(BaseModel):
    """``PATCH /memory/{id}``: any subset of the updatable fields; ``etag`` optional."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tags: list[str] | None = None
    importance: float | None = None
    type: str | None = None
    confidence: float | None = None
    timestamp: str | None = None
    t_valid: str | None = None
    t_invalid: str | None = None
    metadata: Any = None
    add_tags: list[str] | None = None
    etag: int | str | None = None


class Association(BaseModel):
    """One association (AutoMem's ``POST /associate`` fields)."""

    model_config = ConfigDict(extra="allow")

    memory1_id: str
    memory2_id: str
    type: str = "RELATES_TO"
    strength: float = 0.5
    reason: str | None = None


class AssociateRequest(BaseModel):
    """Single association fields, or ``associations: [...]`` (at most 500)."""

    model_config = ConfigDict(extra="allow")

    memory1_id: str | None = None
    memory2_id: str | None = None
    type: str = "RELATES_TO"
    strength: float = 0.5
    reason: str | None = None
    associations: list[Association] | None = None


class DecisionBody(BaseModel):
    """Body of approve / reject: the reason (required to reject)."""

    reason: str = ""


class ConsolidateBody(BaseModel):
    """``POST /consolidate``: mode full|decay|creative|cluster|forget, dry_run."""

    mode: str = "full"
    dry_run: bool = True


class ReprocessBody(BaseModel):
    """``POST /enrichment/reprocess``: memory ids."""

    ids: list[str]
