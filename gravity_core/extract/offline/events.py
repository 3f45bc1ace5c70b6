"""Offline event extraction: one 4W1O record per reported clause of a dependency parse.

An event is a declarative clause whose main verb reports something done or planned: past or
perfect tense, a plan ("will", "going to", "'m starting ... in April"), or any tense with a time
phrase of its own. Opinions and states ("love", "think", "feel"), questions, negations and
hypotheticals ("would", "could", "if") are not events. ``who`` is the speaker for "I"/"we" (plus
a named partner: "Tomas and I"), the named person of a name or "my sister Lena" subject, or the one
person named earlier in the turn for "he"/"she"; ``what`` is the clause as said, without its subject
and time phrase; ``when`` the normalized time phrase of the clause (else of its sentence); ``where``
a place or organization named after *at/in/to/from*; ``outcome`` a joined "it was ..." clause;
``quote`` the sentence it was read from, verbatim.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gravity_core.extract.offline.antecedents import Antecedents, object_pronoun
from gravity_core.extract.offline.clauses import CLAUSE_DEPS, Clause, clauses, phrase
from gravity_core.extract.offline.parsing import ParsedTurn
from gravity_core.extract.offline.text import normalize_quotes, word_set
from gravity_core.schema import EntityType, EventObservation, KnowledgeBase, TimeRef
from gravity_core.temporal import TimeMention, normalize

__all__ = ["extract_events"]

_log = logging.getLogger(__name__)

_MAX_WHAT_WORDS = 18
_MAX_OUTCOME_WORDS = 10
_MAX_QUOTE_CHARS = 240

# Verbs that report a state, an opinion or speech, not something that happened.
_STATIVE = word_set(
    """
love like want need hope wish seem mean feel think know believe guess suppose figure realize realise
notice understand remember forget appreciate enjoy prefer hate imagine assume expect agree wonder miss
remind deserve owe look sound taste smell bet say tell ask be can thank worry care matter
admire adore glad happen sound promise
"""
)
_MODAL = frozenset({"would", "could", "should", "might", "may", "must", "can", "ca", "shall"})
_PLAN_AUX = frozenset({"will", "'ll", "wo", "shall"})
_PLACE_PREPS = frozenset({"at", "in", "to", "from", "near", "around", "into", "through"})
_PLACE_LABELS = frozenset({"GPE", "LOC", "FAC", "ORG"})
_FIRST = frozenset({"i", "we", "me"})
_THIRD = frozenset({"he", "she"})
_INDEFINITE = frozenset({"someone", "somebody", "everyone", "everybody", "nobody"})
_HYPOTHETICAL_MARKS = frozenset({"if", "unless", "whether"})
# Verbs whose complement clause is wished, imagined or hedged, not reported.
_UNREAL_FRAMES = word_set(
    "wish hope want imagine wonder dream pretend think guess suppose would love like need"
)
# Verbs whose complement is the plan itself: "thinking about going fishing".
_PLAN_FRAMES = word_set("think consider plan")
# A joined clause with one of these verbs tells how the event ended: "... and won".
_RESULT_VERBS = word_set("win lose place finish come pass fail manage end score beat")
_OUTCOME_SUBJECTS = frozenset({"it", "that", "this", "they"})
_OUTCOME_START = re.compile(
    r"^(?:It|That|This|They)\s+(?:was|were|went|turned\s+out|ended\s+up|felt)\b", re.IGNORECASE
)
_STATIVE_PRESENT = word_set("have do")
_PRECISE_DAYS = 7
_VISIT_VERBS = frozenset({"visit", "reach", "tour", "explore"})
_PLACE_NOUNS = word_set(
    """
