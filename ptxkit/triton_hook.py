"""ptxkit inside Triton's compiler: every kernel's PTX fenced (or checked) in the
compiling process, through Triton's own hook for custom pipeline stages.

    import ptxkit.triton_hook
    ptxkit.triton_hook.install()               # PTXKIT_FENCE_MODE, or fence by default
    ptxkit.triton_hook.install(mode="check")   # warn about missing fences, change nothing

`install` sets ``triton.knobs.runtime.add_stages_inspection_hook`` (keeping a hook that
was there before, which still runs first). Triton calls it while it builds a kernel's
pipeline; the hook wraps the ``ptx`` stage, so the PTX Triton generates goes through
the fence pass before Triton's own ptxas sees it: no second process, no
``TRITON_PTXAS_PATH``. Modes are the ptxas wrapper's: ``fence`` inserts the missing
``fence.proxy.async``; ``check`` prints ``<triton NAME>:line:col: warning: missing …
[ptxkit]`` and keeps the PTX; ``off`` takes the hook out (`uninstall`).

**Instrumentation.** ``install(passes=["timeline --buffer last"])`` (or ``count``)
records into each kernel's last parameter, Triton's profile scratch, and sets the
kernel's ``profile_scratch_size`` so that Triton's launcher allocates that buffer, one
region per CTA, at every launch, from its profile allocator. `recording` installs one
that keeps the buffers, as zero-filled torch tensors, and decodes them:

    ptxkit.triton_hook.install(passes=["timeline --buffer last --capacity 512"])
    with ptxkit.triton_hook.recording() as recorded:
        compiled = kernel[grid](x, y, n, BLOCK=1024)
    trace = recorded.decode(compiled)        # a ptxkit.trace.Trace (Counts for count)
    recorded.buffers[-1]                     # the torch.uint8 tensor the kernel wrote

What was added is in `Hook.log` (one entry per kernel compiled in this process: kernel,
mode, fences with their reasons, seconds spent), in ``PTXKIT_FENCE_LOG`` when set (the
wrapper's JSON lines, ``file`` being ``<triton NAME>`` and ``kernels`` the ``.entry``
names), and in the compiled kernel's metadata (``kernel.metadata.ptxkit``), which
Triton's cache keeps with the kernel.

When the pass cannot run on a kernel's PTX (PTX it cannot read, or a bug in ptxkit), the
compile fails with `FencePassError`: a kernel that was meant to be fenced is never built
without its fences. ``install(on_error="ptxas")`` (or ``PTXKIT_ON_ERROR=ptxas``) compiles
such a kernel as Triton made it instead, with a warning on standard error.

``install(passes=[...])`` (or ``PTXKIT_PASSES``, comma-separated) runs rewrite passes
on each kernel's PTX first (specs or functions: `ptxkit.rewrite.pipeline`); the mode
then says what the fence pass does after them (``off`` with passes: passes only). The
metadata names the passes, the kernel parameters they added and each pass's ``info``.
Triton's launcher passes only Triton's own arguments, so a pass for Triton kernels keeps
what it records in a module variable rather than a new parameter. A pass that fails is
an error as `on_error` says, like the fence pass.

Triton's cache key holds ptxkit's version (and a digest of its source), the mode and the
pass's options: a kernel compiled under one mode is a cache hit under the same mode and
is compiled again under another. Triton from 3.7 asks the hook for that key itself;
for Triton 3.6, which does not, `install` adds the hook's key to the two places Triton
3.7 adds it (the on-disk key and the in-memory key of ``@triton.jit`` functions).

>>> hook = Hook("check")
>>> hook.mode, hook.cache_key()[0].startswith("ptxkit-")
('check', True)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time

MODES = ("fence", "check", "off")
#: what a kernel the pass cannot run on gets: a failed compile, or Triton's PTX unfenced
ON_ERROR = ("fail", "ptxas")


class FencePassError(RuntimeError):
    """The fence pass could not run on a kernel's PTX, so the kernel is not compiled
    (``install(on_error="ptxas")`` compiles it without the pass instead).

    >>> raise FencePassError("<triton k>:12:5: the proxy-fence pass cannot read this PTX: …")
    Traceback (most recent call last):
    ptxkit.triton_hook.FencePassError: <triton k>:12:5: the proxy-fence pass cannot read this PTX: …
    """


class Hook:
    """Triton's ``add_stages_inspection_hook``: called with no arguments it returns the
    cache key part ``(key, hash)``; called with ``(backend, stages, options, language,
    capability)`` it wraps ``stages["ptx"]``.

    >>> stages = {"ptx": lambda src, metadata: src}
    >>> Hook("fence")(None, stages, None, None, 90)
    >>> ptx = ".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    >>> metadata = {"name": "k"}
    >>> stages["ptx"](ptx, metadata) == ptx, metadata["ptxkit"]["fences"]
    (True, [])
    """

    def __init__(self, mode: str, options=None, previous=None, on_error: str = "fail", passes=()):
        from ptxkit.cfg.fence.fence import FenceOptions
        from ptxkit.rewrite.pipeline import load_pass

        if mode not in ("fence", "check") and not (mode == "off" and passes):
            raise ValueError(f"mode must be fence or check (off: uninstall), not {mode!r}")
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}, not {on_error!r}")
        self.mode = mode
        self.options = options if options is not None else FenceOptions()
        self.previous = previous
        self.on_error = on_error
        self.passes = [load_pass(spec) for spec in passes]
        self.log: list[dict] = []

    def __call__(self, *args):
        if not args:
            return self.cache_key()
        backend, stages, options, language, capability = args
        if self.previous is not None:
            self.previous(*args)
        make_ptx = stages.get("ptx")
        if make_ptx is not None:
            stages["ptx"] = lambda src, metadata: self.process(make_ptx(src, metadata), metadata)
        return None

    def cache_key(self) -> tuple[str, str]:
        """``(key, hash)`` for Triton's cache: ptxkit's version and source digest, the
        mode, the pass's options and `on_error` (a kernel compiled unfenced under
        ``ptxas`` is never a hit under ``fail``), and the previous hook's key, if it
        gives one."""
        from ptxkit import __version__

        key = f"ptxkit-{__version__}-{_source_digest()}-{self.mode}-{self.options!r}-on-error-{self.on_error}"
        if self.passes:
            key += "-passes:" + ",".join(f"{spec.name}{spec.options}@{_function_digest(spec.function)}"
                                         for spec in self.passes)
        if self.previous is not None:
            try:
                key += "+" + str(self.previous()[0])
            except TypeError:  # a hook of Triton 3.6's kind: it gives no key
                pass
        return key, hashlib.sha256(key.encode()).hexdigest()

    def process(self, ptx: str, metadata: dict) -> str:
        """Fence (or check) one kernel's PTX; records what was done and returns the PTX
        ptxas gets. Raises `FencePassError` when the pass cannot run (unless `on_error`
        is ``ptxas``: then a warning, and Triton's PTX as it was)."""
        import ptxkit
        from ptxkit.cfg.fence.fence import fence_module
        from ptxkit.fencelog import describe, entry_names, write_entry

        name = f"<triton {metadata.get('name', 'kernel')}>"
        start = time.perf_counter()
        try:
            if self.passes:
                return self._rewrite(ptx, metadata, name, start)
            module = ptxkit.parse(ptx, name)
            report = fence_module(module, self.options, rewrite=self.mode == "fence", warn=False)
        except Exception as err:  # PTX it cannot read, a failing pass, or a bug in ptxkit
            problem = _problem(name, err)
            if self.on_error == "fail":
                raise FencePassError(f"{problem} (install(on_error='ptxas') or PTXKIT_ON_ERROR=ptxas compiles "
                                     "it without the pass)") from err
            print(f"{problem}; compiled without the pass (on error: ptxas) [ptxkit]", file=sys.stderr)
            fenced, fences, skipped = ptx, [], f"the pass could not run: {problem}"
        else:
            fenced = str(module) if report.changed else ptx
            module.release()  # the tree goes now, not at a full collection of the compiler's process
            fences = [describe(site) for site in report.fences]
            skipped = str(report.skipped) if report.skipped else None
            if self.mode == "check":
                for fence in fences:
                    print(f"{name}:{fence['line']}:{fence['column']}: warning: missing {fence['variant']} "
                          f"{fence['where']} this statement: {fence['reason']} [ptxkit]", file=sys.stderr)
        entry = {"file": name, "kernels": entry_names(ptx), "mode": self.mode, "fences": fences,
                 "skipped": skipped, "seconds": time.perf_counter() - start}
        self.log.append(entry)
        write_entry(entry)
        metadata["ptxkit"] = {"mode": self.mode, "fences": fences, "skipped": skipped}
        return fenced

    def _rewrite(self, ptx: str, metadata: dict, name: str, start: float) -> str:
        """`process` with passes: the passes, then the fence pass as the mode says."""
        from ptxkit.fencelog import entry_names, pipeline_fences, write_entry
        from ptxkit.rewrite.pipeline import FENCE, run

        result = run(ptx, self.passes, fence=None if self.mode == "fence" else self.mode == "check",
                     fence_options=self.options, check=self.mode == "check", filename=name)
        fences, skipped = pipeline_fences(result)
        for fence in fences if self.mode == "check" else ():
            print(f"{name}:{fence['line']}:{fence['column']}: warning: missing {fence['variant']} "
                  f"{fence['where']} this statement: {fence['reason']} [ptxkit]", file=sys.stderr)
        summary = result.to_json()
        passes = [stage["name"] for stage in summary["stages"] if stage["name"] != FENCE]
        entry = {"file": name, "kernels": entry_names(ptx), "mode": self.mode, "fences": fences,
                 "skipped": skipped, "passes": passes, "params": summary["params"],
                 "seconds": time.perf_counter() - start}
        self.log.append(entry)
        write_entry(entry)
        metadata["ptxkit"] = {"mode": self.mode, "fences": fences, "skipped": skipped, "passes": passes,
                              "params": summary["params"],
                              "info": {stage["name"]: stage["info"] for stage in summary["stages"] if stage["info"]}}
        _request_profile_scratch(metadata, result)
        text = result.text if result.changed else ptx
        result.module.release()
        return text


def _problem(name: str, err: Exception) -> str:
    """Why the pass could not run on the kernel `name`, in one line.

    >>> from ptxkit.errors import PtxSyntaxError
    >>> _problem("<triton k>", PtxSyntaxError("unexpected '%3'", "<triton k>", 12, 5))
    "<triton k>:12:5: the proxy-fence pass cannot read this PTX: unexpected '%3'"
    """
    from ptxkit.errors import PtxSyntaxError
    from ptxkit.rewrite.pipeline import PassError

    if isinstance(err, PtxSyntaxError):
        return f"{err.location}: the proxy-fence pass cannot read this PTX: {err.message}"
    if isinstance(err, PassError):
        return f"{name}: {err}"
    return f"{name}: the proxy-fence pass failed (a bug in ptxkit; please report it): {type(err).__name__}: {err}"


def _request_profile_scratch(metadata: dict, result) -> None:
    """A kernel that an instrumentation pass made record into its last parameter
    (``--buffer last``: Triton's profile scratch) gets Triton's launcher to allocate the
    buffer at every launch: its bytes per CTA and alignment go into the metadata fields
    the launcher reads (``profile_scratch_size``, ``profile_scratch_align``)."""
    from ptxkit.instrument.layout import Layout

    last = {f.name: f.signature.params[-1].name for f in result.module.functions
            if f.kind == "entry" and not f.is_declaration and f.signature.params}
    for stage in result.stages:
        for name, fields in stage.info.get("layouts", {}).items():
            layout = Layout.from_dict(fields)
            if layout.buffer[0] == "param" and layout.buffer[1] == last.get(name):
                metadata["profile_scratch_size"] = layout.cta_bytes
                metadata["profile_scratch_align"] = 16


def layout_of(compiled):
    """The `ptxkit.instrument.layout.Layout` of a kernel Triton compiled through the hook
    with an instrumentation pass (what ``kernel[grid](...)`` returned).

    >>> layout_of(compiled).kind  # doctest: +SKIP
    'timeline'
    """
    from ptxkit.instrument.layout import Layout

    info = (getattr(compiled.metadata, "ptxkit", None) or {}).get("info", {})
    for stage in info.values():
        fields = stage.get("layouts", {}).get(compiled.name)
        if fields is not None:
            return Layout.from_dict(fields)
    raise ValueError(f"kernel {compiled.name!r} was not instrumented through ptxkit's hook (install(passes=[...]))")


class Recording:
    """Triton's profile allocator while `recording` is active: each launch of an
    instrumented kernel gets a zero-filled ``torch.uint8`` tensor of the size the kernel
    asks for, kept in `buffers` in launch order.

    >>> recorded = Recording()
    >>> recorded.buffers
    []
    """

    def __init__(self):
        self.buffers: list = []

    def __call__(self, size: int, alignment: int, stream):
        import torch

        buffer = torch.zeros(size, dtype=torch.uint8, device="cuda")
        self.buffers.append(buffer)
        return buffer

    def decode(self, compiled, launch: int = -1, grid=None, clock_ghz: float | None = None):
        """The `ptxkit.trace.Trace` (or `Counts`) of launch `launch` (the last by default)
        of `compiled`; `grid` names CTAs by their coordinates."""
        from ptxkit.trace import decode

        return decode(self.buffers[launch], layout_of(compiled), grid=grid, clock_ghz=clock_ghz)


@contextlib.contextmanager
def recording():
    """Keep the buffers Triton allocates for instrumented kernels launched inside the
    block (`Recording`); Triton's previous profile allocator comes back after it.

    >>> with recording() as recorded:  # doctest: +SKIP
    ...     compiled = kernel[grid](x, y, n, BLOCK=1024)
    """
    from triton.runtime import _allocation

    previous = _allocation._profile_allocator.get()
    recorded = Recording()
    _allocation._profile_allocator.set(recorded)
    try:
        yield recorded
    finally:
        _allocation._profile_allocator.set(previous)


def install(mode: str | None = None, options=None, on_error: str | None = None, passes=None) -> Hook | None:
    """Put the fence pass (after `passes`, if any: specs or functions, default
    ``$PTXKIT_PASSES``) into Triton's pipeline; returns the hook (None for ``off``
    without passes).

    `mode` defaults to ``$PTXKIT_FENCE_MODE`` (else ``fence``); `options` is a
    `ptxkit.cfg.fence.fence.FenceOptions`; `on_error` (default ``$PTXKIT_ON_ERROR``, else
    ``fail``) says what a kernel the pass cannot run on gets: ``fail`` raises
    `FencePassError` from Triton's compile, ``ptxas`` compiles Triton's PTX unfenced with
    a warning. Installing again replaces ptxkit's hook, keeping the hook that was there
    before ptxkit's first one. Without Triton, raises ``ModuleNotFoundError`` saying how
    to install it.

    >>> install("off") is None  # doctest: +SKIP
    True
    """
    try:
        from triton import knobs
    except ImportError as err:
        raise ModuleNotFoundError(
            "ptxkit.triton_hook needs Triton 3.6 or newer, which is not installed: "
            "pip install 'ptxkit[triton]' (or pip install triton)", name="triton") from err

    mode = (mode or os.environ.get("PTXKIT_FENCE_MODE", "fence")).strip().lower() or "fence"
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    on_error = (on_error or os.environ.get("PTXKIT_ON_ERROR", "fail")).strip().lower() or "fail"
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}, not {on_error!r}")
    if passes is None:
        from ptxkit.rewrite.pipeline import split_specs

        passes = split_specs(os.environ.get("PTXKIT_PASSES", ""))
    current = knobs.runtime.add_stages_inspection_hook
    previous = current.previous if isinstance(current, Hook) else current
    if mode == "off" and not passes:
        knobs.runtime.add_stages_inspection_hook = previous
        return None
    _add_cache_key_to_triton_36()
    hook = Hook(mode, options, previous, on_error, passes)
    knobs.runtime.add_stages_inspection_hook = hook
    return hook


