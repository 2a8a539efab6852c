"""The build: pure Python, or with ``PTXKIT_COMPILE=1`` the typed core compiled by mypyc.

pyproject.toml declares the project; this file only adds the compiled modules
(docs/architecture.md §5). ``pip install -e ".[dev]"`` and a plain ``pip install .`` stay
pure Python and need no C compiler. ``PTXKIT_COMPILE=1 pip install .`` (or ``pip wheel``)
compiles `COMPILED_MODULES` (the build backend, build_backend.py, asks for mypy, which
carries mypyc); the ``.py`` files ship beside the extension modules, which Python imports
first. The modules are grouped into two shared libraries (`GROUPS`);
``PTXKIT_COMPILE_JOBS`` sets how many extension modules are built at once (default: all
cores). An editable install is never compiled.

mypyc names a module after its path, and the source tree is not laid out as the package
(``ptxkit.cfg`` lives in ``cfg/``, pyproject's ``package-dir``), so the sources are copied
into ``build/compiled-src``, laid out as the installed package, and compiled from there.

>>> "ptxkit.cfg.values.registers" in COMPILED_MODULES, "ptxkit.cfg.fence.fence" in COMPILED_MODULES
(True, False)
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

from setuptools import Distribution, Extension, setup
from setuptools.command.build_ext import build_ext

REPO = Path(__file__).resolve().parent
#: Where a compiled build lays out its sources, and mypyc writes its C.
STAGED = REPO / "build" / "compiled-src"
COMPILING = os.environ.get("PTXKIT_COMPILE") == "1"
#: The setup.py commands that build extension modules (pip runs ``bdist_wheel``).
BUILDS = {"build", "build_ext", "bdist_wheel", "install"}

#: The modules a compiled build compiles: the core's modules that pass ``mypy --strict``
#: (tests/test_typing.py), less those that stay interpreted: ``ptxkit._records`` (its run-time
#: half is the ``else`` of ``if TYPE_CHECKING``), the protocols modules and the packages'
#: ``__init__`` (nothing runs there), ``cfg.fence.fence`` (`FenceOptions` subclasses a record,
#: which mypyc cannot compile), ``cfg.fence.dot`` (drawings, not the pass) and the parser's tree
#: (``ptxkit.syntax``, whose node classes a rewriting pass may subclass or give attributes, and
#: ``ptxkit.parser``, which builds them). Of the parser, what the pass calls for every
#: instruction it reads (``ptxkit.instruction``, ``declarations``) is compiled.
COMPILED_MODULES = (
    "ptxkit.isa", "ptxkit.isa_eval", "ptxkit.instruction", "ptxkit.declarations",
    "ptxkit.cfg.flow.graph", "ptxkit.cfg.flow.inline", "ptxkit.cfg.flow.dominance", "ptxkit.cfg.flow.loops",
    "ptxkit.cfg.flow.dataflow", "ptxkit.cfg.flow.ssa", "ptxkit.cfg.flow.operands",
    "ptxkit.cfg.values.values", "ptxkit.cfg.values.arithmetic", "ptxkit.cfg.values.idioms",
    "ptxkit.cfg.values.frames", "ptxkit.cfg.values.symbols", "ptxkit.cfg.values.specials",
    "ptxkit.cfg.values.escape", "ptxkit.cfg.values.definitions", "ptxkit.cfg.values.divergence", "ptxkit.cfg.values.thread_sets",
    "ptxkit.cfg.values.conditions", "ptxkit.cfg.values.counters", "ptxkit.cfg.values.lanes",
    "ptxkit.cfg.values.trips", "ptxkit.cfg.values.registers",
    "ptxkit.cfg.sync.locations", "ptxkit.cfg.sync.events", "ptxkit.cfg.sync.phases", "ptxkit.cfg.sync.once",
    "ptxkit.cfg.sync.armed", "ptxkit.cfg.sync.groups",
    "ptxkit.cfg.fence.options", "ptxkit.cfg.fence.proxy", "ptxkit.cfg.fence.placement",
)


#: The shared libraries the compiled modules are grouped into (`compiled_groups`): one
#: for the value analysis (``ptxkit.cfg.values``), one for the rest, built side by side on
#: two cores. A shared library per module (mypyc's ``separate=True``) made a process
#: load and initialise 35 of them: a process that imports the pass took 57 ms instead of
#: 45 (with the pure tree's bytecode: 40), measured here; the pass runs as fast either way.
GROUPS = {"ptxkit._native_values": "ptxkit.cfg.values.", "ptxkit._native_core": ""}


def compiled_groups(modules: tuple[str, ...] = COMPILED_MODULES) -> list[tuple[list[str], str | None]]:
    """mypyc's ``separate`` groups: each module's source path in the first of `GROUPS`
    whose prefix its name has (``""``: every module).

    >>> [(len(paths), name) for paths, name in compiled_groups()]
    [(15, 'ptxkit._native_values'), (20, 'ptxkit._native_core')]
    >>> compiled_groups(("ptxkit.isa",))
    [(['ptxkit/isa.py'], 'ptxkit._native_core')]
    """
    groups: dict[str, list[str]] = {}
    for module in modules:
        name = next(group for group, prefix in GROUPS.items() if module.startswith(prefix))
        groups.setdefault(name, []).append(module.replace(".", "/") + ".py")
    return [(groups[name], name) for name in GROUPS if name in groups]


def stale_libraries(build_lib: Path, built: set[Path]) -> list[Path]:
    """The mypyc shared libraries under `build_lib` that this build does not make (`built`):
    an earlier build's, grouped otherwise, which setuptools would pack into the wheel.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     lib = Path(folder)
    ...     for name in ("ptxkit/_native_core__mypyc.so", "ptxkit/isa__mypyc.so", "ptxkit/isa.so"):
    ...         (lib / name).parent.mkdir(exist_ok=True); (lib / name).touch()
    ...     [p.name for p in stale_libraries(lib, {lib / "ptxkit/_native_core__mypyc.so"})]
    ['isa__mypyc.so']
    """
    return sorted(path for path in build_lib.rglob("*__mypyc*") if path not in built)


def staged_tree(root: Path) -> Path:
    """A copy of every package's ``.py`` files under `root`, each at its dotted name's place.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     tree = staged_tree(Path(folder))
    ...     (tree / "ptxkit/cfg/values/registers.py").read_bytes() == (REPO / "cfg/values/registers.py").read_bytes()
    True
    """
    setuptools_table = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = setuptools_table["package-dir"]
    shutil.rmtree(root, ignore_errors=True)
    for package in setuptools_table["packages"]:
        parent = max((name for name in folders if package == name or package.startswith(name + ".")), key=len)
        source = REPO / folders[parent] / package[len(parent) + 1:].replace(".", "/")
        place = root.joinpath(*package.split("."))
        place.mkdir(parents=True, exist_ok=True)
        for file in source.glob("*.py"):
            shutil.copy2(file, place / file.name)
    return root


def compiled_extensions() -> list[Extension]:
    """mypyc's extension modules for `COMPILED_MODULES`, compiled from a `staged_tree`: a
    shim per module and a shared library per group (`compiled_groups`)."""
    from mypyc.build import mypycify

    groups = compiled_groups()
    paths = [path for group, _ in groups for path in group]
    os.chdir(staged_tree(STAGED))  # mypy then finds the package there, not this tree's ptxkit/
    try:
        extensions = mypycify(["--strict", "--follow-imports", "silent", *paths], separate=groups,
                              target_dir=str(STAGED / "c"))
    finally:
        os.chdir(REPO)
    for extension in extensions:  # absolute: setuptools compiles from REPO
        extension.sources = [str(STAGED / source) for source in extension.sources]
        extension.include_dirs = [str(STAGED / folder) for folder in extension.include_dirs]
    return extensions


class CompilingDistribution(Distribution):
    """Has extension modules when compiling, before they are made: the wheel is then
    tagged for this platform, and ``build_ext`` runs."""

    def has_ext_modules(self) -> bool:
        return COMPILING or super().has_ext_modules()


class CompilingBuildExt(build_ext):
    """Makes the extension modules when the command builds, not when pip only asks for the
    requirements or the metadata (which finalizes this command too): by then the build
    backend has installed mypy."""

    def finalize_options(self) -> None:
        if COMPILING and BUILDS & set(self.distribution.commands) and not self.distribution.ext_modules:
            self.distribution.ext_modules = compiled_extensions()
            self.parallel = self.parallel or int(os.environ.get("PTXKIT_COMPILE_JOBS", os.cpu_count() or 1))
        super().finalize_options()

    def run(self) -> None:
        if COMPILING and self.extensions:
            built = {Path(self.get_ext_fullpath(extension.name)).resolve() for extension in self.extensions}
            for path in stale_libraries(Path(self.build_lib).resolve(), built):
                path.unlink()
        super().run()


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import it
    setup(distclass=CompilingDistribution, cmdclass={"build_ext": CompilingBuildExt})
