"""Small text helpers shared by the offline extractors.

Sentence splitting (``nupunkt``), word tokens with offsets, stop words, curated lexicons and
proper-name detection for conversational English. Everything here is a pure function of its
arguments: the lexicons are constant frozensets.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable
from typing import NamedTuple

__all__ = [
    "COMMON_WORDS",
    "FIRST_NAMES",
    "NAME_PREFIXES",
    "NON_NAME_WORDS",
    "PLACE_NAMES",
    "PLACE_WORDS",
    "ORGANIZATION_WORDS",
    "STOP_WORDS",
    "NameMention",
    "Sentence",
    "Token",
    "clip_value",
    "content_words",
    "find_names",
    "find_titles",
    "is_capitalized",
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


class NameMention(NamedTuple):
    """A proper name found in a sentence.

    ``start``/``end`` index the sentence text; ``possessive`` tells the name was written with
    ``'s``; ``quoted`` marks a title written in quotes.
    """

    text: str
    start: int
    end: int
    possessive: bool = False
    quoted: bool = False


# Same-length replacement, so offsets computed on the normalized text hold for the original.
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})

_TOKEN_RE = re.compile(r"(?:[A-Z]\.){2,}|[A-Za-z0-9]+(?:['\-][A-Za-z0-9]+)*'?")

_CLAUSE_CUT_RE = re.compile(
    r"\s+(?:-|--|\u2013|\u2014)\s+|[;:!?()\[\]\u2013\u2014]|\.(?:\s|$)|\s\.\.\.|\s*\n"
    # A comma ends the value only where a new clause or an aside starts: lists ("salads, sandwiches,
    # and desserts") stay whole.
    r"|,\s*(?:(?:and|but|so|or)\s+)?(?:i|i'm|i've|i'd|i'll|you|you're|he|she|it|it's|we|we're|they|they're|this"
    r"|that|which|who|because|though|although|especially|plus|as|if|when|while|since|then|there|what|how"
    r"|just|really|too|haha|lol|though|so|but|like|etc|maybe|right|yeah|thanks|'?cause|cuz"
    r"|my\s+\w+\s+(?:is|was|and)|the\s+\w+\s+(?:is|are|was|were))\b"
    r"|,\s*[A-Z][a-z]+\s*(?:[!.?]|$)|,\s*$"
    r"|\s(?:because|since|so that|so|but|although|though|while|whereas|which|who|when|where|whenever"
    r"|cause|cuz|and\s+(?:it|that|they|we|i|this|there|he|she)(?:'[a-z]+)?|as well as|as it|as they"
    r"|if|unless|until|till|before|after|especially|plus)\s",
    re.IGNORECASE,
)
_EDGE_STRIP = " \t\n\"'.,;:!?-()[]*~"


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


def is_capitalized(word: str) -> bool:
    """Whether ``word`` starts with an upper-case letter (``iPhone``-style names excluded)."""
    return bool(word) and word[0].isupper()


def lowercase_vocabulary(texts: Iterable[str]) -> frozenset[str]:
    """Words written in lower case somewhere in ``texts``: evidence they are common words."""
    vocab: set[str] = set()
    for text in texts:
        for tok in _TOKEN_RE.finditer(text):
            word = tok.group()
            if word[0].islower():
                vocab.add(word.rstrip("'"))
    return frozenset(vocab)


def clip_value(text: str, max_words: int = 8) -> str:
    """A short clean value: cut at the first clause boundary, trimmed and at most ``max_words``.

    ``"painting because it relaxes me"`` becomes ``"painting"``.
    """
    text = normalize_quotes(text)
    match = _CLAUSE_CUT_RE.search(text)
    if match is not None:
        text = text[: match.start()]
    words = text.split()
    if len(words) > max_words:
        words = words[:max_words]
    while words and words[-1].lower().strip(_EDGE_STRIP) in _DANGLING:
        words.pop()
    return " ".join(words).strip(_EDGE_STRIP)


def _base(word: str) -> tuple[str, bool]:
    """The word without a possessive ending, and whether it had one."""
    if word.endswith("'s") and len(word) > 2:
        return word[:-2], True
    if word.endswith("s'") and len(word) > 2:
        return word[:-1], True
    return word.rstrip("'"), False


def _clause_start(sentence: str, index: int) -> bool:
    """Whether the character at ``index`` begins a sentence or clause (so may be capitalized anyway)."""
    j = index - 1
    while j >= 0 and sentence[j] in " \t*~":
        j -= 1
    if j < 0:
        return True
    prev = sentence[j]
    if prev == ".":
        # "Dr. Smith", "J.K. Rowling": an abbreviation's period does not end the sentence.
        k = j
        while k > 0 and (sentence[k - 1].isalpha() or sentence[k - 1] == "."):
            k -= 1
        before = sentence[k:j].lower()
        return not (before in _TITLES or re.fullmatch(r"(?:[a-z]\.)*[a-z]", before) is not None)
    if prev in ':;"([\u2013\u2014!?':
        return True
    return prev == "-" and index - j > 1  # a spaced dash, not a hyphen


def _is_name_word(word: str, lexical: bool) -> bool:
    """A capitalized word that may be (part of) a name; ``lexical`` also rejects common words."""
    if not is_capitalized(word):
        return False
    low = word.lower()
    if low in _NEVER_NAMES:
        return False
    if word.isupper() and len(word) > 1 and low in COMMON_WORDS:
        return False  # shouting: "SO EXCITED"
    if word == "I" or low.startswith("i'"):
        return False
    return not (lexical and low in COMMON_WORDS)


def _initial_ok(word: str, next_word: str | None, known: Container[str], common: Container[str]) -> bool:
    """Whether a capitalized word at the start of a clause is a name and not just capitalized."""
    low = word.lower()
    if low in _NEVER_NAMES:
        return False
    if low in known or low in FIRST_NAMES or low in PLACE_NAMES:
        return True
    if low in COMMON_WORDS or low in common or word in common:
        return False
    if len(low) > 4 and low.endswith(_COMMON_SUFFIXES):
        return False
    if len(low) > 3 and low.endswith("s") and not low.endswith(("ss", "us", "is")):
        return False  # a plural common noun: "Pets are...", "Tons has..."
    return next_word is not None and next_word.lower() in _NAME_FOLLOWERS


def _starts_name(
    word: str,
    possessive: bool,
    nxt: str | None,
    initial: bool,
    after_comma: bool,
    known: Container[str],
    common: Container[str],
) -> bool:
    """Whether ``word`` (possessive ending removed) can begin a name where it stands."""
    low = word.lower()
    if not _is_name_word(word, lexical=initial or after_comma):
        # A known name is still a name when the sentence opens with it.
        return initial and is_capitalized(word) and low in known and low not in _NEVER_NAMES
    if not initial or _initial_ok(word, None if possessive else nxt, known, common):
        return True
    # "Oliver's hilarious!": a possessive that is not a common word.
    return (
        possessive
        and low not in COMMON_WORDS
        and low not in common
        and not (len(low) > 4 and low.endswith(_COMMON_SUFFIXES))
    )


def find_names(
    sentence: str,
    known: Container[str] = frozenset(),
    common: Container[str] = frozenset(),
) -> list[NameMention]:
    """Proper names in one sentence: capitalized words and multi-word sequences.

    A word at the start of the sentence (or of a clause after ``:``, a dash or a quote) counts
    only when it is a known name (``known`` holds case-folded names), a common first name or
    place, or is followed by a verb or possessive pattern and is not a common word (``common``
    holds words seen in lower case elsewhere). Stop words, pronouns, weekdays, months,
    interjections and a curated stoplist never count.

    Args:
        sentence: One sentence (quotes normalized or not).
        known: Case-folded names already known (entities of the KB, speakers).
        common: Words seen in lower case in the batch: evidence of a common word.

    Returns:
        Name mentions in order; sequences like ``"Lake Tahoe"`` come as one mention.
    """
    text = normalize_quotes(sentence)
    tokens = tokenize(text)
    names: list[NameMention] = []
    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        word, possessive = _base(tok.text)
        initial = _clause_start(text, tok.start)
        nxt = tokens[i + 1].text if i + 1 < n else None
        prefix = (
            is_capitalized(word)
            and (word.lower() in NAME_PREFIXES or _INITIALS_RE.fullmatch(word) is not None)
            and not possessive
            and nxt is not None
            and text[tok.end : tokens[i + 1].start] in (" ", ". ")
            and _is_name_word(_base(nxt)[0], lexical=False)
        )
        after_comma = not initial and text[: tok.start].rstrip().endswith(",")
        if not prefix and not _starts_name(word, possessive, nxt, initial, after_comma, known, common):
            i += 1
            continue
        # Extend: "Harry Potter", "Lord of the Rings", "J.K. Rowling".
        j = i
        end_possessive = possessive
        while not end_possessive and j + 1 < n:
            gap = text[tokens[j].end : tokens[j + 1].start]
            if gap not in (" ", "", ". ") or _clause_start(text, tokens[j + 1].start):
                break
            cand, cand_pos = _base(tokens[j + 1].text)
            if _is_name_word(cand, lexical=False):
                j += 1
                end_possessive = cand_pos
                continue
            # Up to two lower-case connectors inside a name: "Lord of the Rings".
            k = j + 1
            while k < n and k - j <= 2 and tokens[k].text.lower() in _CONNECTORS:
                if text[tokens[k - 1].end : tokens[k].start] != " ":
                    break
                k += 1
            if (
                k > j + 1
                and k < n
                and text[tokens[k - 1].end : tokens[k].start] == " "
                and _is_name_word(_base(tokens[k].text)[0], lexical=False)
            ):
                j = k
                end_possessive = _base(tokens[j].text)[1]
                continue
            break
        start = tok.start
        end = tokens[j].end
        value = text[start:end]
        if end_possessive:
            value = _base(value)[0]
        value = value.rstrip("'")  # a closing single quote: "'Blue Hour' is..."
        end = start + len(value)
        # A leading title ("Dr. Smith") is part of the name; a lone title is not a name, nor is a
        # single letter ("R&R", "plan B").
        if (value.lower().rstrip(".") in _TITLES and j == i) or len(value.rstrip(".")) < 2:
            i = j + 1
            continue
        names.append(NameMention(value, start, end, possessive=end_possessive))
        i = j + 1
    return names


_TITLE_RE = re.compile(r'"([^"\n]{2,80})"')
# 'Blue Hour': single quotes around a title; an apostrophe inside is only a possessive ("Mom's").
_SINGLE_TITLE_RE = re.compile(r"(?<![\w'])'([A-Z](?:[^'\n]|'(?=s\b)){1,79}?)'(?![\w'])")
_TITLE_CUES = re.compile(
    r"\b(?:book|books|novel|movie|movies|film|song|songs|album|show|series|play|poem|story|game|"
    r"called|titled|named|read|reading|watched|watching|saw|seen|listened|listening|playing|played|"
    r"favorite|favourite|fave)\b[^.!?]{0,25}$",
    re.IGNORECASE,
)


def find_titles(sentence: str) -> list[NameMention]:
    """Titles written in quotes (books, movies, songs): short, title-cased or after a cue word.

    Double or single quotes; a quoted full sentence (a quotation, a motto) is not a title.
    """
    text = normalize_quotes(sentence)
    out: list[NameMention] = []
    matches = sorted([*_TITLE_RE.finditer(text), *_SINGLE_TITLE_RE.finditer(text)], key=lambda m: m.start())
    for match in matches:
        if out and match.start() < out[-1].end:
            continue  # single quotes inside a double-quoted title
        inner = match.group(1).strip()
        words = inner.split()
        if not words or len(words) > 8 or not is_capitalized(words[0]):
            continue
        if inner[-1] in ".!?" and len(words) > 2:
            continue
        titled = all(is_capitalized(w) or w.lower() in STOP_WORDS for w in words)
        cue = _TITLE_CUES.search(text[: match.start()]) is not None
        by_author = re.match(r"\s*by\s+[A-Z]", text[match.end() :]) is not None
        if (titled and len(words) <= 6) or cue or by_author:
            title = inner.rstrip(",;:.!?")
            out.append(NameMention(title, match.start(1), match.start(1) + len(title), quoted=True))
    return out


_INITIALS_RE = re.compile(r"(?:[A-Z]\.){1,3}")

_DANGLING = word_set(
    """
