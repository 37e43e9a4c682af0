"""The import graph of skdpvi: no circles, and every package imports only its layers.

The graph is read from the import statements of every ``skdpvi/**/*.py`` (lazy
imports inside functions included, relative imports resolved), not from what
happens to be loaded, so adding a forbidden or circular import fails here at once.
See doc/architecture.rst for the layers.
"""

import ast
from pathlib import Path

import skdpvi

ROOT = Path(skdpvi.__file__).resolve().parent

# The data flow, models <- dpvi <- noise_aware <- posterior <- linear_model, with
# accounting, metrics, datasets, plotting and integrations standing apart: each package and the
# packages it may import. The top-level skdpvi/__init__.py may import anything;
# nothing may import it.
LAYERS = {
    "utils": set(),
    "exceptions": set(),
    "accounting": {"utils"},
    "models": {"utils"},
    "dpvi": {"models", "utils"},
    "noise_aware": {"dpvi", "models", "exceptions", "utils"},
    "posterior": {"noise_aware", "dpvi", "models", "utils"},
    "linear_model": {"posterior", "noise_aware", "dpvi", "models", "accounting",
                     "exceptions", "utils"},
    "privacy_audit": {"accounting", "dpvi", "models", "utils"},
    "metrics": {"utils"},
    "datasets": {"utils"},
    "plotting": {"metrics", "utils"},
    "integrations": {"utils"},
}


def _modules():
    """{dotted module name: path} of every module of skdpvi."""
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imported(node, name, is_package, modules):
    """The skdpvi modules an Import or ImportFrom node imports, relative ones resolved.

    ``from package import module`` imports the module; ``from module import name``
    the module that defines the name.
    """
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            package = name.split(".") if is_package else name.split(".")[:-1]
            base = ".".join(package[: len(package) - (node.level - 1)]
                            + ([node.module] if node.module else []))
        else:
            base = node.module
        names = [f"{base}.{alias.name}" for alias in node.names]
        if not all(n in modules for n in names):
            names.append(base)
    return [n for n in names if n in modules]


def _import_graph():
    """{module: {imported skdpvi module: (file, line)}} from the import statements."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node, name, path.name == "__init__.py", modules):
                    if target != name:
                        edges.setdefault(target, (path.relative_to(ROOT.parent), node.lineno))
    return graph


def _package(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "skdpvi"


def _find_cycle(graph):
    """A list of nodes forming a cycle of the directed graph, or None."""
    state = {}  # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_every_package_has_a_layer():
    packages = {_package(m) for m in _modules()} - {"skdpvi"}
    assert packages <= set(LAYERS), f"place {sorted(packages - set(LAYERS))} in LAYERS"


def test_the_layers_themselves_have_no_circle():
    assert _find_cycle(LAYERS) is None


def test_every_package_imports_only_the_layers_below_it():
    wrong = []
    for module, edges in _import_graph().items():
        source = _package(module)
        for target, (path, line) in edges.items():
            dest = _package(target)
            if dest == source:
                continue
            if source == "skdpvi":
                continue  # the top-level __init__ re-exports the estimators
            if dest == "skdpvi" or dest not in LAYERS.get(source, set()):
                wrong.append(f"{path}:{line}: {source} imports {target}")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_no_import_circle_between_packages():
    packages = {}
    for module, edges in _import_graph().items():
        source = _package(module)
        packages.setdefault(source, set()).update(
            _package(t) for t in edges if _package(t) != source)
    assert _find_cycle(packages) is None, _find_cycle(packages)


def test_no_import_circle_between_modules():
    graph = {m: set(edges) for m, edges in _import_graph().items()}
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph))


def test_the_accounting_imports_nothing_but_utils():
    for module, edges in _import_graph().items():
        if _package(module) == "accounting":
            assert {_package(t) for t in edges} <= {"accounting", "utils"}, (module, edges)


def test_the_checks_see_relative_imports_and_circles():
    graph = _import_graph()
    assert "skdpvi.models.base" in graph["skdpvi.dpvi.loop"]  # from ..models.base import
    assert "skdpvi.dpvi.loop" in graph["skdpvi.dpvi.batched"]  # from .loop import
    assert "skdpvi.dpvi.loop" in graph["skdpvi.dpvi"]  # the package's __init__
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