park beach gym library museum church school shelter studio restaurant cafe mall store office hospital
camp zoo stadium arena theater theatre cinema lake mountains river club bar pub hotel airport station
trail garden gallery island coast city town village campus clinic bakery shop venue pool rink temple
"""
)
_DROPPED_AUX = frozenset({"'ve", "have", "has", "'d", "had", "did", "do", "'m", "am", "'s", "been"})


@dataclass
class _Draft:
    who: list[str]
    what: str
    when: TimeRef | None
    where: str | None
    outcome: str | None
    quote: str
    sources: list[str] = field(default_factory=list)


def _known_places(kb: KnowledgeBase) -> set[str]:
    return {
        alias.casefold()
        for e in kb.entities.values()
        if e.type in (EntityType.PLACE, EntityType.ORGANIZATION)
        for alias in (e.name, *e.aliases)
    }


def _known_people(kb: KnowledgeBase) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in kb.entities.values():
        if e.type is EntityType.PERSON or e.is_speaker:
            for alias in (e.name, *e.aliases):
                out.setdefault(alias.casefold(), e.name)
    return out


def _name_of(token: Any, turn: ParsedTurn, people: dict[str, str]) -> str | None:
    """The person (or pet) a subject token names, if any.

    The token is a known name, a PERSON entity, or a name in apposition ("my sister Lena").
    """
    for candidate in (token, *(c for c in token.children if c.dep_ in ("appos", "compound"))):
        if candidate.pos_ != "PROPN":
            continue
        ent = turn.entity_at(candidate.i)
        text = (
            re.sub(r"^(?:the|my)\s+", "", ent.text, flags=re.IGNORECASE)
            if ent is not None
            else candidate.text
        )
        known = people.get(text.casefold()) or people.get(candidate.text.casefold())
        if known is not None:
            return known
        if ent is not None and ent.label_ == "PERSON" and " and " not in text:
            return text
    return None


class _EarlierPerson:
    """The single person named before each token of a turn, for a "he"/"she" subject.

    The turn's PERSON entities are read once, in order, noting after each whether exactly one person
    (not the speaker) has been named so far.
    """

    def __init__(self, turn: ParsedTurn, people: Mapping[str, str]) -> None:
        self._turn = turn
        self._people = people
        self._ends: list[int] = []
        self._single: list[str | None] = []  # after each PERSON entity: the one person named so far

    def before(self, i: int) -> str | None:
        """The one person named in the entities that end at or before token ``i``, if just one."""
        if not self._ends:
            self._read()
        count = bisect_right(self._ends, i)
        return self._single[count - 1] if count else None

    def _read(self) -> None:
        speaker = self._turn.utterance.speaker.casefold()
        found: list[str] = []
        self._ends.append(0)  # before any entity: nobody (and the lookup table is not empty)
        self._single.append(None)
        for ent in self._turn.ents:  # in text order, so their ends are ascending
            if ent.label_ != "PERSON":
                continue
            name = self._people.get(ent.text.casefold(), ent.text)
            if name.casefold() != speaker and name not in found:
                found.append(name)
            self._ends.append(ent.end)
            self._single.append(found[-1] if len(found) == 1 else None)


def _who(
    clause: Clause, turn: ParsedTurn, people: dict[str, str], dated: bool, earlier: _EarlierPerson
) -> list[str] | None:
    speaker = turn.utterance.speaker
    subject = clause.subject
    if subject is None:
        return [speaker] if _bare_past(clause, dated, turn) else None
    word = subject.lower_
    conjuncts = [subject, *(c for c in subject.conjuncts)]
    names = [n for n in (_name_of(t, turn, people) for t in conjuncts) if n is not None]
    if any(t.lower_ in _FIRST for t in conjuncts):
        return list(dict.fromkeys([speaker, *(n for n in names if n.casefold() != speaker.casefold())]))
    if names:
        return list(dict.fromkeys(names))
    if word in _THIRD:
        named = earlier.before(subject.i)
        return [named] if named is not None else None
    if dated and _told_subject(subject, turn):
        return [speaker]  # "Last weekend our town held a street festival", "someone wrote me a letter"
    return None


def _bare_past(clause: Clause, dated: bool, turn: ParsedTurn) -> bool:
    """A sentence that starts with a past verb and has no subject: the speaker's own report.

    "Took a short trip to Rome", "Dyed my hair last week": the parser tags such a verb VBD, or VBN
    when no auxiliary precedes it; it must go somewhere (a preposition) or be dated, or take an
    object ("Finished my first quilt"), so a bare "Excited!" or "Done." is not an event.
    """
    verb = clause.verb
    if clause.subject is not None or verb.dep_ != "ROOT":
        return False
    sentence = turn.sentence_of(verb.i)
    first = next((t for t in sentence if not (t.is_punct or t.dep_ in ("intj", "advmod"))), None)
    if first is None or first.i != verb.i:
        return False
    if verb.tag_ != "VBD" and not (verb.tag_ == "VBN" and not clause.aux_lemmas):
        return False
    takes = {c.dep_ for c in verb.children}
    return dated or "prep" in takes or (verb.tag_ == "VBN" and "dobj" in takes)


def _got_passive(verb: Any) -> bool:
    """A past *get* passive ("I got hurt", "we got engaged") reports what happened."""
    return verb.tag_ == "VBN" and any(
        c.dep_ == "auxpass" and c.lemma_.casefold() == "get" and c.tag_ in ("VBD", "VBN")
        for c in verb.children
    )


def _told_subject(subject: Any, turn: ParsedTurn) -> bool:
    """Whether ``subject`` is a common noun phrase or "someone", one the speaker tells about.

    The speaker tells what it did, and the subject stays in ``what``.
    """
    if subject.pos_ == "NOUN":
        return turn.entity_at(subject.i) is None
    return subject.lower_ in _INDEFINITE


def _partners(clause: Clause) -> str | None:
    """Unnamed people joined to "I" in the subject: "My mom and I" -> "my mom"."""
    subject = clause.subject
    if subject is None:
        return None
    conjuncts = [subject, *subject.conjuncts]
    if not any(t.lower_ in _FIRST for t in conjuncts):
        return None
    unnamed = [t for t in conjuncts if t.pos_ == "NOUN" and any(c.dep_ == "poss" for c in t.children)]
    if not unnamed:
        return None
    return " and ".join(
        " ".join(w.lower_ for w in t.subtree if w.dep_ != "cc" and w.i <= t.i) for t in unnamed
    )


def _framed(verb: Any) -> bool:
    """Whether the clause hangs under a wish, a hedge or a condition ("I wish I had gone")."""
    node = verb
    for _ in range(6):
        if node.dep_ in ("ROOT",) or node.head.i == node.i:
            return False
        if any(c.dep_ == "mark" and c.lower_ in _HYPOTHETICAL_MARKS for c in node.children):
            return True
        head = node.head
        if node.dep_ in ("ccomp", "xcomp", "advcl") and head.lemma_.casefold() in _UNREAL_FRAMES:
            return not (head.lemma_.casefold() in _PLAN_FRAMES and node.dep_ == "pcomp")
        if (
            any(c.dep_ == "aux" and c.lemma_.casefold() in _MODAL for c in head.children)
            and node.dep_ == "xcomp"
        ):
            return True
        node = head
    return False


def _planned_by_frame(verb: Any) -> bool:
    """The gerund of "thinking about going fishing" or "considering adopting a kitten" is a plan."""
    if verb.tag_ != "VBG" or verb.dep_ not in ("pcomp", "xcomp"):
        return False
    frame = verb.head.head if verb.dep_ == "pcomp" else verb.head
    return frame.lemma_.casefold() in _PLAN_FRAMES and frame.tag_ == "VBG"


def _reported(clause: Clause, dated: bool, turn: ParsedTurn) -> bool:
    """Whether the clause reports an event (done, or planned), not a state, wish or question."""
    verb = clause.verb
    if verb.pos_ != "VERB" or clause.negated:
        return False
    aux = clause.aux_lemmas
    if aux & _MODAL or any(c.lower_ in _HYPOTHETICAL_MARKS for c in verb.children if c.dep_ == "mark"):
        return False
    if _planned_by_frame(verb):
        return True
    if _framed(verb):
        return False
    lemma = verb.lemma_.casefold()
    if lemma == "go" and any(c.dep_ == "xcomp" for c in verb.children) and verb.tag_ == "VBG":
        return True  # "going to run the marathon"
    if lemma in _PLAN_FRAMES and verb.tag_ == "VBG":
        return any(c.dep_ == "xcomp" for c in verb.children)  # "planning to repaint", not "thinking about"
    if lemma in _STATIVE:
        return False
    if lemma in _STATIVE_PRESENT and verb.tag_ != "VBD" and not aux & {"have"}:
        return False
    if verb.tag_ == "VBD" or (verb.tag_ == "VBN" and aux & {"have", "be"}):
        return True
    if _got_passive(verb) or (verb.tag_ == "VBN" and _bare_past(clause, dated, turn)):
        return True
    if verb.tag_ == "VBG" and "have" in aux:
        return True  # "I've been learning the cello"
    if aux & _PLAN_AUX:
        return True
    return dated and verb.tag_ in ("VBG", "VBP", "VBZ", "VB")


def _time_tokens(clause: Clause, mention: TimeMention) -> set[int]:
    """The clause's tokens of a time phrase, if the phrase is a whole constituent; else none.

    A whole constituent: "on the 2nd", "last weekend". Other phrases give none, so that "the week
    after the race" is not cut to "the after the race".
    """
    inside = [t for t in clause.tokens if mention.start <= t.idx < mention.end]
    if not inside:
        return set()
    ids = {t.i for t in inside}
    roots = [t for t in inside if t.head.i not in ids or t.head.i == t.i]
    if len(roots) != 1 or any(t.i not in ids for t in roots[0].subtree):
        return set()
    root = roots[0]
    prep = root.head
    if root.dep_ == "pobj" and prep.dep_ == "prep" and len(list(prep.children)) == 1:
        ids.add(prep.i)  # "on" of "on the 2nd"
    return ids


def _what(clause: Clause, turn: ParsedTurn, referents: Antecedents) -> str:
    drop: set[int] = set()
    for mention in turn.times_in(clause.tokens[0].idx, clause.end_char):
        drop |= _time_tokens(clause, mention)
    for token in clause.tokens:
        if token.dep_ == "aux" and token.lower_ in _DROPPED_AUX:
            drop.add(token.i)
    tokens = list(clause.tokens)
    subject = clause.subject
    if subject is not None and not subject.conjuncts and _told_subject(subject, turn):
        tokens = sorted([*subject.subtree, *tokens], key=lambda t: t.i)
    words = phrase(tokens, drop).split()
    if words and words[0].casefold() in ("'ll", "wo"):
        words[0] = "will"
    verb = clause.verb
    if verb.dep_ == "relcl" and not any(c.dep_ == "dobj" for c in verb.children):
        # "This scarf I knitted last month" -> "knitted this scarf"
        noun = verb.head
        obj = phrase(t for t in noun.subtree if t.i <= noun.i and t.dep_ not in ("relcl",)).split()
        if obj and noun.doc[noun.left_edge.i].pos_ != "PROPN":
            obj[0] = obj[0].lower()
        words += obj
    partner = _partners(clause)
    if partner is not None:
        words += ["with", *partner.split()]
    what = " ".join(words[:_MAX_WHAT_WORDS])
    pronoun = object_pronoun(t for t in clause.tokens if t.i not in drop)
    if pronoun is None:
        return what
    places = frozenset() if verb.lemma_ in _VISIT_VERBS else _PLACE_NOUNS
    named = referents.of(pronoun, skip=places)
    if named is not None:
        what = re.sub(rf"\b{re.escape(pronoun.text)}\b", lambda m: f"{m.group(0)} ({named})", what, count=1)
    return what


def _substantive(clause: Clause) -> bool:
    """Whether the clause names something: a noun, a number or a place, not only "got one"."""
    return any(
        t.pos_ in ("NOUN", "PROPN", "NUM") and t.i != clause.verb.i and t.lower_ not in ("one", "ones")
        for t in clause.tokens
    ) or any(t.dep_ == "prt" for t in clause.verb.children)


def _where(clause: Clause, turn: ParsedTurn, places: set[str]) -> str | None:
    for token in clause.tokens:
        if token.dep_ == "dobj" and token.head.i == clause.verb.i and token.head.lemma_ in _VISIT_VERBS:
            objects = [token]
        elif token.dep_ == "prep" and token.lower_ in _PLACE_PREPS:
            objects = [c for c in token.children if c.dep_ == "pobj"]
        else:
            continue
        for obj in objects:
            if obj.pos_ == "NOUN" and obj.lemma_.casefold() in _PLACE_NOUNS:
                return phrase(t for t in obj.subtree if t.i <= obj.i)
            ent = turn.entity_at(obj.i)
            if ent is not None and (ent.label_ in _PLACE_LABELS or ent.text.casefold() in places):
                return re.sub(r"^the\s+", "", ent.text, flags=re.IGNORECASE)
            chunk = phrase(t for t in obj.subtree if t.dep_ in ("compound",) or t.i == obj.i)
            if chunk.casefold() in places:
                return chunk
    return None


def _outcome_clauses(clause: Clause) -> list[Any]:
    """Clauses joined to the event that tell how it went.

    Such as "and won", "and I placed third", "- it was delicious".
    """
    out = []
    for child in clause.verb.children:
        if child.dep_ not in ("conj", "parataxis", "ccomp", "advcl") or child.i < clause.verb.i:
            continue
        if child.pos_ not in ("VERB", "AUX"):
            continue
        subject = next((c for c in child.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if (
            subject is not None and subject.lower_ in _OUTCOME_SUBJECTS
        ) or child.lemma_.casefold() in _RESULT_VERBS:
            out.append(child)
    return out


def _outcome(clause: Clause) -> str | None:
    for child in _outcome_clauses(clause):
        skip = {
            t.i
            for c in child.children
            if c.dep_ in ("conj",) and c.pos_ in ("VERB", "AUX")
            for t in c.subtree
        }
        words = phrase(t for t in child.subtree if t.i not in skip).split()
        if words:
            return " ".join(words[:_MAX_OUTCOME_WORDS])
    return None


def _clause_of(token: Any, steps: int) -> Any | None:
    """The clause head a token hangs under: the first verb up its chain of heads that heads a clause.

    It is looked for within ``steps`` heads (the length of its sentence).
    """
    node = token
    for _ in range(steps):
        if node.pos_ in ("VERB", "AUX") and node.dep_ in CLAUSE_DEPS:
            return node
        if node.head.i == node.i:
            return None
        node = node.head
    return None


def _time_owners(turn: ParsedTurn, sent: Any) -> tuple[list[TimeMention], list[Any | None]]:
    """The sentence's time phrases and the clause head each hangs under (``None``: none found)."""
    in_sentence = turn.times_in(sent.start_char, sent.end_char)
    owners: list[Any | None] = []
    for mention in in_sentence:
        token = next((t for t in sent if t.idx <= mention.start < t.idx + len(t.text)), None)
        owners.append(_clause_of(token, len(sent)) if token is not None else None)
    return in_sentence, owners


