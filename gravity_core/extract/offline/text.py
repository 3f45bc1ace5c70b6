"""Small text helpers and word lists shared by the offline extractors and the query lexicon.

Sentence splitting (``nupunkt``), word tokens with offsets, content words, quote normalization and
the words seen in lower case in a batch; stop words and curated lexicons: words that are never
names, common words, place names and the words that mark a place or an organization. Names
themselves come from the spaCy parse (:mod:`gravity_core.extract.offline.entities`). Everything
here is a pure function of its arguments: the lexicons are constant frozensets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

__all__ = [
    "COMMON_WORDS",
    "NON_NAME_WORDS",
    "ORGANIZATION_WORDS",
    "PLACE_NAMES",
    "PLACE_WORDS",
    "STOP_WORDS",
    "Sentence",
    "Token",
    "content_words",
    "lowercase_vocabulary",
    "normalize_quotes",
    "split_sentences",
    "tokenize",
    "word_set",
]


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of a lexicon written as one block of text."""
    return frozenset(text.split())


class Sentence(NamedTuple):
    """A sentence and its character span in the text it came from."""

    text: str
    start: int
    end: int


class Token(NamedTuple):
    """A word token and its character span."""

    text: str
    start: int
    end: int


# Same-length replacement, so offsets computed on the normalized text hold for the original.
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})

_TOKEN_RE = re.compile(r"(?:[A-Z]\.){2,}|[A-Za-z0-9]+(?:['\-][A-Za-z0-9]+)*'?")


def normalize_quotes(text: str) -> str:
    """Curly quotes and apostrophes to straight ones, keeping the length unchanged."""
    return text.translate(_QUOTES)


def split_sentences(text: str) -> list[Sentence]:
    """Split ``text`` into sentences with ``nupunkt``; line breaks always end a sentence.

    Returns:
        Sentences with surrounding whitespace removed, spans indexing ``text``.
    """
    import nupunkt

    out: list[Sentence] = []
    for line in re.finditer(r"[^\n]+", text):
        base = line.start()
        for start, end in nupunkt.sent_spans(line.group()):
            chunk = line.group()[start:end]
            stripped = chunk.strip()
            if not stripped:
                continue
            lead = len(chunk) - len(chunk.lstrip())
            s = base + start + lead
            if out and out[-1].end >= base and _ABBREVIATION_END_RE.search(out[-1].text):
                prev = out.pop()
                out.append(Sentence(text[prev.start : s + len(stripped)], prev.start, s + len(stripped)))
                continue
            out.extend(_split_missed(stripped, s))
    return out


def _split_missed(sentence: str, offset: int) -> list[Sentence]:
    """Split where the model kept two chat sentences together ("...next month. Any plans?")."""
    out: list[Sentence] = []
    begin = 0
    for match in _MISSED_BOUNDARY_RE.finditer(sentence):
        head = sentence[begin : match.start()].rstrip("\"')]")
        if _ABBREVIATION_END_RE.search(head) or _DOTTED_RE.search(head):
            continue
        piece = sentence[begin : match.end()].rstrip()
        out.append(Sentence(piece, offset + begin, offset + begin + len(piece)))
        begin = match.end()
    piece = sentence[begin:]
    out.append(Sentence(piece, offset + begin, offset + len(sentence)))
    return out


_MISSED_BOUNDARY_RE = re.compile(r"(?<=[a-z0-9)][.!?])[\"')\]]*\s+(?=[\"'(]?[A-Z])")
_DOTTED_RE = re.compile(r"\b(?:[A-Za-z]\.){2,}$|\b(?:etc|vs|approx|e\.g|i\.e)\.$", re.IGNORECASE)


_ABBREVIATION_END_RE = re.compile(r"(?:^|[\s(])(?:St|Mt|Dr|Mr|Mrs|Ms|Prof|Sr|Jr|Ft|[A-Z])\.$")


def tokenize(text: str) -> list[Token]:
    """Word tokens with their spans; contractions and hyphenated words stay whole."""
    return [Token(m.group(), *m.span()) for m in _TOKEN_RE.finditer(text)]


def content_words(text: str) -> list[str]:
    """Lower-cased tokens of ``text`` that are not stop words."""
    out = []
    for tok in tokenize(text):
        word = tok.text.lower().rstrip("'")
        if word.endswith("'s"):
            word = word[:-2]
        if word and word not in STOP_WORDS:
            out.append(word)
    return out


