"""No import cycle among the modules of scheduler.cells (TYPE_CHECKING imports included): each
module can be read knowing only the ones it imports, and the allocator's parts stay layered
(virtual_clusters -> ledger -> bookkeeping, planning -> gangs, recovery -> allocator)."""

import grimp


def test_scheduler_cells_has_no_import_cycle() -> None:
    graph = grimp.build_graph("scheduler", include_external_packages=False)
    modules = sorted(m for m in graph.modules if m == "scheduler.cells" or m.startswith("scheduler.cells."))
    cycles = [
        (module, imported)
        for module in modules
        for imported in sorted(graph.find_modules_directly_imported_by(module))
        if imported in modules and imported != "scheduler.cells" and graph.chain_exists(importer=imported, imported=module)
    ]
    assert cycles == []