def _time_of(clause: Clause, in_sentence: list[TimeMention], owners: list[Any | None]) -> TimeMention | None:
    """The clause's time phrase: the one attached to its verb, else the sentence's only one.

    The first is attached in the parse ("on Sunday we took them"); the second is the sentence's only
    time phrase, taken when no other clause holds it (``in_sentence`` and ``owners``: the sentence's
    :func:`_time_owners`).
    """
    attached = [
        m
        for m, owner in zip(in_sentence, owners, strict=True)
        if owner is not None and owner.i == clause.verb.i
    ]
    if attached:
        return attached[0]
    # "While volunteering yesterday, I met Jean": an adverbial clause's time frames its main clause.
    framing = [
        m
        for m, owner in zip(in_sentence, owners, strict=True)
        if owner is not None and owner.dep_ == "advcl" and owner.head.i == clause.verb.i
    ]
    if framing:
        return framing[0]
    unowned = [
        m for m, owner in zip(in_sentence, owners, strict=True) if owner is None or owner.dep_ == "ROOT"
    ]
    if len(in_sentence) == 1 and unowned:
        return unowned[0]
    return None


def _planned(clause: Clause) -> bool:
    """Whether the clause is about what is to come.

    It says "will", "going to", "planning to", or is in the present tense ("I start at Harbourside
    on the 2nd", "Sami is moving up in October").
    """
    verb = clause.verb
    aux = clause.aux_lemmas
    if aux & _PLAN_AUX or verb.lemma_.casefold() in _PLAN_FRAMES | {"go"} and verb.tag_ == "VBG":
        return True
    return verb.tag_ in ("VBP", "VBZ") or (verb.tag_ == "VBG" and "have" not in aux and "be" in aux)


