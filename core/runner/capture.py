"""Bounded output capture: keep the head and the tail of a stream, count every byte.

A job that prints gigabytes costs at most ``cap`` bytes of disk and about ``cap / 2`` bytes
of memory per stream, and its pipe is always drained, so it still finishes with its real
exit status. When the disk is full, capture degrades (the error is recorded) but bytes are
still counted and the pipe still drained.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

SLICE = 4096  # bytes of head and of tail copied into job_outcomes for quick display


class Capture:
    """Writes the first ``cap // 2`` bytes of a stream to ``path`` as they arrive (the file
    exists only when the stream produced output) and keeps
    the last ``cap - cap // 2`` bytes in memory; ``close()`` appends the tail after a
    ``[watchkeeper: N bytes omitted]`` marker when bytes were dropped."""

    def __init__(self, path: str | os.PathLike[str], cap: int) -> None:
        self.path = Path(path)
        self.head_limit = cap // 2
        self.tail_limit = cap - self.head_limit
        self.total = 0
        self.head = bytearray()  # first SLICE bytes, for the ledger
        self._head_written = 0
        self._tail = bytearray()
        self.write_error: str | None = None
        # Opened on the first byte: a silent job costs no file (most routine runs print little).
        self._fh: BinaryIO | None = None
        self._opened = False

    def feed(self, chunk: bytes) -> None:
        """Account for one chunk read from the pipe."""
        self.total += len(chunk)
        if len(self.head) < SLICE:
            self.head += chunk[: SLICE - len(self.head)]
        room = self.head_limit - self._head_written
        if room > 0:
            part = chunk[:room]
            self._write(part)
            self._head_written += len(part)
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            if len(self._tail) > 2 * self.tail_limit:  # trim rarely: amortised O(1) per byte
                del self._tail[: len(self._tail) - self.tail_limit]

    def _write(self, data: bytes) -> None:
        if not data:
            return
        if not self._opened:
            self._opened = True
            try:
                self._fh = open(self.path, "wb")  # noqa: SIM115 - closed in close()
            except OSError as exc:
                self.write_error = f"cannot open {self.path.name}: {exc.strerror}"
        if self._fh is None:
            return
        try:
            self._fh.write(data)
        except OSError as exc:
            self.write_error = f"writing {self.path.name}: {exc.strerror}"
            try:
                self._fh.close()
            except OSError:
                pass
            self._fh = None

    @property
    def truncated(self) -> bool:
        return self.total > self.head_limit + self.tail_limit

    def tail_bytes(self, n: int = SLICE) -> bytes:
        """The last ``n`` bytes seen (from the tail buffer, or the head if short)."""
        if self._tail:
            return bytes(self._tail[-n:])
        return bytes(self.head[-n:]) if self.total <= SLICE else b""

    def close(self) -> None:
        """Flush the tail (with the omission marker when bytes were dropped) and close."""
        tail = self._tail[-self.tail_limit:] if self._tail else b""
        if self.truncated:
            omitted = self.total - self._head_written - len(tail)
            self._write(f"\n[watchkeeper: {omitted} bytes omitted]\n".encode())
        self._write(bytes(tail))
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError as exc:
                self.write_error = f"closing {self.path.name}: {exc.strerror}"
            self._fh = None

    def summary(self, prefix: str) -> dict[str, object]:
        """``job_outcomes`` columns for this stream (``prefix`` is ``stdout`` or ``stderr``)."""
        head = bytes(self.head)
        tail = self.tail_bytes()
        if self.total <= SLICE:
            tail = b""
        return {
            f"{prefix}_bytes": self.total,
            f"{prefix}_head": head.decode("utf-8", errors="replace"),
            f"{prefix}_tail": tail.decode("utf-8", errors="replace") if tail else None,
        }
