"""Typed, immutable records that cost little to define: ``typing.NamedTuple`` without
its run-time look at each annotation.

Under ``from __future__ import annotations`` every field's annotation is a string, and
``typing.NamedTuple`` turns each into a ``ForwardRef``, compiling it. The fence pass
defines about forty records over 170 fields, so that check alone was some 8 ms of
every ``ptxkit fence`` process (half of ``python3 -S -c pass``), and ``typing`` itself
is another import a plain interpreter does not make.

A record is written ``class Span(Record):``. To a type checker, and so to mypyc,
`Record` is ``typing.NamedTuple``: a record is a tuple, compared by value, with
``_replace``, ``_asdict`` and ``_fields``. At run time `Record` is a plain base
class whose metaclass builds the same class, a ``collections.namedtuple`` with the
body's methods, properties, class constants and docstring, and keeps the annotations
as written.

>>> class Span(Record):
...     '''A half-open range of lines.'''
...     start: int
...     stop: int = 0
...     @property
...     def size(self) -> int:
...         return self.stop - self.start
>>> Span(3, 7), Span(3, 7).size, Span(3)._replace(stop=4), Span(1, 2) == (1, 2)
(Span(start=3, stop=7), 4, Span(start=3, stop=4), True)
>>> Span.__annotations__, Span.__doc__, Span._fields
({'start': 'int', 'stop': 'int'}, 'A half-open range of lines.', ('start', 'stop'))

`Generic` and `TypeVar` are ``typing``'s to a type checker, and so to mypyc; at run time
a class written ``class Box(Generic[T]):`` gets a plain base class with no slots, and
``TypeVar("T")`` is the name ``"T"``.

>>> T = TypeVar("T")
>>> class Box(Generic[T]):
...     pass
>>> T, [base.__name__ for base in Box.__mro__]
('T', ['Box', 'Generic', 'object'])
"""

from __future__ import annotations

import collections

__all__ = ["TYPE_CHECKING", "Generic", "Record", "TypeVar"]

#: ``typing.TYPE_CHECKING`` without importing ``typing``: mypy takes the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Generic, NamedTuple as Record, TypeVar
else:
    class Generic:
        """The base of a generic class: ``Generic[T]`` is this class, whatever `T`."""

        __slots__ = ()

        def __class_getitem__(cls, parameters: object) -> type:
            return cls

    def TypeVar(name: str, *constraints: object, **options: object) -> str:
        """A type variable's name: what a type checker reads is all it is at run time."""
        return name

    #: What every class body has that is not the record's own.
    _CLASS_MACHINERY = frozenset({"__module__", "__qualname__", "__annotations__", "__doc__"})

    class _RecordMaker(type):
        """The metaclass of `Record`: a class written as a subclass of `Record` is made
        the namedtuple of its annotated fields (their defaults the class-level values,
        which must come last, as in ``typing.NamedTuple``), with the rest of its body.

        >>> class Pair(Record):
        ...     left: int
        ...     right: int = 2
        ...     def total(self) -> int:
        ...         return self.left + self.right
        >>> Pair(1).total(), Pair.__bases__, Pair.__module__ == __name__
        (3, (<class 'tuple'>,), True)
        """

        def __new__(cls, name: str, bases: tuple[type, ...], body: dict[str, object]) -> type:
            if not bases:  # Record itself
                return super().__new__(cls, name, bases, body)
            annotations = body.get("__annotations__", {})
            fields = list(annotations)
            defaults = [body[field] for field in fields if field in body]
            if any(field in body for field in fields[: len(fields) - len(defaults)]):
                raise TypeError(f"{name}: a field without a default follows one with a default")
            made = collections.namedtuple(name, fields, defaults=defaults, module=body["__module__"])
            for key, value in body.items():
                if key not in _CLASS_MACHINERY and key not in annotations:
                    setattr(made, key, value)
            made.__qualname__ = body["__qualname__"]
            made.__doc__ = body.get("__doc__")
            made.__annotations__ = dict(annotations)
            return made

    class Record(metaclass=_RecordMaker):
        """The base of every record (see the module's docstring)."""

