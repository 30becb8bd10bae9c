"""Consolidation runs (``:ConsolidationRun``): the persisted history of
automem/consolidate/servicer.py, read back by its status RPC and its scheduler."""

from __future__ import annotations

from typing import Any

from automem.graph.repository import Repository


class ConsolidationRuns(Repository):
    """Statements over ``:ConsolidationRun`` nodes."""

    async def record(self, run_id: str, mode: str, dry_run: bool, start_time: float, end_time: float,
                     counts: list[str], scope: str, trigger: str, error: str) -> None:
        """Store one run: times in epoch seconds, ``counts`` as ``name=value`` strings,
        ``scope`` ``*`` for every scope. A second call with the same ``run_id`` replaces the
        first (a run is recorded when it starts, as not finished, and again when it ends)."""
        await self.store.query(
            "MERGE (r:ConsolidationRun {run_id: $id}) SET r.mode = $mode, r.dry_run = $dry, r.start_time = $s, "
            "r.end_time = $e, r.counts = $counts, r.scope = $scope, r.trigger = $trigger, r.error = $error",
            {"scope": scope, "id": run_id, "mode": mode, "dry": dry_run, "s": start_time, "e": end_time,
             "counts": counts, "trigger": trigger, "error": error})

    async def page(self, scope: str | None, skip: int, limit: int) -> list[list[Any]]:
        """Runs of ``scope`` (every run when None), newest first, ``skip``/``limit`` paged:
        rows ``[run_id, mode, dry_run, start_time, end_time, counts, trigger, scope, error]``."""
        return await self.store.ro_query(
            "MATCH (r:ConsolidationRun) WHERE $scope IS NULL OR r.scope = $scope "
            "RETURN r.run_id, r.mode, r.dry_run, r.start_time, r.end_time, r.counts, r.trigger, r.scope, r.error "
            "ORDER BY r.start_time DESC SKIP $skip LIMIT $limit",
            {"skip": skip, "limit": limit, "scope": scope})

    async def last_end_times(self) -> dict[str, float]:
        """Mode -> end time (epoch seconds) of its latest run that stands for a scheduled
        one: not a dry run, over every scope (``*``) and ended without error. A manual run
        of one scope, or a failed run, does not postpone the every-scope schedule
        (automem/consolidate/scheduler.py ``Scheduler._initial``)."""
        rows = await self.store.ro_query(
            "MATCH (r:ConsolidationRun) WHERE r.dry_run = false AND r.scope = '*' "
            "AND coalesce(r.error, '') = '' RETURN r.mode, max(r.end_time)")
        return {r[0]: float(r[1] or 0.0) for r in rows}
