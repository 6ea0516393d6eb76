"""The package's shape: no import circle inside ``trajaudit``, a small ``engine/``, and a light import.

The import graph is read from the source with :mod:`ast` (nothing is imported): every ``import`` and
``from ... import`` anywhere in a module, including inside functions, is an edge when it names a
``trajaudit`` module. Relative imports are resolved against the importing module's package, and
``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``. Imports
under ``if TYPE_CHECKING:`` never run and are not edges. Importing
``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; those parent packages are edges too, since a
circle through an ``__init__`` is as real as any other. Third-party modules are not nodes.

Run as a script (``python tests/test_architecture.py``) it prints the counts the redesign reports:
modules per folder, strongly connected components, and function-level imports of trajaudit modules.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trajaudit"
ENGINE_PACKAGES = ("trace", "trace.adapters", "dsl", "dsl.regex", "packs", "validation", "claims", "strategies", "run")


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Map every module name of the package (``trajaudit.engine.dsl.parser``) to its file."""
    out: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_package(name: str, files: dict[str, Path]) -> bool:
    return files[name].name == "__init__.py"


def _with_parents(name: str, files: dict[str, Path]) -> list[str]:
    """``a.b.c`` and the packages ``a.b``, ``a`` whose ``__init__`` importing it runs."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in files]


def _imports(tree: ast.Module) -> list[tuple[ast.AST, bool]]:
    """Every import node with whether it sits inside a function (or class body run at call)."""
    found: list[tuple[ast.AST, bool]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_only(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, nested))
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, inner)

    visit(tree, False)
    return found


def _type_checking_only(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports there never run, so they are no edge."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(module: str, node: ast.AST, files: dict[str, Path]) -> list[str]:
    """The trajaudit modules one import statement names (empty for third-party ones)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "trajaudit" and a.name in files]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module.split(".") if _is_package(module, files) else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        pkg = ".".join(base + ([node.module] if node.module else []))
    else:
        pkg = node.module or ""
    if pkg.split(".")[0] != "trajaudit" or pkg not in files:
        return []
    out = []
    for alias in node.names:
        sub = f"{pkg}.{alias.name}"
        out.append(sub if sub in files else pkg)
    return out


def import_graph(package: Path = PACKAGE) -> tuple[nx.DiGraph, int]:
    """The module import graph (edges to parent packages included) and the number of
    function-level imports of trajaudit modules."""
    files = module_files(package)
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    nested_count = 0
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, nested in _imports(tree):
            targets = _targets(module, node, files)
            if nested and targets:
                nested_count += 1
            for target in targets:
                for name in _with_parents(target, files):
                    if name != module and not module.startswith(name + "."):
                        graph.add_edge(module, name)
    return graph, nested_count


def circles(graph: nx.DiGraph) -> list[list[str]]:
    """Strongly connected components of more than one module, largest first."""
    comps = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    return sorted(comps, key=len, reverse=True)


def test_no_import_circle_inside_trajaudit():
    graph, _ = import_graph()
    found = circles(graph)
    if found:
        cycle = nx.find_cycle(graph.subgraph(found[0]))
        path = " -> ".join([a for a, _ in cycle] + [cycle[-1][1]])
        raise AssertionError(f"{len(found)} import circle(s); for example: {path}")


def test_no_function_level_import_of_trajaudit_modules():
    _, nested = import_graph()
    assert nested == 0, f"{nested} imports of trajaudit modules sit inside functions"


def test_engine_has_few_modules_directly_inside():
    direct = sorted(p.name for p in (PACKAGE / "engine").glob("*.py") if p.name != "__init__.py")
    assert len(direct) <= 8, direct


def test_importing_engine_does_not_import_openai():
    """Not ``trajaudit.engine`` nor any of its stages (strategies included: the LLM strategies are
    registered lazily), nor the pipeline that an offline audit runs."""
    stages = ", ".join(f"trajaudit.engine.{p}" for p in ENGINE_PACKAGES)
    code = f"import sys, trajaudit.engine, {stages}; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_engine_sub_packages_name_their_public_surface():
    for name in ENGINE_PACKAGES:
        init = PACKAGE / "engine" / name.replace(".", "/") / "__init__.py"
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{init} has no docstring"
        assigned = [t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)]
        assert "__all__" in assigned, f"{init} has no __all__"


def test_import_trajaudit_loads_the_audit_pipeline_only_on_first_use():
    code = ("import sys, trajaudit; before = 'trajaudit.engine.run.pipeline' in sys.modules; "
            "from trajaudit import audit; from trajaudit.engine.run.pipeline import audit as real; "
            "print(before, audit is real, 'audit' in dir(trajaudit), 'audit' in trajaudit.__all__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["False", "True", "True", "True"], out.stdout + out.stderr


def test_the_graph_reader_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "trajaudit"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "sub" / "b.py").write_text("from trajaudit.sub.a import f\nimport json\n")
    graph, nested = import_graph(pkg)
    assert nested == 1
    assert circles(graph) == [["trajaudit.sub.a", "trajaudit.sub.b"]]


def _report() -> None:  # pragma: no cover - a script for the redesign's closing note
    graph, nested = import_graph()
    per_folder: dict[str, int] = defaultdict(int)
    for path in module_files().values():
        per_folder[str(path.parent.relative_to(ROOT))] += 1
    for folder, count in sorted(per_folder.items()):
        print(f"{count:4d}  {folder}")
    found = circles(graph)
    print(f"modules: {graph.number_of_nodes()}  circles (SCC > 1): {len(found)}  sizes: {[len(c) for c in found]}")
    print(f"function-level imports of trajaudit modules: {nested}")
    for comp in found:
        print("  ", comp)


if __name__ == "__main__":  # pragma: no cover
    _report()


def test_loader_and_evaluate_stay_within_the_module_size_guideline():
    for name in ("trajaudit.engine.trace.loader", "trajaudit.eval.evaluate"):  # eval.evaluate is also a function name
        n = len(Path(importlib.import_module(name).__file__).read_text().splitlines())
        assert n <= 400, f"{name}: {n} lines"
