"""Which dataclasses the compiled ingest passes may make and read field by field (``_slotted.h``).

The compiled walk makes ~20k ``SpanEvent``s and the block checks ~20k
``Block``s per 512 × 40 export; the columns read their fields again. Made
in C at their slots' offsets, and read there, they skip the generated
``__init__`` (a Python frame each) and the attribute lookups. That is only
the same object as the class would make when the instance is nothing but
its fields: ``slot_descriptors`` says when, and otherwise the passes go
through the class as before.
"""

from __future__ import annotations

import dataclasses


def slot_descriptors(cls: type, names: tuple[str, ...]) -> tuple | None:
    """The member descriptors of ``names`` on ``cls``, or None when ``cls`` is not made by
    storing exactly those fields: a slotted dataclass whose fields are ``names``, in its
    ``__init__``'s order, every one set there, with no ``__post_init__``, no ``__new__``,
    metaclass or base class of its own and no ``__dict__``."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and type(cls) is type):
        return None
    if cls.__mro__ != (cls, object) or cls.__new__ is not object.__new__ or hasattr(cls, "__post_init__"):
        return None
    fields = dataclasses.fields(cls)
    if tuple(field.name for field in fields) != names or not all(field.init for field in fields):
        return None
    if cls.__dict__.get("__slots__") != names or "__dict__" in cls.__dict__:
        return None
    descriptors = tuple(cls.__dict__[name] for name in names)
    if not all(type(descriptor).__name__ == "member_descriptor" for descriptor in descriptors):
        return None
    return descriptors