a an the and or but to of in on at for with from by my your our their his her its this that these those
some any very really so just about as into like than
"""
)

_COMMON_SUFFIXES = ("ing", "ness", "tion", "sion", "ment", "ly", "ful", "less", "ity", "ship", "ed")

_CONNECTORS = frozenset({"of", "the", "de", "del", "la", "van", "von", "da", "du", "y"})

_TITLES = frozenset({"dr", "mr", "mrs", "ms", "prof", "st", "mt", "sir", "dame", "aunt", "uncle", "coach"})

NAME_PREFIXES = word_set(
    """
lake mount mt saint st new san santa los las fort port north south east west central grand great golden
cape upper lower little big old royal united el le la dr mr mrs ms prof uncle aunt coach sir lady lord
king queen prince princess captain hotel club camp university college
"""
)

# Words after a sentence-initial word that make it likely to be a name ("Barcelona is...").
_NAME_FOLLOWERS = word_set(
    """
is was has had and said says told loves loved likes liked wants wanted went got came made will would can
could just always never also really still gave took asked started helped won lost passed died moved
lives lived works worked plays played called texted sent thinks thought knows knew seems seemed looks
looked
"""
)

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

_NEVER_NAMES = NON_NAME_WORDS | STOP_WORDS

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

FIRST_NAMES = word_set(
    """
