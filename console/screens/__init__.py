"""Console screens: the main views, run detail, escalation detail, history, missions, and the
small modal dialogs.

A screen shows what the ledger's reads hand it and acts only through ``core.actions``
(operator actions ask first, as the key registry says); it never writes the ledger directly
and never shows untrusted text except through ``console.safe_text``.
"""
