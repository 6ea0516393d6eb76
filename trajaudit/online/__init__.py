"""Checking runs while they run: the guardrail proxy (``guard``) and the file follower (``watch``),
both built on :class:`trajaudit.engine.run.monitor.Monitor` (issue 20)."""

__all__: list[str] = []
