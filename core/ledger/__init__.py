"""The ledger: the one store of jobs, runs, outcomes, the audit trail, escalations, the
notification outbox, runners and missions, on SQLite (embedded) or PostgreSQL (a fleet).

The code above it sees only the store protocol (``store.Store``, implemented by
``sql_store.SqlStore``) and typed records (``records``), plus the console's bounded pages
(``reads``). Every state change here is atomic and compare-and-set on the state it expects,
with its audit event (``core.vocabulary.AuditEvent``) in the same transaction.

It is the only place with SQL, and only its connection, dialect, writer, wake-up and
integrity-check modules touch a database driver (an import-linter contract names them). It must not import the runner, the
sweep, the supervisor, missions or actions, and it never decides policy: what follows a
verdict or a failed attempt is decided above it and handed in as data.
"""
