"""The import layers of gateway/, hooks_spec/ and s3rm/ (import-linter), and the checks on names beside them.

The layer order is declared once, in ``.importlinter`` at the repository root (README's layout
table describes the same packages); import-linter checks it — every import counts, top-level,
function-local and ``TYPE_CHECKING`` ones alike — with three contracts:

* imports point down the layers (a lower layer never imports a higher one),
* the gateway never imports ``s3rm``,
* no import cycle between sibling modules or packages.

``lint-imports`` from the repository root runs the same contracts. Third-party and
standard-library imports are outside the graph. Beside the contracts this module checks what
import-linter does not:

* no import cycle at all: the sibling contract misses one between a package's ``__init__`` and
  a module inside it, so the strongly connected components of the whole import graph (grimp's,
  the one import-linter builds) are checked too;
* every module sits in a declared layer (a new package is declared in ``.importlinter`` first);
* every ``from X import name`` takes ``name`` from the module that defines it
  (no re-exports; a package ``__init__`` that lists ``name`` in its ``__all__``
  is a deliberate API and counts as defining it);
* ``gateway/retrieval/`` holds at most :data:`RETRIEVAL_TOP_LEVEL_MAX` modules
  beside its subpackages;
* no module or package is named like a drawer (:data:`VAGUE_NAMES`).
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import grimp
import pytest
from importlinter import api as importlinter_api
from importlinter.application.use_cases import lint_imports

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "hooks_spec", "s3rm", "sync")
CONTRACTS = REPO / ".importlinter"


def _modules() -> dict[str, Path]:
    """Dotted module name → file, for every .py file of :data:`PACKAGES` (``pkg/__init__.py`` → ``pkg``)."""
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if all(part.isidentifier() for part in parts):  # skips gunicorn.conf.py-style files
                out[".".join(parts)] = path
    return out


MODULES = _modules()


def layers(config: Path = CONTRACTS) -> list[list[str]]:
    """The layers contract of ``config``, top first: each layer's modules (``a : b`` or ``a | b``)."""
    contracts = importlinter_api.read_configuration(str(config))["contracts_options"]
    (layered,) = [c for c in contracts if c["type"] == "layers"]
    return [[name.strip() for name in line.replace("|", ":").split(":")] for line in layered["layers"]]


def layer_of(module: str, declared: list[list[str]]) -> int | None:
    """Index (top first) of the layer holding ``module`` or one of its packages; ``None``: undeclared."""
    for index, names in enumerate(declared):
        if any(module == name or module.startswith(name + ".") for name in names):
            return index
    return None


def broken_contracts(config: Path) -> list[str]:
    """The ids of ``config``'s contracts that the code breaks (import-linter without its cache; the
    report of each goes to stdout, which pytest shows when a test fails)."""
    ids = [c["id"] for c in importlinter_api.read_configuration(str(config))["contracts_options"]]
    return sorted(i for i in ids if not lint_imports(str(config), limit_to_contracts=(i,), cache_dir=None,
                                                     no_logo=True))


def test_the_import_contracts_hold():
    origins = {package: importlib.util.find_spec(package).origin for package in PACKAGES}
    assert all(Path(origin).is_relative_to(REPO) for origin in origins.values()), \
        f"import-linter would read another checkout: {origins}"  # run with PYTHONPATH=<this checkout>
    assert lint_imports(str(CONTRACTS), cache_dir=None, no_logo=True), "broken contracts: see the report above"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """The import graph of :data:`PACKAGES` as import-linter sees it (every import, no cache)."""
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of ``graph`` with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.find_modules_directly_imported_by(node)):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph.modules):
        if node not in index:
            visit(node)
    return sorted(components)


def test_no_import_cycles(graph):
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_every_module_is_in_a_declared_layer(graph):
    """A package ``__init__`` above every layer (``gateway``, ``gateway.retrieval``, ``s3rm``) imports nothing
    of ours, so leaving it out of the layers hides no edge."""
    declared = layers()
    outside = sorted(m for m in MODULES if layer_of(m, declared) is None)
    undeclared = [m for m in outside if MODULES[m].name != "__init__.py" or graph.find_modules_directly_imported_by(m)]
    assert not undeclared, f"declare the layer of these modules in .importlinter: {undeclared}"


