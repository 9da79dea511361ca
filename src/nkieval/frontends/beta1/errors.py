"""The error nkieval raises for a Beta-1 API it does not implement (a gap in nkieval, not a kernel bug)."""


class Beta1Unsupported(NotImplementedError):
    """A Beta-1 API (or use of one) that nkieval does not implement."""
