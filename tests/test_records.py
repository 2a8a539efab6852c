"""``ptxkit._records``: typed records that behave as ``typing.NamedTuple``'s do."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ptxkit._records import Record
from ptxkit.cfg.fence.fence import AccessPair, FenceOptions, FenceSite, Place


class Span(Record):
    """Lines `start` to `stop`."""

    start: int
    stop: int = 0
    label: str | None = None

    KIND = "span"  # a class constant, not a field

    @property
    def size(self) -> int:
        return self.stop - self.start


def test_a_record_is_a_tuple_with_named_fields_and_defaults():
    span = Span(3, 7)
    assert span == (3, 7, None) and hash(span) == hash((3, 7, None))
    assert (span.start, span.stop, span.label, span[1]) == (3, 7, None, 7)
    assert Span._fields == ("start", "stop", "label") and Span._field_defaults == {"stop": 0, "label": None}
    assert Span(1) == Span(start=1, stop=0) and Span(1) != Span(2)
    assert span._replace(label="x") == Span(3, 7, "x") and span._asdict() == {"start": 3, "stop": 7, "label": None}
    start, stop, _ = span
    assert (start, stop) == (3, 7)
    with pytest.raises(AttributeError):
        span.start = 4
    with pytest.raises(TypeError):
        Span()


def test_a_record_keeps_its_methods_constants_docstring_and_annotations():
    assert Span(3, 7).size == 4 and Span.KIND == "span" and "KIND" not in Span._fields
    assert Span.__doc__ == "Lines `start` to `stop`."
    assert Span.__annotations__ == {"start": "int", "stop": "int", "label": "str | None"}
    assert Span.__module__ == __name__ and Span.__qualname__ == "Span"
    assert repr(Span(1, 2)) == "Span(start=1, stop=2, label=None)"


def test_a_field_without_a_default_may_not_follow_one_with_a_default():
    with pytest.raises(TypeError, match="follows one with a default"):
        class Broken(Record):
            first: int = 0
            second: int


def test_records_survive_pickling_as_the_batch_workers_send_them():
    pair = AccessPair("raw", "shared::cta", Place(10, 2, "st.shared.u32"), Place(12, 2, "wgmma"), "async", (), ())
    site = FenceSite("k", 12, 2, "before", "fence.proxy.async;", "full", "inline", (pair,))
    assert pickle.loads(pickle.dumps(site)) == site
    assert pickle.loads(pickle.dumps(FenceOptions(war=False))) == FenceOptions(war=False)


def test_a_subclass_validates_in_its_constructor():
    assert FenceOptions().placement == "hoist"
    with pytest.raises(ValueError, match="placement"):
        FenceOptions(placement="everywhere")


def test_the_fence_check_does_not_import_typing():
    """``typing`` and its per-annotation checks cost a plain interpreter milliseconds that
    ``python3 -c pass`` does not pay (issue 10's start-up floor)."""
    script = ("import sys; sys.modules['typing'] = None\n"  # any import of it now fails
              "from ptxkit.cli.main import main\n"
              "raise SystemExit(main(['fence', '--check', sys.argv[1]]))\n")
    sample = str(Path(__file__).parent.parent / "samples" / "fence" / "h02_mbarrier_handoff_to_wgmma.ptx")
    done = subprocess.run([sys.executable, "-c", script, sample], capture_output=True, text=True)
    assert done.returncode == 1 and "missing fence.proxy.async" in done.stderr, done.stderr
