"""The HiveD configuration: cell types, physical cells and virtual clusters (VCs).

The YAML keys are camelCase (``cellTypes``, ``childCount``, ``virtualClusters``); misspelled keys
are errors, never silently ignored, because a dropped ``isNodeLevel`` or ``count`` changes what a
tenant is guaranteed. Every problem is reported as ``<field path>: <what is wrong>`` so an operator
can fix the file from the message alone. Schema problems come from pydantic; the structural rules
pydantic cannot express (one parent per cell type, child counts of physical cells, unique node
names, known cell types in VCs) are checked by :func:`structural_problems`. Feasibility of the VC
assignment is a separate step (``scheduler.cells.check``) because it needs the compiled topology.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Iterable, Mapping, Sequence

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from scheduler.core.labels import LABEL_VALUE
from scheduler.errors import ConfigError
from scheduler.messages import MAX_PROBLEMS, clip, first_problems, quoted

# What a configuration may describe, checked before a cell is built: one `childCount:
# 1000000000` would otherwise build cells until memory runs out. The cell tree costs ~0.55 KB a
# cell (measured: 262,144 GPUs in 360,576 cells, ~195 MB), so the bounds keep it well inside the
# chart's 1 GiB; 4x the HiveD paper's 65,536-GPU cluster.
MAX_GPUS: Final = 2**18
MAX_CELLS: Final = 2**20  # GPUs and every cell above them: about 2x the GPUs in usual hierarchies
MAX_LEVELS: Final = 16  # levels of one hierarchy, GPU included (GPU, pair, socket, node, rack: 5)
MAX_CELL_TYPES: Final = 256
_KNOWN_SHOWN: Final = 10  # names listed in "unknown X (known: ...)"


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_by_alias=True, validate_by_name=True, serialize_by_alias=True
    )


class CellTypeSpec(_Model):
    """One level of a cell hierarchy: ``childCount`` cells of ``childType`` make one of these.

    A ``childType`` that is not itself a key of ``cellTypes`` names a leaf GPU type (one GPU)."""

    child_type: str = Field(alias="childType", min_length=1)
    child_count: int = Field(alias="childCount", ge=1)
    is_node_level: bool = Field(default=False, alias="isNodeLevel")


class PhysicalCellSpec(_Model):
    """A physical cell at or above the node level. Node-level cells name their node; higher
    cells list exactly ``childCount`` children. Cells below a node are implied by its type."""

    cell_type: str | None = Field(default=None, alias="cellType", min_length=1)
    node_name: str | None = Field(default=None, alias="nodeName", min_length=1)
    cell_id: str | None = Field(default=None, alias="cellId", min_length=1)
    pinned_cell_id: str | None = Field(default=None, alias="pinnedCellId", min_length=1)
    cell_children: tuple[PhysicalCellSpec, ...] = Field(default=(), alias="cellChildren")


class TopologyConfig(_Model):
    cell_types: dict[str, CellTypeSpec] = Field(alias="cellTypes")
    physical_cells: tuple[PhysicalCellSpec, ...] = Field(alias="physicalCells")


class VirtualCellSpec(_Model):
    cell_type: str = Field(alias="cellType", min_length=1)
    # 0 is allowed: shrinking a VC to nothing is a legitimate (gradual) reconfiguration.
    count: int = Field(ge=0)


class VirtualClusterSpec(_Model):
    """A tenant's guarantee. Written either as ``{cells: [...], pinnedCells: [...]}`` or, when
    nothing is pinned, directly as the list of ``{cellType, count}``."""

    cells: tuple[VirtualCellSpec, ...] = ()
    pinned_cells: tuple[str, ...] = Field(default=(), alias="pinnedCells")
    # Written as the bare list: its cells are at ``<vc>[i]`` in the file, not ``<vc>.cells[i]``.
    _bare: bool = PrivateAttr(default=False)

    @model_validator(mode="wrap")
    @classmethod
    def _accept_bare_list(cls, data: Any, handler: ModelWrapValidatorHandler[VirtualClusterSpec]) -> VirtualClusterSpec:
        if isinstance(data, dict) and not {"cells", "pinnedCells", "pinned_cells"} & set(data) and {"cellType", "count"} & set(data):
            # One cell's keys where the VC's are: its shape is wrong, not the keys' spelling.
            raise ValueError("a virtual cluster is a list of cells, or {cells: [...], pinnedCells: [...]}, not one cell: "
                             "write [{cellType: ..., count: ...}]")
        bare = isinstance(data, (list, tuple))
        spec = handler({"cells": data} if bare else data)
        spec._bare = bare
        return spec

    def __eq__(self, other: object) -> bool:
        """The guarantee, however it was written: the shape of the file is no change (a reload
        from a list to ``{cells: [...]}`` changes no VC)."""
        if not isinstance(other, VirtualClusterSpec):
            return NotImplemented
        return (self.cells, self.pinned_cells) == (other.cells, other.pinned_cells)

    def __hash__(self) -> int:
        return hash((self.cells, self.pinned_cells))

    def cells_path(self, where: str, index: int) -> str:
        """Where the VC's ``index``-th cell is written: ``vision[0]``, or ``vision.cells[0]``."""
        return f"{where}[{index}]" if self._bare else f"{where}.cells[{index}]"

    def written_like(self, written: VirtualClusterSpec) -> VirtualClusterSpec:
        """This guarantee, its cells named as ``written`` (the file's) writes them."""
        if self._bare == written._bare:
            return self
        spec = self.model_copy()
        spec._bare = written._bare
        return spec


