"""The policy that follows a verdict or a failed attempt — decided here, above the store, and
handed to it as data or as a rule object: the retry decision (``retry``), the words an open
breaker and the job list show people (``words``).

Pure decisions: nothing here reads or writes the ledger.
"""