# ------------------------------------------------------------- names and where they come from
def bound_names(path: Path) -> tuple[set[str], set[str]]:
    """Names ``path`` binds at module level other than by importing them, and its ``__all__``.

    Definitions, classes and assignment targets count, also inside top-level ``if``/``try``/``with``
    blocks; ``import`` and ``from … import`` bindings do not (those names are defined elsewhere).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    defined: set[str] = set()
    exported: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
                continue
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                    exported.update(ast.literal_eval(node.value))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
                targets = [node.target]
            elif isinstance(node, ast.With):
                targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
            defined.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            for block in ("body", "orelse", "finalbody"):
                visit(getattr(node, block, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                visit(handler.body)

    visit(tree.body)
    return defined, exported


def misplaced_imports(modules: dict[str, Path]) -> list[str]:
    """``path:line: name from X`` for every ``from X import name`` whose X (a known module) does not define name."""
    names = {module: bound_names(path) for module, path in modules.items()}
    found: list[str] = []
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if node.level:
                parts = package.split(".")
                source = ".".join(parts[: len(parts) - (node.level - 1)] + ([source] if source else []))
            if source not in modules:
                continue
            defined, exported = names[source]
            api = exported if modules[source].name == "__init__.py" else set()
            found.extend(
                f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{node.lineno}: {alias.name} from {source}"
                for alias in node.names
                if alias.name != "*" and f"{source}.{alias.name}" not in modules
                and alias.name not in defined and alias.name not in api
            )
    return sorted(found)


#: Module names that say where code was put, not what it is.
VAGUE_NAMES = frozenset({"common", "parts", "base", "utils", "misc"})
#: Packages held to :data:`VAGUE_NAMES`: all of them.
NAMED_PACKAGES = PACKAGES
#: Modules at most at the top of ``gateway/retrieval/`` beside its subpackages (``__init__`` not counted).
RETRIEVAL_TOP_LEVEL_MAX = 8


def test_every_from_import_takes_the_name_from_its_defining_module():
    misplaced = misplaced_imports(MODULES)
    assert not misplaced, "import these names from the module that defines them:\n" + "\n".join(misplaced)


def test_retrieval_keeps_few_modules_beside_its_subpackages():
    top = sorted(p.name for p in (REPO / "gateway" / "retrieval").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= RETRIEVAL_TOP_LEVEL_MAX, f"gateway/retrieval/ top level: {top}"


def test_no_module_or_package_is_named_like_a_drawer():
    vague = sorted(m for m in MODULES if m.split(".")[0] in NAMED_PACKAGES and set(m.split(".")) & VAGUE_NAMES)
    assert not vague, f"name these after what they hold: {vague}"


# ------------------------------------------------------------- the checker itself
def test_import_linter_sees_local_relative_and_type_checking_imports_and_cycles(tmp_path, monkeypatch):
    """The contract types .importlinter uses, on a throwaway package: an upward import inside a function
    and one under ``TYPE_CHECKING`` break the layers, and they close a cycle."""
    package = tmp_path / "layered"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "high.py").write_text("from . import low\n", encoding="utf-8")
    (package / "low.py").write_text("VALUE = 1\n", encoding="utf-8")
    config = tmp_path / "contracts.ini"
    config.write_text(
        "[importlinter]\nroot_packages =\n    layered\n"
        "[importlinter:contract:layers]\nname = layers\ntype = layers\nlayers =\n    layered.high\n    layered.low\n"
        "[importlinter:contract:acyclic]\nname = acyclic\ntype = acyclic_siblings\nancestors =\n    layered\n",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert broken_contracts(config) == []
    assert layers(config) == [["layered.high"], ["layered.low"]]
    assert layer_of("layered.low", layers(config)) == 1 and layer_of("other", layers(config)) is None
    (package / "low.py").write_text("def f():\n    import layered.high\n", encoding="utf-8")
    assert broken_contracts(config) == ["acyclic", "layers"]
    (package / "low.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from layered import high\n",
                                    encoding="utf-8")
    assert broken_contracts(config) == ["acyclic", "layers"]


def test_the_cycle_check_sees_a_package_and_its_own_module(tmp_path, monkeypatch):
    """The cycle ``acyclic_siblings`` misses: ``pkg/__init__`` imports ``pkg.child``, which imports ``pkg``."""
    package = tmp_path / "cyclic"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "inner" / "__init__.py").write_text("from cyclic.inner.child import VALUE\n", encoding="utf-8")
    (package / "inner" / "child.py").write_text("VALUE = 1\n", encoding="utf-8")
    (package / "other.py").write_text("from cyclic.inner import VALUE\n", encoding="utf-8")
    config = tmp_path / "contracts.ini"
    config.write_text("[importlinter]\nroot_packages =\n    cyclic\n"
                      "[importlinter:contract:acyclic]\nname = acyclic\ntype = acyclic_siblings\nancestors =\n"
                      "    cyclic\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles(grimp.build_graph("cyclic", cache_dir=None)) == []
    (package / "inner" / "child.py").write_text("def f():\n    from cyclic.inner import VALUE\nVALUE = 1\n",
                                                encoding="utf-8")
    assert broken_contracts(config) == []  # the contract alone lets it through
    assert import_cycles(grimp.build_graph("cyclic", cache_dir=None)) == [["cyclic.inner", "cyclic.inner.child"]]


def test_the_name_check_sees_re_exports_and_accepts_package_apis(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text('from pkg.defs import api\n__all__ = ["api"]\n', encoding="utf-8")
    (package / "defs.py").write_text("import os\nVALUE = 1\ndef api():\n    pass\nif os.sep:\n    LATE = 2\n",
                                     encoding="utf-8")
    (package / "shim.py").write_text("from pkg.defs import VALUE, api\n", encoding="utf-8")
    (package / "user.py").write_text(
        "from pkg import api, defs\nfrom pkg.defs import LATE, VALUE\nfrom pkg.shim import VALUE as V, api as a\n"
        "from pkg.defs import os\n", encoding="utf-8")
    modules = {"pkg": package / "__init__.py", **{f"pkg.{n}": package / f"{n}.py" for n in ("defs", "shim", "user")}}
    found = [line.split(": ", 1)[1] for line in misplaced_imports(modules)]
    assert found == ["VALUE from pkg.shim", "api from pkg.shim", "os from pkg.defs"]


def test_the_declared_order_puts_the_gateway_below_the_cli_and_core_at_the_bottom():
    declared = layers()
    assert layer_of("gateway.core.errors", declared) == len(declared) - 1
    assert layer_of("gateway.ops.gate", declared) > layer_of("gateway.tools.dispatcher", declared)
    assert layer_of("gateway.serving.wsgi", declared) < layer_of("gateway.app", declared)
    assert layer_of("s3rm.devstack.stack", declared) < layer_of("gateway.serving.wsgi", declared)