def _resolved(time: TimeMention | None, clause: Clause, turn: ParsedTurn) -> TimeRef | None:
    """The clause's time, read forward for a plan ("in October" said in August is this October)."""
    if time is None:
        return None
    if _planned(clause) and time.time.basis == "phrase":
        return normalize(time.text, turn.utterance.timestamp, prefer="future")
    return time.time


def _sentence_events(
    turn: ParsedTurn,
    sent: Any,
    places: set[str],
    people: dict[str, str],
    earlier: _EarlierPerson,
    referents: Antecedents,
) -> list[_Draft]:
    text = sent.text.strip()
    if not text or text.endswith("?"):
        return []
    drafts: list[_Draft] = []
    consumed: set[int] = set()
    in_sentence, owners = _time_owners(turn, sent)
    for clause in clauses(sent):
        if clause.verb.i in consumed:
            continue
        time = _time_of(clause, in_sentence, owners)
        if not _reported(clause, time is not None, turn):
            continue
        consumed.update(c.i for c in _outcome_clauses(clause))
        who = _who(clause, turn, people, time is not None, earlier)
        if who is None:
            continue
        what = _what(clause, turn, referents)
        if len(what.split()) < 2 or not (_substantive(clause) or time is not None):
            continue
        drafts.append(
            _Draft(
                who=who,
                what=what,
                when=_resolved(time, clause, turn),
                where=_where(clause, turn, places),
                outcome=_outcome(clause),
                quote=text[:_MAX_QUOTE_CHARS],
                sources=[turn.utterance.id],
            )
        )
    return drafts


