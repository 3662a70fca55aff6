"""The import graph of service/: no API module reaches a worker role.

Built statically by grimp (the parser behind import-linter) from the source, so a new
import fails this test whichever module it is in: an API module that imports a module
importing the detector, the aggregator, the label joiner or the notifier is refused as
surely as a direct import. The chain found is in the failure message.
"""

from __future__ import annotations

import grimp
import pytest

WORKER_ROLES = ("service.detection", "service.profiles.aggregator", "service.cohorts.joiner",
                "service.paging.notifier")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("service", cache_dir=None)


@pytest.mark.parametrize("worker", WORKER_ROLES)
def test_no_api_module_imports_a_worker_role(graph, worker):
    chains = graph.find_shortest_chains(importer="service.api", imported=worker, as_packages=True)
    assert chains == set(), f"service.api reaches {worker}: " + "; ".join(" -> ".join(c) for c in chains)


def test_the_graph_holds_the_imports_the_check_looks_through(graph):
    # What the API shares with the detector is imported by both, never one through the other.
    assert graph.direct_import_exists(importer="service.detection.detector",
                                      imported="service.profiles.evaluation")
    assert graph.direct_import_exists(importer="service.api.drift", imported="service.profiles.evaluation")
    assert graph.find_shortest_chains(importer="service.api", imported="service.profiles.store",
                                      as_packages=True)