class CellsConfig(_Model):
    """The HiveD section of the service configuration. With no ``topology`` the cells are
    discovered from the cluster's nodes; with no ``virtualClusters`` a single VC named
    ``default`` owns every cell."""

    topology: TopologyConfig | None = None
    virtual_clusters: dict[str, VirtualClusterSpec] = Field(default_factory=dict, alias="virtualClusters")
    # How long a booking waits for its reason (scheduler/cells/expiry.py); applied by live reload.
    unseen_pod_grace_seconds: float = Field(
        default=10.0,
        alias="unseenPodGraceSeconds",
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description=(
            "Seconds cells booked at filter for a pod the watch cache has not shown are kept (the "
            "watch may lag kube-scheduler by a moment); then they are released, with an Event. "
            "Only with a cluster connection."
        ),
    )
    gang_booking_timeout_seconds: float | None = Field(
        default=300.0,
        alias="gangBookingTimeoutSeconds",
        ge=0,
        le=86400,
        allow_inf_nan=False,
        description=(
            "Seconds a gang's slots may wait for pods while fewer than its gang-size exist; then "
            "the slots without a pod are released, with an Event on the Job. 0 or null: never "
            "(Helm drops a null value from the chart's values, so write 0 there)."
        ),
    )

    @field_validator("gang_booking_timeout_seconds")
    @classmethod
    def _zero_is_never(cls, seconds: float | None) -> float | None:
        return None if seconds == 0 else seconds
    victim_exit_margin_seconds: float = Field(
        default=60.0,
        alias="victimExitMarginSeconds",
        ge=0,
        le=3600,
        allow_inf_nan=False,
        description=(
            "Seconds past the longest grace period of a guaranteed pod's leaving opportunistic "
            "victims that the pod's booked cells are kept off the nodes kube-scheduler offers; "
            "then (a victim stuck behind a finalizer) the next filter places the pod anew."
        ),
    )


# --------------------------------------------------------------------------- error formatting

_MESSAGES: Final[Mapping[str, str]] = {
    "missing": "is required",
    "extra_forbidden": "is not a known field (check its spelling)",
    "int_parsing": "must be an integer",
    "int_type": "must be an integer",
    "int_from_float": "must be a whole number",
    "string_type": "must be a string",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "string_too_short": "must not be empty",
}


def field_path(loc: Sequence[str | int], *, prefix: str = "") -> str:
    """``("topology", "physicalCells", 0, "nodeName")`` -> ``topology.physicalCells[0].nodeName``."""
    text = prefix
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            part = clip(part)  # a key is the user's text too: a 1 MB VC name is cut
            text += f".{part}" if text else part
    return text or "<root>"


def written_path(loc: Sequence[str | int], document: Any, *, prefix: str = "") -> str:
    """A pydantic error's place as the file writes it (``document``: the file as read), in the
    one shape of every message (``virtualClusters.vision[0].count``, list indexes in brackets):
    a key the model reads a bare list into (a VC written as a list of cells is read as
    ``{cells: [...]}``) is not in the file, and is left out."""
    node, parts = document, []
    for part in loc:
        if isinstance(part, str) and part.startswith("function-"):
            continue  # a validator's marker, no field
        if isinstance(node, list) and isinstance(part, str):
            continue  # the model's own key for the list the user wrote here
        parts.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return field_path(parts, prefix=prefix)


