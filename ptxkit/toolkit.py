"""Where NVIDIA's command-line tools are: ptxas and cuobjdump, looked up the same way.

For a tool (``ptxas``, ``cuobjdump``) ptxkit looks in this order: the environment
variable named after it (``$PTXAS``, ``$CUOBJDUMP``), ``$CUDA_HOME/bin``,
``$CUDA_PATH/bin``, each directory on ``PATH``, then ``cuda.pathfinder``, which finds the
NVIDIA wheels (``nvidia-cuda-nvcc`` ships ptxas, ``nvidia-cuda-cuobjdump`` cuobjdump;
``pip install "ptxkit[toolkit]"`` installs both). This module imports nothing else, so
the ptxas wrapper can start ptxas before anything heavy is loaded.

>>> import os, unittest.mock
>>> with unittest.mock.patch.dict(os.environ, {"CUOBJDUMP": "/opt/cuobjdump", "PATH": "/a"}, clear=True):
...     list(tool_candidates("cuobjdump"))[:2]
[('$CUOBJDUMP', '/opt/cuobjdump'), ('PATH', '/a/cuobjdump')]
"""

from __future__ import annotations

import os

_SUFFIX = ".exe" if os.name == "nt" else ""


def variable_of(tool: str) -> str:
    """The environment variable that names `tool` explicitly.

    >>> variable_of("ptxas"), variable_of("cuobjdump")
    ('PTXAS', 'CUOBJDUMP')
    """
    return tool.upper()


def tool_candidates(tool: str):
    """Every place ptxkit looks for `tool`, in order, as ``(where, path)``: ``$TOOL``,
    ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, each directory on ``PATH``, then
    ``cuda.pathfinder`` (path None when it is installed but knows no such tool). Unset
    variables and a missing cuda.pathfinder give nothing.

    >>> import os, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, {"CUDA_HOME": "/cuda", "PATH": ""}, clear=True):
    ...     next(tool_candidates("ptxas"))
    ('$CUDA_HOME/bin', '/cuda/bin/ptxas')
    """
    variable = variable_of(tool)
    explicit = os.environ.get(variable)
    if explicit:
        yield f"${variable}", explicit
    executable = tool + _SUFFIX
    for root_variable in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(root_variable)
        if root:
            yield f"${root_variable}/bin", os.path.join(root, "bin", executable)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if directory:
            yield "PATH", os.path.join(directory, executable)
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:
        return
    yield "cuda.pathfinder", find_nvidia_binary_utility(tool) or None


def is_executable(path: str) -> bool:
    """True for an existing file this process may execute.

    >>> import sys
    >>> is_executable(sys.executable), is_executable("/nonexistent/ptxas")
    (True, False)
    """
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_tool(tool: str, how_to_get: str) -> str:
    """The first executable candidate for `tool`; FileNotFoundError saying where ptxkit
    looked (and `how_to_get` it) when there is none, or when ``$TOOL`` names no
    executable.

    >>> import os, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, {"PATH": "", "CUOBJDUMP": "/nonexistent/cuobjdump"}):
    ...     find_tool("cuobjdump", "install it")
    Traceback (most recent call last):
    FileNotFoundError: $CUOBJDUMP is '/nonexistent/cuobjdump', which is not an executable file; install it
    """
    variable = f"${variable_of(tool)}"
    looked: dict[str, str] = {}
    for where, path in tool_candidates(tool):
        if path is not None and is_executable(path):
            return path
        if where == variable:
            raise FileNotFoundError(f"{variable} is {path!r}, which is not an executable file; {how_to_get}")
        looked.setdefault(where, "not found" if path else f"no NVIDIA wheel or toolkit with {tool}")
    notes = [f"{where} ({looked.get(where, 'not set')})" for where in (variable, "$CUDA_HOME/bin", "$CUDA_PATH/bin")]
    notes.append(f"PATH ({looked.get('PATH', 'not set')})")
    notes.append(f"cuda.pathfinder ({looked.get('cuda.pathfinder', 'not installed')})")
    raise FileNotFoundError(f"{tool} not found; ptxkit looked in " + "; ".join(notes) + f". To get it, {how_to_get}")
