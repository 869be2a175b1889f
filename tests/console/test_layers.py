"""The console's import graph has no circle (app ↔ screens ↔ palette was one): a layers
contract cannot see a cycle inside one layer, so this walks the graph with grimp."""

from __future__ import annotations

import grimp


def test_console_modules_import_each_other_without_a_cycle():
    graph = grimp.build_graph("console", "core", "themes")
    cycles = []
    for module in sorted(m for m in graph.modules if m.startswith("console")):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith("console") and graph.chain_exists(imported, module):
                cycles.append(f"{module} -> {imported} -> … -> {module}")
    assert not cycles, "\n".join(cycles)