def format_validation_error(error: ValidationError, *, prefix: str = "", most: int | None = None, document: Any = None) -> list[str]:
    """One ``path: message`` line per pydantic error, in the wording operators see everywhere;
    the first ``most`` of them when given; each path as ``document`` (the file as read) writes it."""
    lines: list[str] = []
    for item in error.errors(include_url=False)[:most]:
        kind = item["type"]
        ctx = item.get("ctx") or {}
        if kind == "greater_than_equal":
            message = f"must be >= {ctx.get('ge')}"
        elif kind == "greater_than":
            message = f"must be > {ctx.get('gt')}"
        else:
            message = _MESSAGES.get(kind, item["msg"])
        if kind == "value_error" and isinstance(ctx.get("error"), ValueError):
            message = str(ctx["error"])  # a validator's own sentence
        lines.append(f"{written_path(item['loc'], document, prefix=prefix)}: {message}")
    return lines


def problems_error(problems: Sequence[str], *, total: int | None = None) -> ConfigError:
    """One ``path: message`` per line, the first :data:`~scheduler.messages.MAX_PROBLEMS` of them."""
    return ConfigError(first_problems(problems, separator="\n", total=total))


# --------------------------------------------------------------------------- structural rules


@dataclass(frozen=True, slots=True)
class ChainShape:
    """A linear hierarchy of cell types, from the leaf GPU type (level 1) to the top type."""

    types: tuple[str, ...]  # types[k - 1] is the level-k type; types[0] is the leaf GPU type
    node_level: int


def chains_of(cell_types: Mapping[str, CellTypeSpec]) -> dict[str, ChainShape]:
    """Every cell type -> the chain it belongs to. Assumes :func:`structural_problems` passed."""
    parents = {spec.child_type: name for name, spec in cell_types.items()}
    result: dict[str, ChainShape] = {}
    for top in cell_types:
        if top in parents:
            continue
        down: list[str] = [top]
        while down[-1] in cell_types:
            down.append(cell_types[down[-1]].child_type)
        types = tuple(reversed(down))
        node_level = next((i + 1 for i, t in enumerate(types) if t in cell_types and cell_types[t].is_node_level), 0)
        shape = ChainShape(types=types, node_level=node_level)
        for name in types:
            result[name] = shape
    return result


def _cell_type_problems(cell_types: Mapping[str, CellTypeSpec], prefix: str) -> list[str]:
    problems: list[str] = []
    base = field_path(("topology", "cellTypes"), prefix=prefix)
    if len(cell_types) > MAX_CELL_TYPES:
        return [f"{base}: {len(cell_types):,} cell types; at most {MAX_CELL_TYPES} may be configured"]
    parent_of: dict[str, str] = {}
    for name, spec in cell_types.items():
        if not name:
            problems.append(f"{base}: cell type names must not be empty")
        if spec.child_type == name:
            problems.append(f"{base}.{clip(name)}.childType: a cell type cannot contain itself")
        elif spec.child_type in parent_of:
            # Two parent types would make level-k cells non-uniform (HiveD's hierarchical
            # uniform composability), and the buddy algorithm's guarantee would no longer hold.
            problems.append(
                f"{base}.{clip(name)}.childType: {quoted(spec.child_type)} is already the child type of "
                f"{quoted(parent_of[spec.child_type])}; a cell type can have only one parent type"
            )
        else:
            parent_of[spec.child_type] = name
    if problems:
        return problems
    problems = _cycle_problems(cell_types, base)
    if problems:
        return problems
    tops = [name for name in cell_types if name not in parent_of]
    for top in tops:
        chain = [top]
        while chain[-1] in cell_types:
            chain.append(cell_types[chain[-1]].child_type)
        if len(chain) > MAX_LEVELS:
            problems.append(f"{base}.{clip(top)}: its hierarchy has {len(chain)} levels (GPU included); at most {MAX_LEVELS}")
            continue
        marked = [t for t in chain if t in cell_types and cell_types[t].is_node_level]
        if not marked:
            problems.append(
                f"{base}.{clip(top)}: no cell type in {_chain_text(chain)} has isNodeLevel: true "
                "(exactly one level of every hierarchy is the node)"
            )
        for extra in marked[1:]:
            problems.append(
                f"{base}.{clip(extra)}.isNodeLevel: {quoted(marked[0])} is already the node level of {_chain_text(chain)}"
            )
    return problems


