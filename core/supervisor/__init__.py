"""The supervisor: verifies every handoff (``verify``), judges every outcome with the rules
(``rules``, against learned ``baseline`` ranges and raw ``evidence``) and, where the rules cannot
vouch for a success, the optional Claude judge (``reach``, ``consult``, ``claude``,
``grounding``), measures that judgement (``eval``, ``moods``) and delivers notifications from
the outbox (``notify``); ``policy`` decides what follows a verdict.

It must never let the model silence a hard class (failed, timed out, orphaned, verification
failed, late result, runner gap) nor page without a quote checked against the evidence; it
writes the ledger only through the store, and must not import the sweep, missions, the runner
or the console.
"""
