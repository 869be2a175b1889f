"""``make eval``: the judge's figures on both labelled corpora — the project's own
(``corpus.jsonl``) and the fresh one written from other incident reports
(``corpus_fresh.jsonl``) — with the rules alone and through the three fake moods that measure
the pipeline (oracle, ungrounded, quote-anything; ``core.supervisor.moods``). Prints one table
per corpus with each path's goal beside its figure, and exits 1, naming every goal missed, when
one is. No network, no API key.

``python -m tests.eval.figures --show-misses`` lists the cases judged against their label.
"""

from __future__ import annotations

import sys
from pathlib import Path

from core.supervisor.eval import EvalReport, load_corpus, run_eval
from core.supervisor.moods import MOODS

HERE = Path(__file__).parent
CORPORA = (HERE / "corpus.jsonl", HERE / "corpus_fresh.jsonl")
COLUMNS = (("hard", "hard recall"), ("soft", "soft recall"), ("routine", "routine not paged"),
           ("near_miss", "near miss not paged"), ("precision", "precision"))


def _cell(rep: EvalReport, key: str) -> str:
    got = rep.figures()[key]
    if got is None:
        return "n/a"
    goal = rep.goals.get(key)
    mark = "" if goal is None else (" ok" if got >= goal else " MISSED")
    if rep.same_as is not None:
        mark = " =" if got == rep.same_as.figures()[key] else " CHANGED"
    return f"{100 * got:.1f}%{mark}"


def table(path: Path, show_misses: bool) -> list[str]:
    """Print the table for one corpus; return its missed goals (``corpus: path: goal``)."""
    cases = load_corpus(str(path))
    rules, _ = run_eval(cases)
    passes: list[tuple[str, EvalReport]] = [("rules alone", rules)]
    for mood in MOODS:
        rep, _ = run_eval(cases, mood=mood)
        if mood == "ungrounded":
            rep.same_as = rules
        passes.append((f"+ {mood}", rep))
    counts = rules.counts
    print(f"\n{path.name}: {len(cases)} cases ({counts.get('hard', 0)} hard, {counts.get('soft', 0)} soft, "
          f"{counts.get('routine', 0)} routine, {counts.get('near_miss', 0)} near misses)")
    head = f"{'path':<18}" + "".join(f"{title:>22}" for _, title in COLUMNS) + f"{'reach':>10}{'consulted':>11}"
    print(head)
    print("-" * len(head))
    missed: list[str] = []
    for label, rep in passes:
        reach = "-" if rep.reach is None else f"{100 * rep.reach:.1f}%"
        print(f"{label:<18}" + "".join(f"{_cell(rep, k):>22}" for k, _ in COLUMNS)
              + f"{reach:>10}{rep.consulted if label != 'rules alone' else '-':>11}")
        missed += [f"{path.name}: {label}: {m}" for m in rep.missed_goals()]
        if show_misses:
            for m in rep.misses:
                print(f"    miss: {m[:220]}")
    goals = {label: rep.goals for label, rep in passes}
    print("goals: " + "; ".join(f"{label} " + ", ".join(f"{k} >= {100 * v:g}%" for k, v in g.items())
                                 for label, g in goals.items() if label != "+ ungrounded")
          + "; + ungrounded = rules alone")
    return missed


def main() -> None:
    show = "--show-misses" in sys.argv[1:]
    missed: list[str] = []
    for path in CORPORA:
        missed += table(path, show)
    if missed:
        print("\nGOALS MISSED:")
        for m in missed:
            print(f"  {m}")
        raise SystemExit(1)
    print("\nevery goal met on both corpora")


if __name__ == "__main__":
    main()