def uninstall() -> None:
    """Take ptxkit's hook out of Triton's pipeline (the previous hook, if any, stays).

    >>> uninstall()  # doctest: +SKIP
    """
    install("off", passes=[])


def _function_digest(function) -> str:
    """A digest of a pass function's source (its name when the source cannot be read):
    an edited pass never reuses kernels the old one rewrote."""
    import inspect

    try:
        text = inspect.getsource(function)
    except (OSError, TypeError):
        text = f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', repr(function))}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


_digest: str | None = None


def _source_digest() -> str:
    """A digest of ptxkit's Python source (the fence pass included): an edited
    installation never reuses kernels that an older one fenced."""
    global _digest
    if _digest is None:
        import ptxkit
        import ptxkit.cfg

        digest = hashlib.sha256()
        for top in sorted({os.path.dirname(ptxkit.__file__), os.path.dirname(ptxkit.cfg.__file__)}):
            for folder, subfolders, names in os.walk(top):  # the rewrite passes too
                subfolders.sort()
                for name in sorted(names):
                    if name.endswith(".py"):
                        with open(os.path.join(folder, name), "rb") as handle:
                            digest.update(os.path.relpath(os.path.join(folder, name), top).encode() + b"\0"
                                          + handle.read())
        _digest = digest.hexdigest()[:16]
    return _digest