def _cycle_problems(cell_types: Mapping[str, CellTypeSpec], base: str) -> list[str]:
    """Each cycle of child types, once per type on it. With one parent per type, the types form
    chains and cycles, so one walk from each type not yet seen finds them all (linear)."""
    problems: list[str] = []
    settled: set[str] = set()  # on a chain already walked, or on a cycle already reported
    for name in cell_types:
        walk: dict[str, int] = {}  # type -> its position on this walk
        current = name
        while current in cell_types and current not in settled and current not in walk:
            walk[current] = len(walk)
            current = cell_types[current].child_type
        if current in walk:  # came back to a type of this walk: the types from there loop
            cycle = list(walk)[walk[current]:]
            for member in cycle:
                turn = cycle[cycle.index(member):] + cycle[: cycle.index(member)]
                steps = " -> ".join(clip(t) for t in [*turn, member])
                problems.append(f"{base}.{clip(member)}.childType: cycle {steps}")
        settled.update(walk)
    return problems


def _known(names: Iterable[str]) -> str:
    """``A, B, C and 40 more``: the names a reference could have meant, listed once per check
    (not once per wrong reference, which could be 100,000 times 256 names)."""
    ordered = sorted(names)
    shown = ", ".join(clip(name) for name in ordered[:_KNOWN_SHOWN]) or "none"
    return f"{shown} and {len(ordered) - _KNOWN_SHOWN:,} more" if len(ordered) > _KNOWN_SHOWN else shown


def _chain_text(chain: Sequence[str]) -> str:
    return " > ".join(clip(t) for t in chain)


def _physical_problems(topology: TopologyConfig, prefix: str) -> list[str]:
    cell_types = topology.cell_types
    chains = chains_of(cell_types)
    known_types = _known(cell_types)
    problems: list[str] = []
    node_seen: dict[str, str] = {}
    ids_seen: dict[str, str] = {}

    def visit(spec: PhysicalCellSpec, path: tuple[str | int, ...], expected: str | None) -> None:
        where = field_path(path, prefix=prefix)
        cell_type = spec.cell_type or expected
        if cell_type is None:
            problems.append(f"{where}.cellType: is required")
            return
        if expected is not None and spec.cell_type is not None and spec.cell_type != expected:
            problems.append(f"{where}.cellType: is {quoted(spec.cell_type)} but its parent's childType is {quoted(expected)}")
            return
        if cell_type not in cell_types:
            problems.append(f"{where}.cellType: unknown cell type {quoted(cell_type)} (known: {known_types})")
            return
        chain = chains[cell_type]
        level = chain.types.index(cell_type) + 1
        for key, value in (("cellId", spec.cell_id), ("pinnedCellId", spec.pinned_cell_id)):
            if value is None:
                continue
            if value in ids_seen:
                problems.append(f"{where}.{key}: {quoted(value)} is already used at {ids_seen[value]}")
            else:
                ids_seen[value] = f"{where}.{key}"
        if level < chain.node_level:
            problems.append(
                f"{where}.cellType: {quoted(cell_type)} is below the node level ({quoted(chain.types[chain.node_level - 1])}); "
                "physical cells are nodes or groups of nodes"
            )
            return
        if level == chain.node_level:
            if spec.node_name is None:
                problems.append(f"{where}.nodeName: is required for a node-level cell ({quoted(cell_type)})")
            elif spec.node_name in node_seen:
                problems.append(f"{where}.nodeName: node {quoted(spec.node_name)} already appears at {node_seen[spec.node_name]}")
            else:
                node_seen[spec.node_name] = f"{where}.nodeName"
            if spec.cell_children:
                problems.append(f"{where}.cellChildren: a node-level cell's children are implied by its type")
            return
        if spec.node_name is not None:
            problems.append(f"{where}.nodeName: only node-level cells name a node; {quoted(cell_type)} is above the node level")
        want = cell_types[cell_type].child_count
        if len(spec.cell_children) != want:
            problems.append(
                f"{where}.cellChildren: a {quoted(cell_type)} cell has {want} children, {len(spec.cell_children)} are listed"
            )
        for i, child in enumerate(spec.cell_children):
            visit(child, (*path, "cellChildren", i), cell_types[cell_type].child_type)

    for i, top in enumerate(topology.physical_cells):
        visit(top, ("topology", "physicalCells", i), None)
    if not topology.physical_cells:
        problems.append(f"{field_path(('topology', 'physicalCells'), prefix=prefix)}: must list at least one cell")
    return problems