aaron abby abigail adam adrian aiden alan albert alex alexa alexander alexandra alexis alice alicia
allison amanda amber amelia amy andrea andrew andy angela anna anne annie anthony antonio april ariana
arthur ashley audrey austin ava bailey barbara ben benjamin beth betty bill billy blake bob bobby brad
bradley brandon brenda brian brittany brooke bruce bryan caleb cameron carl carla carlos carmen carol
caroline carolyn carter casey catherine charles charlie charlotte chelsea chloe chris christian
christina christine christopher cindy claire clara cody colin connor craig crystal cynthia daisy dale
dan daniel danielle danny david dean debbie deborah dennis derek diana diane dominic donald donna doris
dorothy dylan ed eddie edward elaine eleanor elena eli elijah elizabeth ella ellen ellie emily emma eric
erica erin ethan eva evan evelyn faith felix fiona frank gabriel gabriella gary gavin george gerald gina
glen glenn grace greg gregory hailey hannah harold harper harry hayden heather helen henry holly hunter
ian isaac isabel isabella isabelle jack jackson jacob jade jake james jamie jane janet janice jason
jasmine jay jean jeff jeffrey jenna jennifer jenny jeremy jerry jesse jessica jill jim jimmy jo joan
joanna joe joel john johnny jon jonathan jordan jose joseph josh joshua joy joyce juan judith judy julia
julian julie justin karen kate katelyn katherine kathleen kathryn kathy katie kayla keith kelly ken
kenneth kevin kim kimberly kyle laura lauren leah lee leo leon liam lily linda lisa logan lola lori
louis lucas lucy luis luke luna lydia maddie madison maggie marco margaret maria marie marilyn mark
martha martin mary mason matt matthew max maya megan mel melanie melissa mia michael michelle mike mila
milo molly morgan nancy naomi natalie nate nathan nathaniel neil nicholas nick nicole noah nora olivia
oliver oscar owen paige pam pamela patricia patrick paul paula peter phil philip phoebe rachel ralph
randy raymond rebecca riley rita rob robert robin roger ron ronald rose ruby russell ruth ryan sally sam
samantha samuel sandra sara sarah scott sean sebastian seth shannon sharon shawn sheila sophia sophie
stacy stella stephanie stephen steve steven sue susan sydney tanya taylor teresa terry theo theresa
thomas tim timothy tina todd tom tommy tony tracy travis trevor tyler valerie vanessa victor victoria
vincent violet walter wayne wendy william willow wyatt zach zachary zoe zoey
"""
)
