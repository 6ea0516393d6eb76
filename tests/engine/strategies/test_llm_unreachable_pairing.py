"""Every place that degrades on an LLM failure (``except LLMError``) first lets an unreachable
endpoint through (``except LLMUnreachableError: raise``): LLMUnreachableError subclasses LLMError,
so without that handler a dead endpoint would be turned into one 'unknown' verdict per run instead
of stopping the batch (docs/llm.md). An AST scan of the package keeps the pairing honest."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[3] / "trajaudit"


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts))
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return {node.id} if isinstance(node, ast.Name) else set()


def _reraises(handler: ast.ExceptHandler) -> bool:
    return len(handler.body) == 1 and isinstance(handler.body[0], ast.Raise) and handler.body[0].exc is None


def unpaired_llm_error_handlers(root: Path = PKG) -> list[str]:
    """``file:line`` of each ``except LLMError`` with no earlier ``except LLMUnreachableError: raise``
    in the same ``try``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try):
                continue
            passed = False
            for h in node.handlers:
                names = _names(h.type)
                if "LLMUnreachableError" in names and _reraises(h):
                    passed = True
                elif "LLMError" in names and not passed:
                    out.append(f"{path.relative_to(root.parent)}:{h.lineno}")
    return out


def test_every_degrading_llm_handler_lets_an_unreachable_endpoint_through():
    assert unpaired_llm_error_handlers() == []


def test_the_scan_finds_a_missing_pairing(tmp_path):
    pkg = tmp_path / "trajaudit"
    pkg.mkdir()
    (pkg / "ok.py").write_text("try:\n    f()\nexcept LLMUnreachableError:\n    raise\nexcept LLMError:\n    pass\n")
    (pkg / "bad.py").write_text("try:\n    f()\nexcept ValueError:\n    pass\nexcept (KeyError, LLMError) as e:\n    g(e)\n")
    (pkg / "late.py").write_text("try:\n    f()\nexcept LLMError:\n    pass\nexcept LLMUnreachableError:\n    raise\n")
    assert unpaired_llm_error_handlers(pkg) == ["trajaudit/bad.py:5", "trajaudit/late.py:3"]
