"""Typed, immutable records that cost little to define: ``typing.NamedTuple`` without
its run-time look at each annotation.

Under ``from __future__ import annotations`` every field's annotation is a string, and
``typing.NamedTuple`` turns each into a ``ForwardRef``, compiling it. The fence pass
defines about forty records over 170 fields, so that check alone was some 8 ms of
every ``ptxkit fence`` process (half of ``python3 -S -c pass``), and ``typing`` itself
is another import a plain interpreter does not make. `record` builds the same class,
a ``collections.namedtuple`` with the body's methods, properties and docstring, and
keeps the annotations as written.

>>> @record
... class Span:
...     '''A half-open range of lines.'''
...     start: int
...     stop: int = 0
...     @property
...     def size(self) -> int:
...         return self.stop - self.start
>>> Span(3, 7), Span(3, 7).size, Span(3)._replace(stop=4), Span(1, 2) == (1, 2)
(Span(start=3, stop=7), 4, Span(start=3, stop=4), True)
>>> Span.__annotations__, Span.__doc__
({'start': 'int', 'stop': 'int'}, 'A half-open range of lines.')
"""

from __future__ import annotations

import collections

#: ``typing.TYPE_CHECKING`` without importing ``typing``: mypy takes the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar, dataclass_transform

    _Class = TypeVar("_Class", bound=type)
else:

    def dataclass_transform(**_options: object):
        """At run time nothing: the decorator only tells a type checker that a record's
        annotated fields make its constructor's parameters."""
        return lambda function: function

#: What every class body has that is not the record's own.
_CLASS_MACHINERY = frozenset({"__dict__", "__weakref__", "__module__", "__qualname__", "__annotations__", "__doc__"})


@dataclass_transform(frozen_default=True)
def record(cls: _Class) -> _Class:
    """The namedtuple of `cls`'s annotated fields (their defaults the class-level values,
    which must come last, as in ``typing.NamedTuple``), with the rest of `cls`'s body
    (methods, properties, class constants) and its docstring.

    >>> @record
    ... class Pair:
    ...     left: int
    ...     right: int = 2
    ...     def total(self) -> int:
    ...         return self.left + self.right
    >>> Pair(1).total(), Pair._fields, Pair.__module__ == __name__
    (3, ('left', 'right'), True)
    """
    body = cls.__dict__
    annotations = body.get("__annotations__", {})
    fields = list(annotations)
    defaults = [body[name] for name in fields if name in body]
    if any(name in body for name in fields[: len(fields) - len(defaults)]):
        raise TypeError(f"{cls.__name__}: a field without a default follows one with a default")
    # mypy checks namedtuple() calls as class definitions, which need literal names; these are cls's
    made = collections.namedtuple(cls.__name__, fields, defaults=defaults, module=cls.__module__)  # type: ignore[misc]
    for name, value in body.items():
        if name not in _CLASS_MACHINERY and name not in annotations:
            setattr(made, name, value)
    made.__qualname__ = cls.__qualname__
    made.__doc__ = cls.__doc__
    made.__annotations__ = dict(annotations)
    # The namedtuple stands for `cls` (its fields, methods and docstring), which mypy
    # cannot be told: it sees a namedtuple class where the annotation says `cls`'s type.
    return made  # type: ignore[return-value]


def fields_of(item: object) -> dict[str, object]:
    """A record's fields by name, in order: its namedtuple ``_asdict()``, which a type
    checker does not see on a `record` (it takes the class for the one written).

    >>> @record
    ... class Span:
    ...     start: int
    ...     stop: int = 0
    >>> fields_of(Span(3, 7))
    {'start': 3, 'stop': 7}
    """
    fields: dict[str, object] = item._asdict()  # type: ignore[attr-defined]
    return fields
