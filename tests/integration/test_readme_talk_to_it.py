"""The README's "Talk to it" example, sent as written to a standalone cellfit over real HTTP, answers
what the README shows (a live hand session found the shown answer stale: reasons for a node left
out, which cellfit does not send while another node is feasible)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from scheduler.config import parse_settings
from scheduler.extender.runtime import build_runtime
from tests.support.server import running_server

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    text = README.read_text()
    start = text.index("## Talk to it")
    return text[start:text.index("\n## ", start + 1)]


def _request_body() -> str:
    curl = re.search(r"```bash\n(curl .*?)\n```", _section(), re.S)
    assert curl is not None, "no curl command in the README's Talk to it section"
    body = re.search(r"-d '(.*)'$", curl.group(1), re.S)
    assert body is not None, curl.group(1)
    return body.group(1)


def _shown_answers() -> list[dict[str, Any]]:
    """The JSON answers the section shows, with the Node objects' elision left out."""
    blocks = re.findall(r"```json\n(.*?)\n```", _section(), re.S)
    assert len(blocks) == 2, blocks
    return [json.loads(re.sub(r'"items":\[\{"metadata":\{"name":"([^"]+)"\}, \.\.\.\}\]', r'"items":[{"metadata":{"name":"\1"}}]', block))
            for block in blocks]


def _essentials(answer: dict[str, Any]) -> dict[str, Any]:
    return {**{key: value for key, value in answer.items() if key != "Nodes"},
            "Nodes": [node["metadata"]["name"] for node in answer["Nodes"]["items"]]}


def test_the_readme_example_answers_what_the_readme_shows() -> None:
    body = _request_body()
    larger = body.replace('"nvidia.com/gpu": "4"', '"nvidia.com/gpu": "16"')
    assert larger != body, "the README's example no longer asks 4 GPUs, which its second answer changes to 16"
    runtime = build_runtime(parse_settings(""), standalone=True)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as http:
        answers = [http.post("/v1/extender/filter", content=sent, headers={"Content-Type": "application/json"}) for sent in (body, larger)]
    assert [a.status_code for a in answers] == [200, 200]
    assert [_essentials(a.json()) for a in answers] == [_essentials(shown) for shown in _shown_answers()]
