"""The explorer page in a real headless Chromium: it loads with no error and no network request,
shows the KB's counts, filters all three views from the search box, and opens profiles on click.

Needs Playwright (test extra) and Chromium (`apt-get install -y chromium`); screenshots go to
$GRAVITY_ARTIFACTS/explorer (default tests/artifacts/explorer).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gravity_core.explorer import write_explorer
from gravity_core.schema import EntityAnchor, EventAnchor, KnowledgeBase, TopicAnchor
from tests.core.explorer.browser import VIEWPORT
from tests.core.explorer.conftest import HOSTILE, ShownKB, artifacts_dir, hostile_kb


@dataclass
class OpenPage:
    page: Any
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def assert_clean(self, html: Path) -> None:
        assert [m for m in self.console if m[0] in ("error", "warning")] == []
        assert self.errors == [] and self.dialogs == []
        assert self.requests == [html.as_uri()], "the page must load nothing but itself"

    def visible(self, selector: str) -> int:
        return int(self.page.locator(f"{selector}:visible").count())

    def shown(self, testid: str) -> int:
        return int(self.page.get_attribute(f'[data-testid="{testid}"]', "data-count"))

    def search(self, query: str) -> None:
        """Type ``query`` into the search box and wait until the page has applied it."""
        self.page.fill('[data-testid="search"]', query)
        self.page.wait_for_function("q => document.body.dataset.query === q", arg=query, timeout=5_000)

    def details(self) -> str:
        return str(self.page.inner_text('[data-testid="details"]'))


@contextmanager
def open_page(browser: Any, html: Path) -> Iterator[OpenPage]:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    opened = OpenPage(page)
    page.on("console", lambda m: opened.console.append((m.type, m.text)))
    page.on("pageerror", lambda e: opened.errors.append(str(e)))
    page.on("request", lambda r: opened.requests.append(r.url))

    def dialog(d: Any) -> None:
        opened.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    try:
        page.goto(html.as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=15_000)
        yield opened
    finally:
        context.close()


# ---------- expectations computed from the KB ----------


def relation_edges(kb: KnowledgeBase) -> int:
    return len(
        {
            (e.id, r.object_id, r.relation)
            for e in kb.entities.values()
            for r in e.relations
            if r.object_id in kb.entities and r.object_id != e.id
        }
    )


def _has_all(terms: list[str], fields: list[str | None]) -> bool:
    texts = [f.lower() for f in fields if f]
    return all(any(term in text for text in texts) for term in terms)


def entity_hits(kb: KnowledgeBase, terms: list[str]) -> int:
    def fields(e: EntityAnchor) -> list[str | None]:
        return [e.name, *e.aliases, *(a.name for a in e.attributes), *(a.value for a in e.attributes)]

    return sum(_has_all(terms, fields(e)) for e in kb.entities.values())


def event_hits(kb: KnowledgeBase, terms: list[str]) -> int:
    def fields(e: EventAnchor) -> list[str | None]:
        return [*e.who, e.what, e.where, e.outcome]

    return sum(_has_all(terms, fields(e)) for e in kb.events.values())


def topic_hits(kb: KnowledgeBase, terms: list[str]) -> int:
    def fields(t: TopicAnchor) -> list[str | None]:
        return [t.label, *t.keywords]

    return sum(_has_all(terms, fields(t)) for t in kb.topics.values())


def richest_entity(kb: KnowledgeBase) -> EntityAnchor:
    return max(kb.entities.values(), key=lambda e: (len(e.transitions), len(e.attributes), e.mentions))


# ---------- tests ----------


@pytest.mark.parametrize("shown_fixture", ["sample_shown", "locomo_shown"])
def test_page_loads_clean_and_renders_the_kb_counts(
    shown_fixture: str, browser: Any, request: pytest.FixtureRequest
) -> None:
    shown: ShownKB = request.getfixturevalue(shown_fixture)
    kb = shown.kb
    with open_page(browser, shown.html) as opened:
        opened.assert_clean(shown.html)
        assert opened.visible("circle.entity-node") == len(kb.entities) > 0
        assert opened.visible("g.event-item") == len(kb.events) > 0
        assert opened.visible("rect.topic-bar") == len(kb.topics) > 0
        assert opened.visible("circle.topic-seg") == sum(len(t.arc) for t in kb.topics.values())
        assert opened.visible('[data-testid="relation-edge"]') == relation_edges(kb)
        assert (opened.shown("entity-count"), opened.shown("event-count"), opened.shown("topic-count")) == (
            len(kb.entities),
            len(kb.events),
            len(kb.topics),
        )
        assert opened.page.inner_text('[data-testid="entity-count"]') == f"{len(kb.entities)} entities"
        stats = opened.page.inner_text('[data-testid="kb-stats"]')
        assert f"{len(kb.utterances)} utterances" in stats and f"{len(kb.sessions())} sessions" in stats
        opened.page.screenshot(path=str(artifacts_dir() / f"{shown_fixture}.png"))


def test_search_filters_all_three_views(sample_shown: ShownKB, browser: Any) -> None:
    kb = sample_shown.kb
    # A pet's name, a two-term query, then nothing: the expected counts come from the KB itself.
    pet = max((e for e in kb.entities.values() if e.type == "pet"), key=lambda e: e.mentions)
    speaker = next(e for e in kb.entities.values() if e.is_speaker)
    queries = [pet.name.lower(), f"{speaker.name.upper()}  {pet.name.lower()[:4]}", "zzqx-no-such-thing"]
    with open_page(browser, sample_shown.html) as opened:
        for query in queries:
            terms = query.lower().split()
            expected = (entity_hits(kb, terms), event_hits(kb, terms), topic_hits(kb, terms))
            opened.search(query)
            seen = (
                opened.visible("circle.entity-node"),
                opened.visible("g.event-item"),
                opened.visible("rect.topic-bar"),
            )
            counts = (opened.shown("entity-count"), opened.shown("event-count"), opened.shown("topic-count"))
            assert seen == counts == expected, query
            assert expected < (len(kb.entities), len(kb.events), len(kb.topics)), query
        assert expected == (0, 0, 0)
        assert "No event matches the filter." in (opened.page.text_content('[data-testid="timeline"]') or "")
        # Escape clears the filter.
        opened.page.press('[data-testid="search"]', "Escape")
        assert opened.visible("circle.entity-node") == len(kb.entities)
        assert opened.visible("g.event-item") == len(kb.events)
        assert opened.visible("rect.topic-bar") == len(kb.topics)
        opened.assert_clean(sample_shown.html)


def test_clicking_an_entity_shows_its_profile(sample_shown: ShownKB, browser: Any) -> None:
    entity = richest_entity(sample_shown.kb)
    assert entity.transitions, "the sample conversation should give someone a state change"
    with open_page(browser, sample_shown.html) as opened:
        opened.page.click(f'g.entity[data-id="{entity.id}"] circle')
        assert opened.page.inner_text('[data-testid="details-title"]') == entity.name
        text = opened.details()
        for attribute in entity.attributes:
            assert attribute.value in text
        assert opened.visible('[data-testid="attribute"]') == len(entity.attributes)
        for change in entity.transitions:
            assert f"{change.old} \u2192 {change.new}" in text
        for relation in entity.relations:
            assert relation.object in text
        assert (
            opened.page.get_attribute(f'g.entity[data-id="{entity.id}"]', "class")
            == "entity speaker selected"
        )
        opened.page.screenshot(path=str(artifacts_dir() / "entity-profile.png"))
        opened.assert_clean(sample_shown.html)


def test_clicking_an_event_and_a_topic_shows_their_anchors(sample_shown: ShownKB, browser: Any) -> None:
    kb = sample_shown.kb
    event = next(
        e for e in kb.events.values() if e.when is not None and e.when.raw and e.when.basis == "phrase"
    )
    when = event.when
    assert when is not None
    topic = max(kb.topics.values(), key=lambda t: (len(t.arc), t.id))
    with open_page(browser, sample_shown.html) as opened:
        opened.page.click(f'g.event-item[data-id="{event.id}"]')
        text = opened.details()
        assert opened.page.inner_text('[data-testid="details-title"]') == event.what
        assert f"\u201c{when.raw}\u201d" in text and when.label() in text
        for source in event.sources:
            assert kb.utterances[source].text in text
        for participant in event.who:
            assert participant in text
        opened.page.click(f'g.topic-row[data-id="{topic.id}"] .topic-label')
        assert opened.page.inner_text('[data-testid="details-title"]') == topic.label
        summaries = opened.page.locator('[data-testid="arc-item"]').all_inner_texts()
        assert len(summaries) == len(topic.arc)
        for snapshot, shown in zip(topic.arc, summaries, strict=True):
            assert snapshot.summary in shown
        opened.assert_clean(sample_shown.html)


def test_hostile_text_is_shown_as_text(tmp_path: Path, browser: Any) -> None:
    kb = hostile_kb()
    html = write_explorer(kb, tmp_path / "hostile.html", title=HOSTILE)
    with open_page(browser, html) as opened:
        assert opened.visible("circle.entity-node") == 3 and opened.visible("g.event-item") == 2
        opened.page.click('g.entity[data-id="dog"] circle')
        assert opened.page.text_content('[data-testid="details-title"]') == HOSTILE
        assert opened.page.text_content('[data-testid="kb-title"]') == HOSTILE
        opened.page.click('g.entity[data-id="ben"] circle')
        assert "Leeds \u2192 Bristol" in opened.details()
        assert opened.page.locator("img, iframe").count() == 0
        opened.assert_clean(html)


def test_empty_kb_page_loads_clean(tmp_path: Path, browser: Any) -> None:
    html = write_explorer(KnowledgeBase(), tmp_path / "empty.html", title="empty")
    with open_page(browser, html) as opened:
        assert (opened.shown("entity-count"), opened.shown("event-count"), opened.shown("topic-count")) == (
            0,
            0,
            0,
        )
        assert "No entities in this KB." in opened.page.inner_text("body")
        opened.assert_clean(html)
