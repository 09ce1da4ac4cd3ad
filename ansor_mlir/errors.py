"""The one exception type for errors a user can cause.

The CLI prints its message (which names the input and the fix) without a
traceback; everything else is a bug and keeps its traceback.
"""


class AnsorError(Exception):
    """A user-facing error: bad input, bad option, unreadable file."""
