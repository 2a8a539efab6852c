"""Run passes one after the other, the fence pass last, and say what each did.

A pass is a function ``pass_(module, **options)`` that returns a
`ptxkit.rewrite.plan.Plan`, a list of `ptxkit.edits` records, or None (nothing to
change). `run` applies each pass's edits with the one apply step, parses the result
again for the next pass (so every pass sees line numbers of the text it is given),
and runs the fence pass last unless told otherwise: instrumentation then never hides
a race (a fence it would have made unnecessary is put back) nor adds one (its own
shared-memory accesses are fenced like any other). A pass that must not be followed
by the fence pass (one that strips fences, to test race detection) says so with a
``fence_after = False`` attribute.

Passes are named on the command line, in ``PTXKIT_PASSES`` and in the Triton hook
by a spec (`load_pass`): a shipped pass's name (`ptxkit.rewrite.passes.SHIPPED`), or
``module:function`` (``module`` a dotted module or a ``.py`` path), then the pass's
options as ``--name value`` (``--flag`` alone gives True; a repeated option a list),
e.g. ``"strip --opcode bar.sync"``. ``fence`` names the fence pass itself.

>>> text = open("samples/fence/14b_hoist_out_of_loop.ptx").read()
>>> result = run(text, ["strip-fences"], filename="14b.ptx")
>>> [stage.name for stage in result.stages], result.fence is None
(['strip-fences'], True)
>>> result = run(result.text, [], filename="14b.ptx")
>>> [stage.name for stage in result.stages], len(result.fence.fences)
(['fence'], 1)
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import shlex

from ptxkit._records import Record

#: The spec that names the fence pass.
FENCE = "fence"


class PassError(ValueError):
    """A pass spec that names no pass, options a pass does not take, or a pass that
    failed (`cause` holds its exception).

    >>> load_pass("no_such_module_here:run")
    Traceback (most recent call last):
    ptxkit.rewrite.pipeline.PassError: pass 'no_such_module_here:run': no module named 'no_such_module_here'
    """

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause


class PassSpec(Record):
    """A pass to run: its `name` (as given), the `function` and its `options`."""

    name: str
    function: object
    options: dict

    @property
    def fence_after(self) -> bool:
        """False for a pass that the fence pass must not follow by default."""
        return getattr(self.function, "fence_after", True)


def load_pass(spec) -> PassSpec:
    """A `PassSpec` from a spec string (see the module docstring), a callable, or a
    `PassSpec`.

    >>> load_pass("strip --opcode bar.sync --opcode bar.arrive").options
    {'opcode': ['bar.sync', 'bar.arrive']}
    >>> load_pass("ptxkit.rewrite.passes.strip:strip_fences").function.__name__
    'strip_fences'
    """
    if isinstance(spec, PassSpec):
        return spec
    if callable(spec):
        return PassSpec(getattr(spec, "__name__", repr(spec)), spec, {})
    try:
        words = shlex.split(spec)
    except ValueError as err:
        raise PassError(f"pass {spec!r}: {err}") from None
    if not words:
        raise PassError("an empty pass spec")
    name, options = words[0], _options(spec, words[1:])
    if name == FENCE:
        if options:
            raise PassError("the fence pass takes its options from the command (--placement…), not from --pass")
        return PassSpec(FENCE, None, {})
    from .passes import SHIPPED

    target = SHIPPED.get(name, name)
    module_name, colon, function_name = target.rpartition(":")
    if not colon or not module_name or not function_name:
        shipped = ", ".join(sorted(SHIPPED))
        raise PassError(f"pass {name!r}: not a shipped pass ({shipped}) nor module:function")
    function = getattr(_import(spec, module_name), function_name, None)
    if not callable(function):
        raise PassError(f"pass {spec!r}: {module_name} has no function {function_name!r}")
    signature = inspect.signature(function)
    try:
        signature.bind(None, **options)
    except TypeError as err:
        takes = ", ".join(f"--{p.replace('_', '-')}" for p in list(signature.parameters)[1:]) or "no options"
        raise PassError(f"pass {name!r}: {err} (it takes {takes})") from None
    return PassSpec(name, function, options)


def _options(spec: str, words: list[str]) -> dict:
    options: dict = {}
    at = 0
    while at < len(words):
        word = words[at]
        if not word.startswith("--") or len(word) < 3:
            raise PassError(f"pass {spec!r}: expected an option --name [value], not {word!r}")
        key, equals, value = word[2:].partition("=")
        if not equals:
            if at + 1 < len(words) and not words[at + 1].startswith("--"):
                value, at = words[at + 1], at + 1
            else:
                value = True
        key = key.replace("-", "_")
        if key in options:
            options[key] = (options[key] if isinstance(options[key], list) else [options[key]]) + [value]
        else:
            options[key] = value
        at += 1
    return options


def _import(spec: str, module_name: str):
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            path = os.path.abspath(module_name)
            loader = importlib.util.spec_from_file_location(f"ptxkit_pass_{abs(hash(path))}", path)
            if loader is None or not os.path.isfile(path):
                raise PassError(f"pass {spec!r}: no file {module_name}")
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
            return module
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise PassError(f"pass {spec!r}: no module named {err.name!r}") from None


def split_specs(text: str) -> list[str]:
    """The pass specs of a comma-separated list (``PTXKIT_PASSES``).

    >>> split_specs("strip-fences, mypkg.passes:count --every 2,")
    ['strip-fences', 'mypkg.passes:count --every 2']
    """
    return [part.strip() for part in text.split(",") if part.strip()]


class Stage(Record):
    """What one pass did: its `name`, the `lines` map from its input to its output
    (None when it changed nothing), the number of `edits`, the kernel `params` it
    added and its own `info` (`ptxkit.rewrite.plan.Plan.info`)."""

    name: str
    lines: object
    edits: int
    params: list
    info: dict


class RewriteResult:
    """The outcome of `run`: the rewritten `module` and `text`, the `stages`, the fence
    pass's report (`fence`, None when it did not run) and the line map from the input
    to the output (`lines`)."""

    def __init__(self, module, stages: list[Stage], fence):
        self.module, self.stages, self.fence = module, stages, fence
        self.text = str(module)

    @property
    def changed(self) -> bool:
        """True when some pass changed the text."""
        return any(stage.lines is not None for stage in self.stages)

    @property
    def lines(self):
        """The `ptxkit.edits.LineMap` from input lines to output lines."""
        from ptxkit.edits import LineMap

        total = LineMap([])
        for stage in self.stages:
            if stage.lines is not None:
                total = total.then(stage.lines)
        return total

    @property
    def params(self) -> dict[str, list]:
        """Kernel name -> the parameters passes added to it (`AddedParam`), in order."""
        found: dict[str, list] = {}
        for stage in self.stages:
            for param in stage.params:
                found.setdefault(param.kernel, []).append(param)
        return found

    def input_line(self, stage: int, line: int) -> int:
        """The input line that line `line` of stage `stage`'s input comes from (what a
        pass's `info` names lines by), or the line it was inserted before.

        >>> result = run(open("samples/fence/14b_hoist_out_of_loop.ptx").read(), [], filename="14b.ptx")
        >>> result.input_line(0, 30)
        30
        """
        from ptxkit.edits import LineMap

        total = LineMap([])
        for earlier in self.stages[:stage]:
            if earlier.lines is not None:
                total = total.then(earlier.lines)
        return total.source(line)

    def to_json(self) -> dict:
        """The stages, added parameters and fence summary as JSON-ready data."""
        return {
            "file": self.module.filename,
            "changed": self.changed,
            "stages": [{"name": stage.name, "edits": stage.edits, "info": stage.info} for stage in self.stages],
            "params": {kernel: [param._asdict() for param in params] for kernel, params in self.params.items()},
            "fence": self.fence.to_json() if self.fence is not None else None,
        }


def run(module, passes, fence: bool | None = None, fence_options=None, check: bool = False,
        filename: str | None = None) -> RewriteResult:
    """Run `passes` (specs, see `load_pass`) on `module` (a parsed `Module`, changed in
    place by the first pass, or PTX text), then the fence pass.

    `fence`: None runs it last unless a pass names ``fence`` itself or a pass has
    ``fence_after = False``; True always runs it (last, or where ``fence`` is named);
    False never. `fence_options` (a `ptxkit.cfg.fence.fence.FenceOptions`) configure it; with
    `check` it only reports the missing fences (`RewriteResult.fence`). Raises
    `PassError` for a bad spec or a pass that fails, `PtxSyntaxError` for bad input.
    """
    from ptxkit import parse

    given = None if isinstance(module, (str, bytes)) else module
    if given is None:
        module = parse(module, filename or "<input>")
    specs = [load_pass(spec) for spec in passes]
    named = any(spec.name == FENCE for spec in specs)
    if fence is None:
        fence = named or all(spec.fence_after for spec in specs)
    if not fence:
        specs = [spec for spec in specs if spec.name != FENCE]
    elif not named:
        specs.append(PassSpec(FENCE, None, {}))
    stages, report = [], None
    for spec in specs:
        if spec.name == FENCE:
            from ptxkit.cfg.fence.fence import fence_module

            report = fence_module(module, fence_options, rewrite=not check)
            changed = report.changed
            stage = Stage(FENCE, report.lines if changed else None, len(report.fences) if changed else 0, [], {})
        else:
            stage = _run_pass(spec, module)
            changed = stage.lines is not None
        stages.append(stage)
        if changed:
            done, module = module, parse(str(module), module.filename)
            if done is not given:  # one this run parsed and is done with: its tree goes now
                done.release()
    return RewriteResult(module, stages, report)


def _run_pass(spec: PassSpec, module) -> Stage:
    from ptxkit.edits import apply_edits

    from .plan import Plan

    try:
        planned = spec.function(module, **spec.options)
        edits = planned.edits() if isinstance(planned, Plan) else list(planned or ())
        lines = apply_edits(edits) if edits else None
    except Exception as err:  # a pass's bug or bad code it made: say which pass
        raise PassError(f"pass {spec.name!r} failed: {type(err).__name__}: {err}", err) from err
    params = list(planned.params) if isinstance(planned, Plan) else []
    info = dict(planned.info) if isinstance(planned, Plan) else {}
    return Stage(spec.name, lines, len(edits), params, info)
