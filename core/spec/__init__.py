"""Job specs and settings: what the operator writes, validated before anything runs.

Holds the job spec model (``model``, with ``durations`` and ``schedule``), the loader that
turns spec files and folders into jobs and one-line errors naming file, line, job and field
(``loader``, ``source_map``), mission definitions (``mission``), runner-wide settings
(``settings``), the crontab importer (``crontab``) and the checks a valid spec must pass on
this machine (``preflight``).

It must not touch the ledger, the runner or any other part of Watchkeeper above it (the
import-linter layers contract), and it never raises on bad content: a bad spec is a
``loader.SpecError``, bad settings a ``settings.SettingsError``, each one clear line.
"""
