"""The explorer's data and page, without a browser: payload content, search rule, escaping, CSP."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest

from gravity_core.errors import ConfigurationError
from gravity_core.explorer import explorer_payload, matches, render_html, write_explorer
from gravity_core.explorer.render import embed_json
from gravity_core.schema import KnowledgeBase
from tests.core.explorer.conftest import HOSTILE, ShownKB, hostile_kb

_DATA = re.compile(r'<script type="application/json" id="gravity-data">(.*?)</script>', re.S)


def page_payload(html: str) -> dict:
    found = _DATA.search(html)
    assert found is not None, "no data element in the page"
    return json.loads(found.group(1))


def test_payload_holds_every_anchor_with_its_profile() -> None:
    kb = hostile_kb()
    payload = explorer_payload(kb, title="t")
    assert [e["id"] for e in payload["entities"]] == list(kb.entities)
    assert [e["id"] for e in payload["events"]] == list(kb.events)
    assert [t["id"] for t in payload["topics"]] == list(kb.topics)
    ben = next(e for e in payload["entities"] if e["id"] == "ben")
    assert [(a["value"], a["current"]) for a in ben["attributes"]] == [("Leeds", False), ("Bristol", True)]
    assert ben["transitions"] == [
        {
            "attribute": "city",
            "old": "Leeds",
            "new": "Bristol",
            "when": "2 Apr 2024 18:30",
            "sources": ["s2:1"],
        }
    ]
    assert ben["events"] == ["ev-1"]
    ana = next(e for e in payload["entities"] if e["id"] == "ana")
    assert ana["relations"][0]["object_id"] == "ben"
    assert ana["co"] == [["ben", 1], ["dog", 1]]
    assert payload["stats"]["state_transitions"] == 1
    assert [(s["id"], s["index"]) for s in payload["sessions"]] == [("s1", 0), ("s2", 1)]
    # Every utterance cited by an anchor can be shown as provenance.
    assert set(payload["utterances"]) == {"s1:1", "s1:2", "s2:1"}


def test_event_dates_come_from_the_normalized_time() -> None:
    payload = explorer_payload(hostile_kb(), title="t")
    moved, named = payload["events"]
    # 'last week' said on 2 Apr 2024: the week of 25-31 March, as day numbers since 1970-01-01.
    assert moved["when"]["raw"] == "last week" and moved["when"]["basis"] == "phrase"
    assert (moved["start_day"], moved["end_day"]) == (19807, 19813)
    assert moved["date"] == "25 March 2024 to 31 March 2024"
    assert moved["trails"][0] == {"trail": "who:ben", "prev": None, "next": "ev-2"}
    # No time phrase: the day it was mentioned.
    assert named["when"]["basis"] == "mention" and named["start_day"] == named["end_day"] == 19783
    topic = payload["topics"][0]
    assert [a["session"] for a in topic["arc"]] == ["s1", "s2"] and topic["events"] == ["ev-1"]


@pytest.mark.parametrize(
    ("query", "text", "expected"),
    [
        ("", "anything", True),
        ("BRISTOL", "moved to bristol", True),
        ("ben bristol", "ben\nmoved to bristol", True),
        ("ben leeds", "ben\nmoved to bristol", False),
        ("n\nm", "ben\nmoved", True),
        ("o\u00a0m", "moved", True),
    ],
)
def test_search_rule(query: str, text: str, expected: bool) -> None:
    assert matches(query, text) is expected


def test_search_text_covers_the_fields_the_page_promises() -> None:
    payload = explorer_payload(hostile_kb(), title="t")
    ben = next(e for e in payload["entities"] if e["id"] == "ben")
    assert matches("leeds", ben["search"]) and matches("city", ben["search"])
    assert not matches("friend_of", ben["search"])  # relations are not searched
    dog = next(e for e in payload["entities"] if e["id"] == "dog")
    assert matches("the dog", dog["search"])
    moved = payload["events"][0]
    assert matches("ben bristol", moved["search"]) and not matches("last week", moved["search"])
    topic = payload["topics"][0]
    assert matches("move", topic["search"]) and not matches("lives in leeds", topic["search"])


def test_embedded_json_cannot_close_the_script_element() -> None:
    data = {"text": HOSTILE, "nested": [HOSTILE]}
    embedded = embed_json(data)
    assert "<" not in embedded and ">" not in embedded and "&" not in embedded
    assert json.loads(embedded) == data


def test_page_keeps_hostile_text_inside_its_data() -> None:
    html = render_html(explorer_payload(hostile_kb(), title=HOSTILE))
    assert html.count("</script>") == 2  # the data element and the code element, nothing more
    assert "alert(" not in html.split('id="gravity-data">', 1)[0]
    assert "<img" not in html
    payload = page_payload(html)
    assert payload["title"] == HOSTILE
    assert next(e for e in payload["entities"] if e["id"] == "dog")["name"] == HOSTILE


def test_page_is_self_contained_and_its_policy_allows_only_its_own_code() -> None:
    html = render_html(explorer_payload(hostile_kb(), title="t"))
    # No address to load anything from (the SVG namespace is a name, never fetched).
    assert set(re.findall(r"https?://[^\s\"'`)]+", html)) == {"http://www.w3.org/2000/svg"}
    code = _DATA.sub("", html)
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=|@import|url\(|fetch\(|XMLHttpRequest", code)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy is not None
    directives = dict(d.strip().split(" ", 1) for d in policy.group(1).split(";"))
    assert directives["default-src"] == "'none'"
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert len(scripts) == 1 and len(styles) == 1

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert directives["script-src"] == digest(scripts[0])
    assert directives["style-src"] == digest(styles[0])


def test_empty_kb_renders() -> None:
    payload = page_payload(render_html(explorer_payload(KnowledgeBase(), title="empty")))
    assert payload["entities"] == payload["events"] == payload["topics"] == [] and payload["sessions"] == []


def test_write_explorer_creates_folders_and_refuses_a_folder(tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper" / "page.html"
    assert write_explorer(hostile_kb(), target, title="t") == target
    assert page_payload(target.read_text(encoding="utf-8"))["title"] == "t"
    assert [p.name for p in target.parent.iterdir()] == ["page.html"]  # no temp file left
    with pytest.raises(ConfigurationError, match="is a folder"):
        write_explorer(hostile_kb(), tmp_path, title="t")


def test_built_kb_payload_matches_the_kb(sample_shown: ShownKB) -> None:
    kb = sample_shown.kb
    payload = page_payload(sample_shown.html.read_text(encoding="utf-8"))
    assert len(payload["entities"]) == len(kb.entities) > 10
    assert len(payload["events"]) == len(kb.events) > 10
    assert len(payload["topics"]) == len(kb.topics) > 3
    assert [s["id"] for s in payload["sessions"]] == kb.sessions()
    cited = {s for e in kb.events.values() for s in e.sources}
    assert cited <= set(payload["utterances"])
    for event in payload["events"]:
        assert event["start_day"] <= event["end_day"]
