"""Phase 3's shortest paths in Python (``transport._dense_dijkstra``) answer exactly as scipy's
Dijkstra does, or not at all: the same distances and the same predecessors, on random small
graphs with zero-weight edges, missing edges and several sources, whole-number weights (ties)
in half of them."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

from scheduler.matching.transport import _dense_dijkstra, _shortest_paths, _sparse


def random_graph(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Groups and a sink (the last node, no edge out), as phase 3's graph is."""
    nodes = int(rng.integers(2, 14))
    graph = rng.integers(0, 4, size=(nodes, nodes)).astype(float) if rng.random() < 0.5 else rng.uniform(0, 10, size=(nodes, nodes))
    graph[rng.random((nodes, nodes)) < rng.uniform(0, 0.8)] = np.inf
    graph[rng.random((nodes, nodes)) < 0.1] = 0.0
    np.fill_diagonal(graph, np.inf)
    graph[-1, :] = np.inf
    sources = np.flatnonzero(rng.random(nodes - 1) < 0.3)
    return graph, sources if sources.shape[0] else np.array([0])


@pytest.mark.parametrize("seed", range(4))
def test_the_python_dijkstra_answers_as_scipy_s_or_declines(seed: int) -> None:
    rng = np.random.default_rng(6900 + seed)
    answered = declined = 0
    for _ in range(1500):
        graph, sources = random_graph(rng)
        distance, previous, _ = dijkstra(_sparse(graph), indices=sources, min_only=True, return_predecessors=True)
        found = _dense_dijkstra(graph, sources)
        if found is None:
            declined += 1
        else:
            answered += 1
            assert found[0].tolist() == distance.tolist()
            assert found[1].tolist() == previous.tolist()
        chosen = _shortest_paths(graph, sources)
        assert chosen[0].tolist() == distance.tolist() and chosen[1].tolist() == previous.tolist()
    assert answered > 300 and declined > 300  # both ways taken


def test_a_distance_reached_from_two_nodes_is_left_to_scipy() -> None:
    # Node 3 is 2 away through node 1 and through node 2: which one scipy keeps is its heap's.
    inf = np.inf
    graph = np.array([[inf, 1.0, 1.0, inf], [inf, inf, inf, 1.0], [inf, inf, inf, 1.0], [inf, inf, inf, inf]])
    assert _dense_dijkstra(graph, np.array([0])) is None
    graph[2, 3] = 1.5
    distance, previous = _dense_dijkstra(graph, np.array([0]))  # type: ignore[misc]
    assert distance.tolist() == [0.0, 1.0, 1.0, 2.0] and previous.tolist() == [-9999, 0, 0, 1]
