"""Rules are data, never executed (issue 22): no module of the package calls the built-ins ``exec``,
``eval`` or ``compile`` (nor reaches them through ``builtins``, ``getattr`` or an alias), so neither
rule text, model output nor generated source is ever run as Python. ``re.compile``,
``jmespath.compile`` and z3's ``model.eval`` are methods of other objects and are not these built-ins."""

from __future__ import annotations

import ast
from pathlib import Path

import trajaudit

FORBIDDEN = {"exec", "eval", "compile"}  # (importing a named optional module with __import__ runs no generated source)
PACKAGE = Path(trajaudit.__file__).resolve().parent


def offences(source: str, name: str) -> list[str]:
    """``file:line what`` for every use of a forbidden built-in in ``source``."""
    out = []
    for node in ast.walk(_with_parents(ast.parse(source, name))):
        if isinstance(node, ast.Name) and node.id in FORBIDDEN:  # a call, an alias (f = eval) or an argument
            out.append(f"{name}:{node.lineno} {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN and isinstance(node.value, ast.Name) \
                and node.value.id in ("builtins", "__builtins__"):
            out.append(f"{name}:{node.lineno} {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in FORBIDDEN and _in_getattr(node):
            out.append(f"{name}:{node.lineno} getattr(..., {node.value!r})")
        elif isinstance(node, ast.ImportFrom) and node.module == "builtins" and \
                any(a.name in FORBIDDEN for a in node.names):
            out.append(f"{name}:{node.lineno} from builtins import")
    return out


def _in_getattr(node: ast.AST) -> bool:
    parent = getattr(node, "_parent", None)
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "getattr"


def _with_parents(tree: ast.AST) -> ast.AST:
    for n in ast.walk(tree):
        for c in ast.iter_child_nodes(n):
            c._parent = n  # type: ignore[attr-defined]
    return tree


def test_the_checker_finds_each_form() -> None:
    src = ("exec(x)\nf = eval\nimport builtins\nbuiltins.compile(s, 'f', 'exec')\nfrom builtins import eval as e\n"
           "g = getattr(builtins, 'eval')\n")
    found = offences(src, "t.py")
    assert sorted(f.split(" ", 1)[1] for f in found) == ["builtins.compile", "eval", "exec", "from builtins import",
                                                          "getattr(..., 'eval')"]
    assert offences("import re\nre.compile('a')\nm.eval(x)\n", "ok.py") == []


def test_no_exec_eval_or_compile_in_the_package() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50
    found = []
    for p in files:
        text = p.read_text(encoding="utf-8")
        found += offences(text, str(p.relative_to(PACKAGE)))
    assert found == []