def _add_cache_key_to_triton_36() -> None:
    """On a Triton whose ``compile`` does not ask the hook for a key (3.6 and older),
    add ptxkit's hook key where later Triton adds it: to the on-disk cache key
    (``get_cache_key``) and to the in-memory key of jit functions (``compute_cache_key``).
    Hooks that are not ptxkit's are left out, as before."""
    import inspect

    import triton.compiler.compiler as compiler
    import triton.runtime.jit as jit
    from triton import knobs

    if getattr(compiler.get_cache_key, "ptxkit", False):
        return
    if "add_stages_inspection_hook()" in inspect.getsource(compiler.compile):
        return  # Triton asks the hook itself

    def ours():
        hook = knobs.runtime.add_stages_inspection_hook
        return hook.cache_key() if isinstance(hook, Hook) else None

    def keyed(get_cache_key):
        def get_cache_key_with_ptxkit(*args, **kwargs):
            key = get_cache_key(*args, **kwargs)
            extra = ours()
            return key if extra is None else key + extra[0]

        get_cache_key_with_ptxkit.ptxkit = True
        return get_cache_key_with_ptxkit

    compute_cache_key = jit.compute_cache_key

    def compute_cache_key_with_ptxkit(kernel_key_cache, specialization, options):
        extra = ours()
        if extra is not None:
            specialization = [*specialization, ("ptxkit", extra[1])]
        return compute_cache_key(kernel_key_cache, specialization, options)

    compiler.get_cache_key = keyed(compiler.get_cache_key)
    jit.get_cache_key = keyed(jit.get_cache_key)
    jit.compute_cache_key = compute_cache_key_with_ptxkit
