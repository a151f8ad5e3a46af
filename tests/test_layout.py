"""The package's map holds: no import cycle between modules (imports inside functions and under
`if TYPE_CHECKING:` count: they only hide a cycle), each folder imports only the folders its row of
docs/DEVELOPING.md allows, and the package root keeps only the public API, errors, units and names."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "src" / "cardfit"
ROOT_MODULES = {"__init__", "__main__", "errors", "units", "names"}
# What each part may import besides the root modules errors, units and names (docs/DEVELOPING.md, "Map").
MAY_IMPORT: dict[str, set[str]] = {
    "catalog": {"readers.source"},  # catalog files are read with the readers' one regular-file check
    "core": {"catalog"},
    "runtimes": {"catalog", "core"},
    "readers": {"catalog", "core"},
    "charts": set(),
    "services": {"catalog", "core", "runtimes", "readers", "charts"},
    # published measurements replayed through the services (no service takes a record)
    "validation": {"catalog", "core", "runtimes", "readers", "charts", "services"},
    "cli": {"catalog", "core", "runtimes", "services", "validation", "web"},
    "web": {"catalog", "readers", "services", "validation"},
    "__init__": {"services"},
    "__main__": {"cli"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(tree: ast.AST):
    """Every import node: at module level, inside functions, and under `if TYPE_CHECKING:` (a type the module
    names is a dependency too, and a cycle through it is still a cycle)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod.split(".")[:-1] if path.name != "__init__.py" else mod.split(".")
        if mod == "__init__":
            package = []
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name.removeprefix("cardfit.") for a in node.names if a.name.startswith("cardfit.")]
            elif node.level or (node.module or "").startswith("cardfit"):
                if node.level:
                    target = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module
                                                                                  else []))
                else:
                    target = (node.module or "").removeprefix("cardfit").lstrip(".") or "__init__"
                # `from . import gguf` needs the submodule; `from .plan import x` needs the module plan
                names = [f"{target}.{a.name}".lstrip(".") if f"{target}.{a.name}".lstrip(".") in mods
                         else target
                         for a in node.names]
            else:
                names = []
            graph[mod] |= {n for n in names if n in mods and n != mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _part(mod: str) -> str:
    return mod.split(".")[0]


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_root_holds_only_api_errors_units_names():
    assert {p.stem for p in PKG.glob("*.py")} <= ROOT_MODULES
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(MAY_IMPORT) - ROOT_MODULES


def test_each_part_imports_only_what_the_map_allows():
    bad = []
    for mod, targets in _graph().items():
        part = _part(mod)
        if part in ROOT_MODULES - {"__init__", "__main__"}:
            allowed: set[str] = set()
        else:
            allowed = MAY_IMPORT[part]
        for t in targets:
            tp = _part(t)
            if tp == part or tp in ROOT_MODULES - {"__init__", "__main__"}:
                continue
            if tp not in allowed and t not in allowed:
                bad.append(f"{mod} -> {t}")
    assert bad == []


def test_graph_sees_relative_absolute_and_function_level_imports():
    g = _graph()
    assert "core.fit" in g["services.plan"] and "catalog.gpus" in g["core.fit"]
    assert "charts.validation" in g["validation.validate"]  # imported inside the function that plots
    assert "validation.validate" not in g["charts.validation"]  # the chart reads plain data
    src = ("from __future__ import annotations\nif TYPE_CHECKING:\n    from .a import b\n"
           "def f():\n    import c\n")
    assert [ast.unparse(n) for n in _imports(ast.parse(src))] == [
        "from __future__ import annotations", "from .a import b", "import c"]


def test_cli_runs_import_the_tree_under_test(tmp_path):
    """run_cli's bare environment puts this tree's src/ first: another installed cardfit is not what runs."""
    import subprocess
    import sys

    from .conftest import cli_env

    out = subprocess.run([sys.executable, "-c", "import cardfit; print(cardfit.__file__)"],
                         capture_output=True, text=True, timeout=60, env=cli_env(tmp_path), cwd=tmp_path,
                         check=True).stdout
    assert Path(out.strip()) == PKG / "__init__.py"
