"""Console widgets, one per file, grouped by screen area.

A widget draws what it is given (bounded pages, never a whole table) and must not write
the ledger or act on its own; untrusted text goes through ``console.safe_text``.
"""
