"""Content words of chat text, and TF-IDF keyword ranking against the conversation so far.

Offline and model-free: a fixed English stop list (with the fillers of casual chat, which carry
no topic), light plural lemmatization, and document frequencies counted per utterance.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "STOP_WORDS",
    "DocumentFrequencies",
    "Token",
    "content_lemma",
    "content_tokens",
    "lemmatize",
    "matched_words",
    "rank_keywords",
]

_FUNCTION_WORDS = """
a about above across after afterwards again against all almost alone along already also although always
am among amongst an and another any anyhow anyone anything anyway anyways anywhere are around as at be
became because become becomes becoming been before beforehand behind being below beside besides between
beyond both but by can cannot could did do does doing done down during each either else elsewhere enough
etc even ever every everybody everyone everything everywhere except few for former formerly from further
had has have having he her here hereafter hereby herein hers herself him himself his how however i if in
indeed into is it its itself just least less many may me meanwhile might mine more moreover most mostly
much must my myself namely neither never nevertheless next no nobody none noone nor not nothing now
nowhere of off often on once one only onto or other others otherwise our ours ourselves out over own
per perhaps please quite rather same several she should since so some somebody somehow someone something
sometime sometimes somewhere still such than that the their theirs them themselves then thence there
thereafter thereby therefore therein thereupon these they this those though through throughout thru thus
to together too toward towards under until up upon us very via was we were what whatever when whence
whenever where whereafter whereas whereby wherein whereupon wherever whether which while whither who
whoever whole whom whose why will with within without would yet you your yours yourself yourselves
ve ll re im dont cant wont didnt doesnt isnt wasnt arent couldnt wouldnt shouldnt ive youre thats
"""

# Words of casual chat that say how someone feels about a subject, not what the subject is.
_CHAT_FILLER = """
hey hi hello hiya bye goodbye thanks thank thx welcome yeah yea yep yes nope okay ok sure oh ooh wow whoa
haha lol omg hmm um uh ah aw aww cool awesome amazing great good nice lovely beautiful gorgeous wonderful
fantastic incredible terrific super pretty fun funny glad happy excited exciting proud sorry sad bad
totally definitely really truly actually absolutely seriously certainly probably maybe literally
basically especially honestly simply
thing stuff lot lots bit kind sort way ways time times day days today tonight yesterday tomorrow week
weeks weekend month months year years lately recently recent ago soon later last new old big little
small huge whole able
feel feels feeling felt think thinks thinking thought know knows knowing knew known sound sounds
sounded look looks looking looked seem seems seemed hear hears hearing heard see sees seeing saw seen
tell tells telling told talk talks talking talked say says saying said share shares sharing shared
mean means meant hope hopes hoping hoped wish wishes wishing wished want wants wanting wanted need needs
needing needed like likes liked love loved loves loving get gets getting got gotten make makes making
made take takes taking took taken go goes going gone went come comes coming came give gives giving gave
given keep keeps keeping kept let lets put puts try tries trying tried use used using find finds found
guess bet wonder wondering glad reckon remember remind reminds reminded
thing things anything everything nothing something someone everyone anyone
guys guy buddy dude pal folks gonna wanna gotta kinda sorta
photo photos picture pictures pic pics image images snapshot shot
mind wait catch chat chatting check checking checked bring brings bringing brought help helps helping
helped express expresses expressing expressed agree agreed agrees appreciate appreciated appreciates
important special best better worse worst back part sense far true real tough hard easy strong sweet
stunning blast wicked chance idea congrats congratulations awe enjoy enjoys enjoyed enjoying fun
lucky moment moments life lives people person stoked cute thoughtful finally inspiring inspired inspire
inspires man yay yup nah course means totally worth loads tons super wanna doing done does
continue continues continuing continued start starts starting started follow follows following
finding holding stay stays staying positive add adds meet meets
two three four five six seven eight nine ten eleven twelve twenty thirty fifty hundred thousand first
second third couple
"""

STOP_WORDS: frozenset[str] = frozenset((_FUNCTION_WORDS + _CHAT_FILLER).split())

# Singular forms ending in "ie": their plural must not become "-y".
_IE_SINGULARS = """
movie cookie selfie brownie rookie zombie hoodie goalie smoothie pie tie lie calorie prairie genie hippie
indie veggie aussie bootie freebie sweetie auntie birdie
"""
_IE_WORDS = frozenset(_IE_SINGULARS.split())
# Words ending in "s" that are not plurals.
_S_SINGULARS = """
news series species lens bus gas yes this his its was has does is us plus bonus campus virus chaos canvas
atlas christmas texas paris athletics physics mathematics politics economics gymnastics olympics aerobics
diabetes
"""
_KEEP_S = frozenset(_S_SINGULARS.split())
_IRREGULAR = {
    "children": "child",
    "men": "man",
    "women": "woman",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
    "kiddos": "kiddo",
}

_WORD = re.compile(r"[A-Za-z][A-Za-z'’+-]*[A-Za-z+]|[A-Za-z]")
_MIN_LEN = 3


# Endings of adjectives, adverbs and participles: such words describe a subject rather than name it.
_MODIFIER_ENDINGS = ("ed", "ly", "ful", "ous", "less")
_NOUNS_LIKE_MODIFIERS = """
shed sled seed speed weed breed feed hundred family july italy ally belly jelly rally supply reply
butterfly assembly anomaly monopoly bully lily holly dolly
"""
_NOT_MODIFIERS = frozenset(_NOUNS_LIKE_MODIFIERS.split())
_MODIFIER_PENALTY = 0.6


def lemmatize(word: str) -> str:
    """Reduce a lowercase word to a rough singular form ('agencies' -> 'agency', 'kids' -> 'kid')."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 3 or not word.endswith("s") or word in _KEEP_S:
        return word
    if word.endswith("ies") and len(word) > 4:
        stem = word[:-3]
        return stem + "ie" if stem + "ie" in _IE_WORDS else stem + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith(("ches", "shes", "xes", "zzes")):
        return word[:-2]
    if word.endswith(("ss", "us", "is", "ous")):
        return word
    return word[:-1]