def lowercase_vocabulary(texts: Iterable[str]) -> frozenset[str]:
    """Words written in lower case somewhere in ``texts``: evidence they are common words."""
    vocab: set[str] = set()
    for text in texts:
        for tok in _TOKEN_RE.finditer(text):
            word = tok.group()
            if word[0].islower():
                vocab.add(word.rstrip("'"))
    return frozenset(vocab)


STOP_WORDS = word_set(
    """
a about above after again against all almost also although always am among an and another any anybody
anyone anything anyway anyways anywhere are aren't around as at away be became because become been
before being below beside besides best better between beyond both but by can can't cannot could couldn't
did didn't do does doesn't doing don't done down during each either else enough especially etc even ever
every everybody everyone everything everywhere few for from further get gets getting go goes going gone
got gotten had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him
himself his how how's however i i'd i'll i'm i've if in indeed instead into is isn't it it'd it'll it's
its itself just least less let let's lot lots many may maybe me might mine more most mostly much must
mustn't my myself neither never nevertheless next no nobody none nor not nothing now nowhere of off
often oh ok okay on once one ones only onto or other others otherwise ought our ours ourselves out over
own perhaps quite rather really same several shall shan't she she'd she'll she's should shouldn't since
so some somebody someone something sometime sometimes somewhat somewhere soon still such than that
that's the their theirs them themselves then there there's therefore these they they'd they'll they're
they've this those though through thus till to too toward towards under unless until up upon us very via
was wasn't we we'd we'll we're we've well were weren't what what's whatever when whenever where where's
whereas wherever whether which while who who's whoever whole whom whose why will with within without
won't would wouldn't yet you you'd you'll you're you've your yours yourself yourselves yeah yes yep
gonna wanna gotta kinda sorta y'know ya
"""
)

NON_NAME_WORDS: frozenset[str] = word_set(
    """
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
january february march april may june july august september october november december jan feb mar apr
jun jul aug sep sept oct nov dec christmas xmas thanksgiving halloween easter hanukkah diwali ramadan
spring summer fall autumn winter weekend today tonight tomorrow yesterday wow hey hi hello hiya howdy yo
thanks thank thx ty omg lol lmao rofl haha hahaha hehe yeah yea yep yup yah ya nope nah ok okay oh ooh
oooh ah ahh aw aww awww woah whoa woo woohoo yay yippee hooray oops oof ugh hmm hmmm um umm uh er phew
gosh geez jeez dang darn wowza cheers bye goodbye congrats congratulations sorry please welcome btw fyi
tbh imo imho idk brb ttyl np asap diy ps xoxo sure cool awesome nice great good amazing fantastic
wonderful lovely totally definitely absolutely agreed indeed exactly true right alright alrighty anyway
anyways anyhow besides plus also dude buddy bro pal mate man guys girl sis babe honey dear sweetie hun
fam folks everyone mom mum mommy momma dad daddy papa mama grandma grandpa granny nana grandmother
grandfather god jesus heaven i me my mine we us our you your he him his she her they them their it its
english spanish french german italian chinese japanese korean russian portuguese arabic hindi american
british european asian african canadian mexican irish scottish indian tv dvd pc ai ceo
"""
)