_ABOUT_THEM = re.compile(
    r"^(?:(?:so|and|oh|hey|wow)[,!]?\s+)?(?:how\s+(?:was|did|were)\s+your\s+(?P<how>[^?]{3,80}?)(?:\s+go)?\s*\?"
    r"|congrat(?:s|ulations)\s+on\s+(?P<congrats>(?:your\s+|the\s+)?[^.!?,]{3,80}))",
    re.IGNORECASE,
)


def _their_event(turn: ParsedTurn, other: str, sent: Any) -> _Draft | None:
    """An event of the other speaker stated by a dated question or a congratulation.

    "How was your trip to Lisbon last week?" and "Congrats on winning the final!" say that
    something happened to the person addressed.
    """
    sentence = normalize_quotes(sent.text)
    match = _ABOUT_THEM.match(sentence)
    if match is None:
        return None
    group = "how" if match.group("how") is not None else "congrats"
    offset = sent.start_char
    local = turn.times_in(offset + match.start(group), offset + match.end(group))
    if group == "how" and not local:
        return None  # "How was your day?": small talk unless the question dates it
    raw = match.group(group)
    for mention in reversed(local):
        a, b = mention.start - offset - match.start(group), mention.end - offset - match.start(group)
        raw = raw[:a] + raw[b:]
    what = re.sub(r"^your\s+", "", " ".join(raw.split()).strip(" ,.!"), flags=re.IGNORECASE)
    if not what or what.split()[0].lower() in {"how", "what", "that", "this", "it", "all", "everything"}:
        return None
    if group == "congrats":
        what = f"congratulated on {what}"
    return _Draft(
        [other], what, local[0].time if local else None, None, None, sentence.strip(), [turn.utterance.id]
    )