def _tree_size_problems(topology: TopologyConfig, prefix: str) -> list[str]:
    """The GPUs and cells the topology describes, counted from the cell types before a cell is
    built (assumes the structure is sound): a cell type too big on its own names its
    childCount, a topology too big in all names physicalCells."""
    cell_types = topology.cell_types
    base = field_path(("topology", "cellTypes"), prefix=prefix)
    bound = f"a topology may describe at most {MAX_GPUS:,} GPUs in {MAX_CELLS:,} cells"
    problems: list[str] = []
    gpus: dict[str, int] = {}  # cell type -> GPUs in one cell of it
    cells: dict[str, int] = {}  # cell type -> cells in one cell of it (itself and all inside)
    for shape in {shape.types: shape for shape in chains_of(cell_types).values()}.values():
        g = c = 1  # the leaf GPU type
        for name in shape.types[1:]:
            type_spec = cell_types[name]
            g, c = g * type_spec.child_count, 1 + c * type_spec.child_count
            gpus[name], cells[name] = g, c
            if g > MAX_GPUS or c > MAX_CELLS:
                problems.append(
                    f"{base}.{clip(name)}.childCount: {type_spec.child_count:,} x {quoted(type_spec.child_type)} makes one "
                    f"{quoted(name)} cell hold {g:,} GPUs in {c:,} cells; {bound}"
                )
                break  # the types above are bigger still: this is the one to fix
    if problems:
        return problems
    total_gpus = total_cells = nodes = 0
    # (cell, its type): a child may leave cellType out, its parent's childType says it
    stack: list[tuple[PhysicalCellSpec, str]] = [(spec, spec.cell_type or "") for spec in topology.physical_cells]
    while stack:
        spec, cell_type = stack.pop()
        if spec.node_name is not None:
            nodes += 1
            total_gpus += gpus[cell_type]
            total_cells += cells[cell_type]
        else:
            total_cells += 1
            stack.extend((child, child.cell_type or cell_types[cell_type].child_type) for child in spec.cell_children)
    if total_gpus > MAX_GPUS or total_cells > MAX_CELLS:
        where = field_path(("topology", "physicalCells"), prefix=prefix)
        problems.append(f"{where}: the {nodes:,} nodes listed hold {total_gpus:,} GPUs in {total_cells:,} cells; {bound}")
    return problems


def cell_type_problems(cell_types: Mapping[str, CellTypeSpec], *, prefix: str = "") -> list[str]:
    """The cell-type rules alone (one parent per type, no cycles, one node level per chain), for
    cell types that grow at runtime."""
    return _cell_type_problems(cell_types, prefix)


def _pinned_ids(specs: Sequence[PhysicalCellSpec]) -> set[str]:
    found: set[str] = set()
    stack = list(specs)
    while stack:
        spec = stack.pop()
        if spec.pinned_cell_id is not None:
            found.add(spec.pinned_cell_id)
        stack.extend(spec.cell_children)
    return found


def node_name_paths(topology: TopologyConfig, *, prefix: str = "") -> dict[str, str]:
    """Each node a configured topology names -> the field that names it, e.g.
    ``cells.topology.physicalCells[0].cellChildren[2].nodeName``: what a warning about that node
    points the operator to."""
    paths: dict[str, str] = {}

    def visit(spec: PhysicalCellSpec, path: tuple[str | int, ...]) -> None:
        if spec.node_name is not None:
            paths.setdefault(spec.node_name, field_path((*path, "nodeName"), prefix=prefix))
        for i, child in enumerate(spec.cell_children):
            visit(child, (*path, "cellChildren", i))

    for i, top in enumerate(topology.physical_cells):
        visit(top, ("topology", "physicalCells", i))
    return paths


