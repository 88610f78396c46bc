"""Byte sizes and signed counts for people, shared by the CLI and the inspector.

Pure and standard library only (the read commands run on the light base
install). Each front end keeps its own placeholder for a missing value and
its own minus: the terminal prints ASCII ``-``, the HTML inspector the
typographic ``–`` and ``−``; the magnitudes and units are the same here.
"""

from __future__ import annotations

# The terminal's minus; the inspector passes the typographic minus sign U+2212.
ASCII_MINUS = "-"
MINUS_SIGN = "\N{MINUS SIGN}"

KIBIBYTE = 1024
MEBIBYTE = 1024 * 1024


def byte_size(number: int) -> str:
    """``812 B``, ``1.5 KiB``, ``2.25 MiB``: bytes below 1 KiB exact, larger sizes rounded."""
    if abs(number) < KIBIBYTE:
        return f"{number:,} B"
    if abs(number) < MEBIBYTE:
        return f"{number / KIBIBYTE:.1f} KiB"
    return f"{number / MEBIBYTE:.2f} MiB"


def signed_byte_size(number: int, minus: str = ASCII_MINUS) -> str:
    """A size change: ``+1.5 KiB``, ``-812 B`` (``minus`` as the front end writes it), ``±0 B``."""
    sign = "+" if number > 0 else minus if number < 0 else "±"
    return sign + byte_size(abs(number))


def signed_count(number: int, minus: str = ASCII_MINUS) -> str:
    """A count change: ``+1,234``, ``-56`` (``minus`` as the front end writes it), ``±0``."""
    if number == 0:
        return "±0"
    return f"+{number:,}" if number > 0 else f"{minus}{abs(number):,}"