def _precise(when: TimeRef) -> bool:
    """Precise enough to date the next sentence's action: a day, a week or a weekend."""
    return when.start is not None and when.end is not None and (when.end - when.start).days <= _PRECISE_DAYS


def _key(draft: _Draft) -> tuple[str, str, str]:
    when_key = draft.when.raw.casefold() if draft.when is not None else ""
    if draft.when is not None and draft.when.start is not None:
        when_key = draft.when.start.isoformat()
    return (draft.who[0].casefold(), re.sub(r"\W+", " ", draft.what.casefold()).strip(), when_key)


def extract_events(
    turns: Sequence[ParsedTurn], kb: KnowledgeBase, people: Mapping[str, str] | None = None
) -> list[EventObservation]:
    """Event observations found in a parsed batch.

    Args:
        turns: The batch's utterances with their parses.
        kb: Read-only context: known people and places help fill ``who`` and ``where``.
        people: casefolded name -> name of the people (and pets) the batch's entity extraction found.

    Returns:
        Events in utterance order; an event reported twice in the batch is kept once with
        both sources.
    """
    places = _known_places(kb)
    known = _known_people(kb)
    people = {**(people or {}), **known}
    for turn in turns:
        people.setdefault(turn.utterance.speaker.casefold(), turn.utterance.speaker)
    kb_speakers = [e.name for e in kb.entities.values() if e.is_speaker]
    speakers = list(dict.fromkeys([*(t.utterance.speaker for t in turns), *kb_speakers]))
    drafts: dict[tuple[str, str, str], _Draft] = {}
    for turn in turns:
        others = [s for s in speakers if s != turn.utterance.speaker]
        previous: list[_Draft] = []
        carried: TimeRef | None = None  # "Something great happened last Friday. I ran ..."
        earlier = _EarlierPerson(turn, people)
        referents = Antecedents(turn.noun_chunks)
        for sent in turn.sentences:
            found = _sentence_events(turn, sent, places, people, earlier, referents)
            if not found and len(others) == 1:
                theirs = _their_event(turn, others[0], sent)
                found = [theirs] if theirs is not None else []
            text = sent.text.strip()
            if not found and previous and previous[-1].outcome is None and _OUTCOME_START.match(text):
                previous[-1].outcome = " ".join(text.rstrip(".!").split()[:_MAX_OUTCOME_WORDS])
            sentence_times = turn.times_in(sent.start_char, sent.end_char)
            for draft in found:
                if draft.when is None and carried is not None:
                    draft.when = carried
            # A precise date carries to the next sentence's undated events: "Something great happened
            # last Friday. I ran ...", "Tomas was here last weekend. He beat me by four seconds."
            dated = [d.when for d in found if d.when is not None]
            if dated:
                carried = dated[-1]
            elif len(sentence_times) == 1:
                carried = sentence_times[0].time
            elif sentence_times:
                carried = None
            if carried is not None and not _precise(carried):
                carried = None
            previous = found or previous
            for draft in found:
                old = drafts.setdefault(_key(draft), draft)
                if old is not draft and turn.utterance.id not in old.sources:
                    old.sources.append(turn.utterance.id)
    out = [
        EventObservation(
            who=d.who,
            what=d.what,
            when=d.when,
            where=d.where,
            outcome=d.outcome,
            quote=d.quote,
            sources=d.sources,
        )
        for d in drafts.values()
    ]
    _log.debug("%d event observations from %d utterances", len(out), len(turns))
    return out
