"""The import layers of gateway/, hooks_spec/ and s3rm/, declared once and checked on every module.

:data:`LAYERS` is the one declaration of the layer order (bottom first; README's
layout table describes the same packages). The test parses every module with
``ast`` and collects every import it contains — top-level, function-local and
``TYPE_CHECKING`` ones alike, since each is a dependency — then fails on

* a module that no layer claims (declare a new package here first),
* an edge that points up the order (a lower layer importing a higher one),
* any import of ``s3rm`` from ``gateway`` (the gateway never needs the CLI), and
* any import cycle between modules, also inside one layer.

Third-party and standard-library imports are ignored. Three checks on names sit
beside the layers:

* every ``from X import name`` takes ``name`` from the module that defines it
  (no re-exports; a package ``__init__`` that lists ``name`` in its ``__all__``
  is a deliberate API and counts as defining it);
* ``gateway/retrieval/`` holds at most :data:`RETRIEVAL_TOP_LEVEL_MAX` modules
  beside its subpackages;
* no module or package is named like a drawer (:data:`VAGUE_NAMES`).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "hooks_spec", "s3rm")

#: The layer order, bottom to top. Each entry lists the module prefixes of one layer;
#: a module belongs to the layer of its longest matching prefix and may import only
#: from its own layer or lower ones.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("gateway.core",),            # errors and codes, JSON encoding + the JSON response helper, Principal
    ("gateway.config",),          # the one configuration object (load_config), the schema source, embedding profiles
    ("gateway.domain",),          # domain rules over plain data, page codec
    ("hooks_spec",),              # the save rules as data + the checker (gateway and auditor share it)
    ("gateway.ops",),             # metrics, the bounded-queue gate, admission, rate limits, access rules
    ("gateway.wiki",),            # the MediaWiki Action API client and the Lesson repository over it
    ("gateway.retrieval.language",),   # Hangul and query-language detection (imports nothing of the gateway)
    ("gateway.retrieval.embedding",),  # the embedding client: errors, gate and breaker, vector memo and cache
    ("gateway.retrieval.index",),      # the in-process index: records, segments, BM25, snapshot, backend, analyzer
    ("gateway.retrieval.filters",),    # search filters and scopes, the index pre-filter
    ("gateway.retrieval.legacy",),     # legacy search over MediaWiki full text and its query terms
    ("gateway.retrieval.indexing",),   # projection, quality, semantic state, refresher, change follower, progress
    ("gateway.retrieval.hybrid",),     # the retrieval service, fusion, channels, cross-language, shadow, duplicates
    ("gateway.retrieval.pgvector", "gateway.retrieval"),  # the shared pgvector backend (top of retrieval)
    ("gateway.tools",),           # one module per tool, contract, read path, cursors, shaping, registry, dispatcher
    ("gateway.auth",),            # github mode: OAuth authorization server, GitHub upstream, token checks
    ("gateway.transport",),       # MCP Streamable HTTP: JSON-RPC, headers, protocol versions
    ("gateway.web",),             # HTTP routes outside MCP: browser JSON, health probes, /metrics
    ("gateway.app",),             # create_app(config) wires everything
    ("gateway.serving", "gateway"),  # gunicorn settings, worker and wsgi (top of the gateway)
    ("s3rm.errors",),             # the CLI's exception root and its one error type (CliError)
    ("s3rm.settings",),           # the CLI's one settings reader (environment, then the .dev files)
    ("s3rm.schema",),             # schema generation (walks the gateway.tools registry)
    ("s3rm.devstack",),           # development wiki and stack
    ("s3rm.mcpsearch",),          # the MCP search client the admin commands share
    ("s3rm.site", "s3rm.importing", "s3rm.audit", "s3rm.evaluate", "s3rm.research", "s3rm.collect",
     "s3rm.index", "s3rm.auth"),  # push/diff/check and page sets; one package per admin command
    ("s3rm.cli", "s3rm"),         # the s3rm entry point (verbs = admin verbs)
)


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


def _resolve(name: str) -> str | None:
    """The known module ``name`` refers to (its longest known prefix), or ``None`` for outside code."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path) -> set[str]:
    """Every known module ``module`` imports anywhere in its body (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` the module mod
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found.update(t for t in map(_resolve, targets) if t is not None)
    found.discard(module)
    return found


GRAPH = {module: imports_of(module, path) for module, path in MODULES.items()}


def layer_of(module: str) -> int | None:
    """Index in :data:`LAYERS` of the longest prefix matching ``module`` (``None``: undeclared)."""
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    return None if best is None else best[1]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_every_module_is_in_a_declared_layer():
    undeclared = sorted(m for m in MODULES if layer_of(m) is None)
    assert not undeclared, f"declare the layer of these modules in tests/test_layers.py LAYERS: {undeclared}"


def test_imports_point_down_the_layers():
    upward = sorted(
        f"{source} (layer {LAYERS[layer_of(source)][0]}) imports {target} (layer {LAYERS[layer_of(target)][0]})"
        for source, targets in GRAPH.items()
        for target in targets
        if layer_of(source) is not None and layer_of(target) is not None and layer_of(target) > layer_of(source)
    )
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_gateway_never_imports_s3rm():
    edges = sorted(f"{s} imports {t}" for s, ts in GRAPH.items() if s.split(".")[0] == "gateway"
                   for t in ts if t.split(".")[0] == "s3rm")
    assert not edges, "\n".join(edges)


def test_no_import_cycles():
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


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
def test_the_parser_sees_local_relative_and_type_checking_imports(tmp_path, monkeypatch):
    source = tmp_path / "gateway" / "ops" / "example.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import gate\n"
        "if TYPE_CHECKING:\n    from gateway.tools import dispatcher\n"
        "def f():\n    import gateway.app\n",
        encoding="utf-8",
    )
    monkeypatch.setitem(MODULES, "gateway.ops.example", source)
    assert imports_of("gateway.ops.example", source) == {"gateway.ops.gate", "gateway.tools.dispatcher", "gateway.app"}


def test_cycles_and_upward_edges_are_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert layer_of("gateway.ops.gate") < layer_of("gateway.tools.dispatcher")
    assert layer_of("gateway.serving.wsgi") > layer_of("gateway.app")
    assert layer_of("s3rm.devstack.stack") > layer_of("gateway.serving.wsgi")
    assert layer_of("unknown.module") is None


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


@pytest.mark.parametrize("module", ["gateway.core", "gateway.config", "gateway.ops.gate", "gateway.retrieval.language"])
def test_the_bottom_layers_import_nothing_above_them(module):
    assert all(layer_of(t) <= layer_of(module) for t in GRAPH[module])