COMMON_WORDS = word_set(
    """
life family art music nature books book pets pets' dance dancing painting writing reading running love
hope luck fun friends friendship work school time things stuff everything nothing someone people kids
children health happiness peace travel food cooking baking sports games gaming yoga hiking camping
photography gardening volunteering swimming teaching learning coaching keep sounds glad congrats cool
appreciate definitely seeing great any good sure just let did having take got and bye plus being talk
those love been long way taking check sorry where for really hope finding must looks these when on well
our can all maybe their since there making even yes some one wish stay dancing always could now creating
yesterday art agreed things trying look guess playing tell believe go sometimes losing as crazy not
together staying learning totally who lately which exploring here also remember moments connecting
hoping same watching loving excited talking wishing looking cherish such next reminds super especially
never best challenges will working little catch why speaking sharing running appreciating bet lucky
recently pretty exciting knowing doing need thankfully giving unfortunately starting still hard setbacks
searching make tough with besides rock took happy feeling every feels fingers fun funny welcome what how
absolutely honestly seriously actually basically literally hopefully luckily sadly unfortunately
fortunately obviously clearly sounds awesome nice thank thanks haha wow that's wish mine yours ours new
old first last other another many much more most less few several each both either neither important
amazing beautiful wonderful perfect lovely fantastic incredible interesting tough hard easy yup yep oof
woah wow aww oh hi hey yo hello support community growth change progress success journey dream dreams
goals goal passion friend friends parents kid dog dogs cat cats pet puppy team game match season class
classes course job career business project projects company studio shop store club group team teams
event events trip trips vacation holiday park beach mountain mountains lake river city town home house
place photo photos pic pics picture pictures video videos post posts movie movies film films show shows
song songs album band concert festival party parties wedding birthday meeting conference workshop
awareness health body mind heart soul spirit faith confidence courage strength patience kindness hard-
work teamwork perseverance resilience self-care mindfulness meditation exercise training practice
today's yesterday's tomorrow's weekend's week's month's year's wanna gonna gotta bet imagine picture try
see talk tons loads heaps bunch trying tried aim aiming enjoy enjoying enjoyed focus focusing reach
reaching hang hanging count counting lean leaning glad proud happy sad excited thrilled stoked pumped
bummed bummer shame congratulations bravo kudos respect props shout shoutout would've could've should've
must've ain't
"""
)

# Place-name lexicon: countries, US states, large cities and regions (lower case).
PLACE_NAMES = word_set(
    """
afghanistan albania algeria argentina armenia australia austria bahamas bangladesh belgium bolivia
bosnia brazil bulgaria cambodia cameroon canada chile china colombia congo croatia cuba cyprus czechia
denmark ecuador egypt england estonia ethiopia fiji finland france georgia germany ghana greece
guatemala haiti honduras hungary iceland india indonesia iran iraq ireland israel italy jamaica japan
jordan kazakhstan kenya korea kuwait laos latvia lebanon libya lithuania luxembourg madagascar malaysia
maldives mali malta mexico moldova monaco mongolia montenegro morocco mozambique myanmar namibia nepal
netherlands holland nicaragua niger nigeria norway pakistan panama paraguay peru philippines poland
portugal qatar romania russia rwanda scotland senegal serbia singapore slovakia slovenia somalia spain
sudan sweden switzerland syria taiwan tanzania thailand tunisia turkey uganda ukraine uruguay uzbekistan
venezuela vietnam wales yemen zambia zimbabwe uk usa us america britain europe asia africa antarctica
australia oceania scandinavia caribbean midwest alabama alaska arizona arkansas california colorado
connecticut delaware florida georgia hawaii idaho illinois indiana iowa kansas kentucky louisiana maine
maryland massachusetts michigan minnesota mississippi missouri montana nebraska nevada ohio oklahoma
oregon pennsylvania tennessee texas utah vermont virginia washington wisconsin wyoming london paris rome
berlin madrid barcelona lisbon amsterdam brussels vienna prague budapest warsaw dublin edinburgh glasgow
manchester liverpool oxford cambridge athens istanbul moscow stockholm oslo copenhagen helsinki zurich
geneva munich milan venice florence naples tokyo kyoto osaka seoul beijing shanghai bangkok delhi mumbai
dubai cairo nairobi sydney melbourne toronto vancouver montreal boston chicago seattle portland denver
austin dallas houston miami atlanta orlando tampa nashville phoenix detroit philadelphia pittsburgh
baltimore brooklyn manhattan nyc la sf vegas hollywood honolulu anchorage minneapolis cleveland
cincinnati milwaukee sacramento galway hawaii bali tahoe yosemite yellowstone himalayas alps rockies
everest sahara
"""
)

PLACE_WORDS = word_set(
    """
lake mount mountain mountains mt river beach bay island islands park canyon valley falls forest desert
city town village county state street avenue road square bridge tower castle coast peninsula harbor
harbour trail hills hill cliffs cliff ocean sea gardens garden museum zoo cathedral church temple palace
airport station stadium arena
"""
)

ORGANIZATION_WORDS = word_set(
    """
inc corp corporation company co ltd llc group foundation university college school academy institute
hospital clinic bank club association society agency studio studios labs lab center centre council
department team league network shelter church federation union charity org records press media
"""
)
