"""deploy/examples/interchangeable-job.yaml quotes the Estimated Event its user will read in
``kubectl describe job``. It quoted "estimated gpu 41 min ± 3 min, cpu 6.2 h ...", while the
estimator names the configurations in the order the Job states them (cpu first there): the Event
read "estimated cpu ..., gpu ..." (user29, live)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "interchangeable-job.yaml"


def test_the_example_quotes_its_configurations_in_their_order() -> None:
    text = EXAMPLE.read_text()
    kinds = list(json.loads(yaml.safe_load(text)["metadata"]["annotations"]["cellfit.io/configurations"]))
    (quoted,) = re.findall(r'kubectl describe job \S+\s+# "estimated ([^"]*)"', text)
    assert re.findall(r"\b(cpu|gpu) \d", quoted) == kinds, quoted
