"""Watchkeeper's user side: the click CLI and the Textual console. No SQL here: every
read and write goes through ``core``."""