@dataclass(frozen=True)
class Token:
    """One content word: its lemma (the matching key) and the surface form as written."""

    lemma: str
    surface: str
    sentence_start: bool


def content_tokens(text: str, exclude: Iterable[str] = ()) -> list[Token]:
    """The content words of ``text`` in order: no stop words, numbers, contractions or excluded words.

    Args:
        text: Any chat text.
        exclude: Lowercase words to drop as well (speaker names, for instance); matched against
            both the word and its lemma.
    """
    excluded = exclude if isinstance(exclude, (set, frozenset)) else frozenset(exclude)
    tokens: list[Token] = []
    for match in _WORD.finditer(text):
        surface = _surface(match.group())
        lemma = _content_lemma(surface, excluded)
        if lemma is not None:
            tokens.append(Token(lemma, surface, _starts_sentence(text, match.start())))
    return tokens


def matched_words(text: str) -> list[str]:
    """The words of ``text`` as :func:`content_tokens` reads them, before any is dropped."""
    return _WORD.findall(text)


def content_lemma(word: str) -> str | None:
    """The lemma :func:`content_tokens` gives a word of :func:`matched_words` (``None``: not a content word).

    It depends on the word alone, so a caller that meets the same words often can keep it.
    """
    return _content_lemma(_surface(word), frozenset())


def _surface(matched: str) -> str:
    surface = matched.replace("’", "'").strip("'+-")
    return surface[:-2] if surface.lower().endswith("'s") else surface


def _content_lemma(surface: str, excluded: frozenset[str] | set[str]) -> str | None:
    word = surface.lower()
    if len(word) < _MIN_LEN or "'" in word or word in STOP_WORDS or word in excluded:
        return None
    lemma = lemmatize(word)
    if lemma in STOP_WORDS or lemma in excluded:
        return None
    return lemma


def _starts_sentence(text: str, position: int) -> bool:
    """Whether the last non-space character before ``position`` ends a sentence (or there is none)."""
    i = position - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    return i < 0 or text[i] in '.!?:;"(['


class DocumentFrequencies:
    """Per-lemma document frequencies over utterances, counted incrementally.

    Each document (an utterance, by id) is counted once however often it is offered.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._df: Counter[str] = Counter()

    @property
    def n_documents(self) -> int:
        """How many documents were counted."""
        return len(self._seen)

    def seen(self, doc_id: str) -> bool:
        """Whether the document ``doc_id`` was already counted."""
        return doc_id in self._seen

    def add(self, doc_id: str, lemmas: Iterable[str]) -> None:
        """Count the distinct ``lemmas`` of document ``doc_id`` unless it was counted before."""
        if doc_id in self._seen:
            return
        self._seen.add(doc_id)
        self._df.update(set(lemmas))

    def idf(self, lemma: str) -> float:
        """Smoothed inverse document frequency: ``log((1 + N) / (1 + df)) + 1``."""
        return math.log((1 + len(self._seen)) / (1 + self._df[lemma])) + 1.0


def _display_form(tokens: Sequence[Token]) -> str:
    """How to write a lemma: its commonest surface form, keeping acronyms and proper names capitalized."""
    forms = Counter(t.surface.lower() for t in tokens)
    best = min(forms, key=lambda f: (-forms[f], f))
    written = [t.surface for t in tokens if t.surface.lower() == best]
    if all(w.isupper() for w in written) and len(best) > 1:
        return best.upper()
    if all(w[0].isupper() for w in written) and any(not t.sentence_start for t in tokens):
        return best.capitalize()
    return best


def rank_keywords(
    docs: Sequence[Sequence[Token]], df: DocumentFrequencies, limit: int
) -> list[tuple[str, str, float]]:
    """Rank the lemmas of a group of documents by TF-IDF.

    Term frequency is sublinear (``1 + log tf``); lemmas seen in a single document only of a
    multi-document group are damped, so one long utterance does not dictate a segment's keywords,
    and so are words that look like adjectives, adverbs or participles ('-ed', '-ly', '-ful', ...),
    which describe a subject rather than name it.

    Args:
        docs: Content tokens of each document of the group (e.g. each utterance of a segment).
        df: Document frequencies of the conversation so far.
        limit: How many keywords to return.

    Returns:
        ``(lemma, display form, score)`` triples, best first; ties broken alphabetically.
    """
    tf: Counter[str] = Counter()
    spread: Counter[str] = Counter()
    occurrences: dict[str, list[Token]] = {}
    for doc in docs:
        for token in doc:
            tf[token.lemma] += 1
            occurrences.setdefault(token.lemma, []).append(token)
        spread.update({t.lemma for t in doc})
    multi = sum(1 for d in docs if d) > 1
    scored = []
    for lemma, count in tf.items():
        score = (1.0 + math.log(count)) * df.idf(lemma)
        if lemma.endswith(_MODIFIER_ENDINGS) and len(lemma) > 4 and lemma not in _NOT_MODIFIERS:
            score *= _MODIFIER_PENALTY
        if multi and spread[lemma] == 1:
            score *= 0.5
        scored.append((lemma, _display_form(occurrences[lemma]), score))
    scored.sort(key=lambda item: (-item[2], item[0]))
    return scored[:limit]
