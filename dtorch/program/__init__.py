"""Traced programs: tracing (``trace``), replay (``program``), files (``files``), and
what a program shows of itself (``summary``, ``picture``)."""