def _pinned_nesting_problems(topology: TopologyConfig, prefix: str) -> list[str]:
    problems: list[str] = []

    def visit(spec: PhysicalCellSpec, path: tuple[str | int, ...], inside: str | None) -> None:
        if spec.pinned_cell_id is not None and inside is not None:
            problems.append(
                f"{field_path((*path, 'pinnedCellId'), prefix=prefix)}: is inside pinned cell {quoted(inside)}; "
                "pinned cells cannot nest"
            )
        for i, child in enumerate(spec.cell_children):
            visit(child, (*path, "cellChildren", i), inside or spec.pinned_cell_id)

    for i, top in enumerate(topology.physical_cells):
        visit(top, ("topology", "physicalCells", i), None)
    return problems


def virtual_cluster_problems(
    virtual_clusters: Mapping[str, VirtualClusterSpec], topology: TopologyConfig, *, prefix: str = ""
) -> list[str]:
    """VC names, cell types and pinned cells; feasibility is checked separately."""
    problems: list[str] = []
    chains = chains_of(topology.cell_types)
    pinned = _pinned_ids(topology.physical_cells)
    known_types, known_pins = _known(chains), _known(pinned)
    claimed: dict[str, str] = {}
    for vc, spec in virtual_clusters.items():
        where = field_path(("virtualClusters", vc), prefix=prefix)
        # The VC is named by a pod label, so its name must be writable as a label value.
        if not vc or not LABEL_VALUE.fullmatch(vc):
            problems.append(f"{where}: {quoted(vc)} is not a valid label value (the VC is named by the pod label)")
        seen: set[str] = set()
        for i, cell in enumerate(spec.cells):
            if cell.cell_type not in chains:
                problems.append(
                    f"{spec.cells_path(where, i)}.cellType: unknown cell type {quoted(cell.cell_type)} "
                    f"(known: {known_types})"
                )
            elif cell.cell_type in seen:
                problems.append(f"{spec.cells_path(where, i)}.cellType: {quoted(cell.cell_type)} is listed twice")
            seen.add(cell.cell_type)
        for i, pin in enumerate(spec.pinned_cells):
            if pin not in pinned:
                problems.append(f"{where}.pinnedCells[{i}]: no physical cell has pinnedCellId {quoted(pin)} (known: {known_pins})")
            elif pin in claimed:
                problems.append(f"{where}.pinnedCells[{i}]: {quoted(pin)} is already pinned to virtual cluster {quoted(claimed[pin])}")
            else:
                claimed[pin] = vc
    return problems


def structural_problems(config: CellsConfig, *, prefix: str = "") -> list[str]:
    """Everything wrong with a schema-valid config except VC feasibility, as ``path: message``."""
    if config.topology is None:
        if any(spec.pinned_cells for spec in config.virtual_clusters.values()):
            return [f"{field_path(('virtualClusters',), prefix=prefix)}: pinned cells need a hand-written topology"]
        return []
    problems = _cell_type_problems(config.topology.cell_types, prefix)
    if problems:
        return problems
    problems = _physical_problems(config.topology, prefix) + _pinned_nesting_problems(config.topology, prefix)
    if problems:
        return problems
    problems = _tree_size_problems(config.topology, prefix)
    if problems:
        return problems
    return virtual_cluster_problems(config.virtual_clusters, config.topology, prefix=prefix)


def parse_cells_schema(data: Mapping[str, Any] | CellsConfig, *, prefix: str = "") -> CellsConfig:
    """Validate the schema only; raise :class:`ConfigError` with one ``path: message`` per line."""
    if isinstance(data, CellsConfig):
        return data
    try:
        return CellsConfig.model_validate(data)
    except ValidationError as error:
        shown = format_validation_error(error, prefix=prefix, most=MAX_PROBLEMS, document=data)
        raise problems_error(shown, total=error.error_count()) from None


def parse_cells_config(data: Mapping[str, Any] | CellsConfig, *, prefix: str = "") -> CellsConfig:
    """Validate the schema and the structure (not feasibility); raise :class:`ConfigError`
    listing every problem, one ``path: message`` per line."""
    config = parse_cells_schema(data, prefix=prefix)
    problems = structural_problems(config, prefix=prefix)
    if problems:
        raise problems_error(problems)
    return config
