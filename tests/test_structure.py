"""The package's structure: one-way imports, one place that picks the noise process.

Reads the source with ``ast`` (imports inside functions count too), so it needs
no JAX and runs in a fraction of a second.
"""
import ast
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "ddgjax"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """ddgjax module -> the ddgjax modules it imports (anywhere in its source)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: set() for m in files}
    for mod, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ddgjax"):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            graph[mod] |= {n for n in names if n in files and n != mod}
    return graph


def find_cycle(graph):
    state, stack = {}, []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in sorted(graph[u]):
            # a package importing its own submodules (re-exports) is not a cycle
            if v.startswith(u + "."):
                continue
            if state.get(v) == "open":
                return stack[stack.index(v):] + [v]
            if v not in state and (c := visit(v)):
                return c
        stack.pop()
        state[u] = "done"
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_no_import_cycles():
    assert find_cycle(import_graph()) is None


def test_training_and_sampling_do_not_import_each_other():
    g = import_graph()
    assert "ddgjax.sampling" not in g["ddgjax.training"]
    assert "ddgjax.training" not in g["ddgjax.sampling"]


def test_processes_import_only_graph_utilities_and_each_other():
    g = import_graph()
    for mod, deps in g.items():
        if mod.startswith("ddgjax.processes"):
            assert all(d == "ddgjax.graphs" or d.startswith("ddgjax.processes") for d in deps), \
                (mod, deps)


def test_only_the_registry_and_the_gaussian_module_name_the_gaussian_process():
    allowed = {PACKAGE / "processes" / "__init__.py", PACKAGE / "processes" / "gaussian.py"}
    offenders = [str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py")
                 if p not in allowed and ('"gaussian"' in p.read_text()
                                          or "'gaussian'" in p.read_text())]
    assert offenders == []


def test_only_the_registry_reads_the_process_kind():
    readers = [str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py")
               if "diffusion.kind" in p.read_text() or 'get("kind"' in p.read_text()]
    assert readers == ["ddgjax/processes/__init__.py"]


def test_only_checkpoints_imports_orbax():
    users = [str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if "import orbax" in p.read_text()]
    assert users == ["ddgjax/checkpoints.py"]


def test_no_docstring_cites_a_file_outside_the_repository():
    for p in list(PACKAGE.rglob("*.py")) + list((REPO / "configs").glob("*.py")):
        assert "REFERENCE.md" not in p.read_text(), p


def test_pyproject_installs_every_package_and_the_configs():
    """The wheel's package list (explicit, since configs/ is mapped into the package)
    names every directory of ddgjax/ that is a package, and configs as ddgjax.configs."""
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    tool = pyproject["tool"]["setuptools"]
    packages = set(tool["packages"])
    on_disk = {module_name(p.parent) for p in PACKAGE.rglob("__init__.py")}
    assert on_disk | {"ddgjax.configs"} == packages
    assert tool["package-dir"] == {"ddgjax.configs": "configs"}
    assert set(pyproject["project"]["scripts"]) == {"ddgjax-train", "ddgjax-sample",
                                                    "ddgjax-evaluate"}


def test_top_level_scripts_are_thin():
    for script in ("train.py", "sample.py"):
        text = (REPO / script).read_text()
        assert "sys.path" not in text and "from ddgjax.cli." in text


# The modules whose behaviour no environment variable may steer (the graph-tool
# interpreter and the compile-cache folder are read in ddgjax/metrics and ddgjax/cli).
STEERED_ONLY_BY_CONFIG = ("models", "kernels", "processes", "training", "sampling.py",
                          "sample_writer.py", "completion.py", "likelihood.py", "trained.py")


def test_no_environment_variable_steers_the_model_process_training_or_sampling():
    offenders = []
    for name in STEERED_ONLY_BY_CONFIG:
        path = PACKAGE / name
        for p in ([path] if path.suffix == ".py" else path.rglob("*.py")):
            if p.exists() and "os.environ" in p.read_text():
                offenders.append(str(p.relative_to(REPO)))
    assert offenders == []


def test_modules_stay_livable():
    """No module of ddgjax/ over 600 lines; the PPGN readable beside the paper (<= 300)."""
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines())
             for p in PACKAGE.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > 600} == {}
    assert sizes["ddgjax/models/ppgn.py"] <= 300


def test_no_lab_notebook_words_in_code_configs_or_docs():
    import re

    pattern = re.compile(r"\b(round|session) [0-9]", re.IGNORECASE)
    files = [*PACKAGE.rglob("*.py"), *(REPO / "configs").glob("*.py"), REPO / "README.md",
             *(REPO / "docs").glob("*.md")]
    assert [str(p.relative_to(REPO)) for p in files if pattern.search(p.read_text())] == []
