"""One error family for bad input.

Every error carries where it happened (archive, byte offset, record index, layout path)
and what was expected versus found. ``NeedData`` (a truncated tail: the bytes simply
stop) is kept apart from ``Corrupt`` (the bytes are there but make no sense), in the way
dpkt separates ``NeedData`` from ``UnpackError``.

Decoders raise these; the decode stage turns each one into a quarantine row and goes on.
"""

from __future__ import annotations


class DecodeError(Exception):
    """Base class: bad input found at a known place."""

    error_class = "decode_error"

    def __init__(
        self,
        message: str,
        *,
        archive: str | None = None,
        offset: int | None = None,
        record_index: int | None = None,
        path: str | None = None,
        expected: object = None,
        actual: object = None,
    ) -> None:
        self.reason = message
        self.archive = archive
        self.offset = offset
        self.record_index = record_index
        self.path = path
        self.expected = expected
        self.actual = actual
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.archive is not None:
            where.append(self.archive)
        if self.offset is not None:
            where.append(f"at pos 0x{self.offset:X} ({self.offset})")
        if self.record_index is not None:
            where.append(f"record #{self.record_index}")
        if self.path:
            where.append(self.path)
        text = self.reason
        if self.expected is not None or self.actual is not None:
            text += f": expected {self.expected}, got {self.actual}"
        return (", ".join(where) + ": " + text) if where else text

    def located(self, **where: object) -> "DecodeError":
        """Fill in location fields that are still unknown and return self."""
        for key, value in where.items():
            if value is not None and getattr(self, key, None) is None:
                setattr(self, key, value)
        self.args = (self._render(),)
        return self

    def __str__(self) -> str:  # keep the message current after located()
        return self._render()


class NeedData(DecodeError):
    """The input stops before the structure it started is complete (truncated tail)."""

    error_class = "truncated"


class Corrupt(DecodeError):
    """The bytes are present but violate the layout."""

    error_class = "corrupt"


class BadValue(Corrupt):
    """A field holds a value its type cannot have (bad packed-decimal sign, bad date...)."""

    error_class = "bad_value"


class UnknownRecordType(Corrupt):
    """A record type or function code this format does not define."""

    error_class = "unknown_record_type"


class UnknownTable(DecodeError):
    """A record for a table the catalog does not describe. ``table_id`` (default: the
    ``actual`` value) goes onto the quarantine row, so that the report can name the table
    and give a catalog stub for it."""

    error_class = "unknown_table"

    def __init__(self, message: str, *, table_id: str | None = None, **where: object) -> None:
        super().__init__(message, **where)
        actual = where.get("actual")
        self.table_id = table_id if table_id is not None else (None if actual is None else str(actual))


class BrokenChain(Corrupt):
    """A record's link to earlier records of its transaction does not hold."""

    error_class = "broken_chain"


class IncompleteSegments(DecodeError):
    """A segmented record whose segments never all arrived."""

    error_class = "incomplete_segments"


class ConfigError(Exception):
    """A configuration or catalog file is malformed: says which file, which key, what was expected."""

    def __init__(self, file: str, key: str, problem: str) -> None:
        self.file = file
        self.key = key
        self.problem = problem
        super().__init__(f"{file}: {key}: {problem}")
