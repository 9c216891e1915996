"""Speech synthesis with eSpeak NG through ctypes, with exact word and phone alignments.

The embedded corpora need multi-speaker speech with time-aligned words and phones and no
downloads. eSpeak NG is a formant synthesiser; the ``espeakng-loader`` wheel ships its shared
library and its data (``espeakng_loader.get_library_path()`` / ``get_data_path()``), so nothing
is installed system-wide. This module binds the C API of ``speak_lib.h`` (API revision 12):

* ``espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, data_path, espeakINITIALIZE_PHONEME_EVENTS |
  espeakINITIALIZE_DONT_EXIT)``: synchronous retrieval mode (``espeak_Synth`` returns once the
  whole text is synthesised) with an ``espeakEVENT_PHONEME`` event per phoneme; without
  ``DONT_EXIT`` a missing data folder would ``exit()`` the Python process.
* ``espeak_SetSynthCallback``: eSpeak hands over buffers of int16 samples at 22050 Hz together
  with the events (``espeak_EVENT``) that fall inside each buffer.
* ``espeak_SetVoiceByName("<language>+<variant>")`` and ``espeak_SetParameter`` for rate, volume,
  pitch and pitch range; ``espeak_Synth`` with ``espeakCHARS_UTF8`` (no SSML, no ``[[...]]``
  phoneme input: the text is read as plain text).

**Exact positions.** Every event carries ``audio_position`` (milliseconds, truncated) and
``sample``. eSpeak's ``MarkerEvent`` fills ``sample`` with the number of samples written since the
start of the ``espeak_Synth`` call up to the point where the marker sits in the output buffer, so
it is the exact sample index at 22050 Hz (``audio_position == sample * 1000 // 22050``; the
test suite checks both this and that each event's ``sample`` lies inside the buffer it is
delivered with, i.e. agrees with the cumulative count of delivered samples). We use ``sample``;
``audio_position`` loses up to 22 samples. Times in seconds are ``sample / 22050``; after
resampling to 16 kHz the same instant is sample ``sample * 320 / 441``. Resampling uses
``scipy.signal.resample_poly`` (a zero-phase polyphase FIR whose delay is compensated), so the
times carry over unchanged.

**Where words and phones start.** An ``espeakEVENT_PHONEME`` event marks the start of that
phoneme's synthesis commands in eSpeak's wave queue (after a pause the energy rises within 1-2
ms of it; the tests check 10 ms). An ``espeakEVENT_WORD`` event does not: eSpeak emits it while
the previous clause's pause or even the previous word's last phoneme is still being generated
(up to ~50 ms early). Words are therefore timed by their phones: a phoneme event's
``text_position`` names the word it belongs to, a word starts at its first phone and ends where
its last phone ends. Words are the whitespace-separated tokens of the text (eSpeak's ``length``
field is unreliable: 1 for "o'clock", 4 for "fire-hydrant"; a number gets one word event per
digit group), and a few frequent pairs that eSpeak's English dictionary speaks as one unit
("in the") come out as one word, since eSpeak marks no boundary inside them. A phone ends
where the next phoneme event starts (or at the end of the audio).

**Pauses and transitions.** Mnemonics starting with ``_`` (``_`` short pause, ``_:`` clause
pause, ``_!`` ...) are silences, not phones: they are kept in ``Synthesis.raw_phones`` but are
not in ``Synthesis.phones`` and belong to no word, so a word ends where the pause begins. The
English ``;`` is a short glide that eSpeak inserts between a vowel and a following vowel
(``creamier`` -> ``i ; 3``); it is merged into the preceding phone.

**Determinism.** eSpeak keeps synthesis state in static variables that no API call resets (the
pitch "flutter" table index, the automatic gain control, resonator memories), so the same text
gives slightly different samples depending on what was synthesised before, even after
``espeak_Terminate`` and ``espeak_Initialize``. Each call therefore loads a private copy of the
shared library, synthesises, and unloads it (``dlclose``), so every synthesis starts from the
library's pristine static data; with the noise generators reseeded (``espeak_ng_SetRandSeed``
and libc ``srand``, which eSpeak's breath noise uses), the same text and voice give
byte-identical samples in any order and in any process. Loading costs ~0.5 ms per call.
eSpeak is not re-entrant: one process-wide lock serialises all calls.
"""

from __future__ import annotations

import _ctypes
import atexit
import ctypes
import math
import shutil
import sys
import tempfile
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from audiorepro.config import ConfigError

SAMPLE_RATE = 16_000
"""Output sample rate of :func:`synthesize` (Hz)."""

ESPEAK_SAMPLE_RATE = 22_050
"""eSpeak NG's native sample rate (Hz), returned by ``espeak_Initialize``."""

# speak_lib.h, espeak_AUDIO_OUTPUT / espeak_Initialize options / espeak_Synth flags.
AUDIO_OUTPUT_SYNCHRONOUS = 2
ESPEAK_INITIALIZE_PHONEME_EVENTS = 0x0001
ESPEAK_INITIALIZE_DONT_EXIT = 0x8000
ESPEAK_CHARS_UTF8 = 1
POS_CHARACTER = 1
EE_OK = 0

# speak_lib.h, espeak_EVENT_TYPE.
EVENT_LIST_TERMINATED = 0
EVENT_WORD = 1
EVENT_SENTENCE = 2
EVENT_MARK = 3
EVENT_PLAY = 4
EVENT_END = 5
EVENT_MSG_TERMINATED = 6
EVENT_PHONEME = 7
EVENT_SAMPLERATE = 8

# speak_lib.h, espeak_PARAMETER.
PARAM_RATE = 1
PARAM_VOLUME = 2
PARAM_PITCH = 3
PARAM_RANGE = 4

RATE_RANGE = (80, 450)
"""``espeakRATE`` limits (words per minute); faster rates switch to eSpeak's sonic speed-up."""

_RESAMPLE_UP, _RESAMPLE_DOWN = 320, 441  # 16000 / 22050 in lowest terms
_RAND_SEED = 0
_TRANSITIONS = frozenset({";"})
_STRESS_MARKS = "',% =" + "\u02c8\u02cc"


class SynthesisError(RuntimeError):
    """A voice that does not exist, text that cannot be spoken, or a failed eSpeak call."""


class EspeakEventId(ctypes.Union):
    """The ``id`` union of ``espeak_EVENT``: word number, mark name or phoneme mnemonic."""

    _fields_ = [
        ("number", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("string", ctypes.c_char * 8),
    ]


class EspeakEvent(ctypes.Structure):
    """``espeak_EVENT`` from ``speak_lib.h``, field for field (40 bytes on LP64)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", EspeakEventId),
    ]


SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(EspeakEvent)
)
"""``t_espeak_callback``: ``int cb(short *wav, int numsamples, espeak_EVENT *events)``."""


@dataclass(frozen=True)
class Event:
    """One eSpeak event as delivered to the synthesis callback.

    ``sample`` is the exact 22050 Hz sample index; ``buffer_start`` is how many samples had been
    delivered before the buffer that carried the event (kept to check ``sample`` against the
    cumulative count). ``name`` is the phoneme mnemonic for phoneme events; ``number`` the word
    or sentence number otherwise.
    """

    type: int
    text_position: int
    length: int
    audio_position: int
    sample: int
    buffer_start: int
    buffer_length: int
    number: int
    name: str


@dataclass(frozen=True, eq=False)
class RawSynthesis:
    """What eSpeak returned: int16 samples at 22050 Hz, shape (S,), and the events in order."""

    samples: np.ndarray
    events: tuple[Event, ...]


@dataclass(frozen=True)
class Voice:
    """A synthetic speaker: an eSpeak language and voice variant plus prosody settings.

    ``name`` is the speaker id used in the corpora (``S001``, ``V001``); ``language`` an eSpeak
    language file name (``en-us``, ``en``, ``id``); ``variant`` a file in
    ``espeak-ng-data/voices/!v`` (``m3``, ``f2``, ``klatt``...). ``rate`` is words per minute
    (80-450, eSpeak's default 175), ``pitch`` and ``pitch_range`` are 0-100 (default 50),
    ``volume`` 0-200 (default 100). Validated on construction.
    """

    name: str
    language: str = "en-us"
    variant: str = "m3"
    rate: int = 175
    pitch: int = 50
    pitch_range: int = 50
    volume: int = 100

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SynthesisError(f"Voice.name must be a non-empty string, got {self.name!r}")
        for field_name, low, high in (
            ("rate", *RATE_RANGE),
            ("pitch", 0, 100),
            ("pitch_range", 0, 100),
            ("volume", 0, 200),
        ):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SynthesisError(
                    f"voice {self.name!r}: {field_name} must be an int in [{low}, {high}], "
                    f"got {value!r}"
                )
        for field_name in ("language", "variant"):
            if not isinstance(getattr(self, field_name), str):
                raise SynthesisError(
                    f"voice {self.name!r}: {field_name} must be a str, "
                    f"got {getattr(self, field_name)!r}"
                )
        if self.language.lower() not in available_languages():
            raise SynthesisError(
                f"voice {self.name!r}: unknown eSpeak language {self.language!r} (no such file "
                f"under {Path(data_path()) / 'lang'}; e.g. 'en-us', 'en', 'id')"
            )
        if self.variant not in available_variants():
            raise SynthesisError(
                f"voice {self.name!r}: unknown eSpeak variant {self.variant!r} (no such file in "
                f"{Path(data_path()) / 'voices' / '!v'}; e.g. 'm3', 'f2')"
            )

    @property
    def spec(self) -> str:
        """The name passed to ``espeak_SetVoiceByName``, e.g. ``en-us+m3``."""
        return f"{self.language}+{self.variant}"


@dataclass(frozen=True, eq=False)
class Synthesis:
    """Synthesised speech with word and phone alignments.

    ``wav`` is float32 mono at :data:`SAMPLE_RATE` (16 kHz) in [-1, 1], shape (S,).
    ``words`` are ``(text, start_s, end_s)`` in spoken order, text as written (surrounding
    punctuation stripped); a number is one word ("42"), and a word pair that eSpeak's dictionary
    speaks as one unit without a word boundary ("in the") is one entry with a space in it.
    ``phones`` are ``(label, start_s, end_s)`` without pauses: for English voices the label is an
    ARPAbet phone (:func:`phone_label`), otherwise the eSpeak mnemonic without stress marks.
    ``raw_phones`` has every phoneme event, pauses included, with eSpeak's mnemonic as given
    (stress marks kept). ``word_phones[i]`` holds the indices into ``phones`` of word ``i``.
    Times are exact multiples of 1/22050 s (eSpeak's sample grid).
    """

    wav: np.ndarray
    words: list[tuple[str, float, float]]
    phones: list[tuple[str, float, float]]
    raw_phones: list[tuple[str, float, float]]
    word_phones: list[tuple[int, ...]]
    voice: Voice
    text: str
    sample_rate: int = SAMPLE_RATE

    @property
    def duration(self) -> float:
        """Length of ``wav`` in seconds."""
        return self.wav.shape[0] / self.sample_rate


# eSpeak NG English phoneme mnemonics (en, en-us; stress marks removed) to the 39 ARPAbet phones
# of the CMU dictionary. Reduced and syllabic sounds fold as TIMIT's 61->39 folding does (schwa
# -> AH, syllabic l/n/m -> L/N/M, flap -> T/D); the glottal stop is an allophone of /t/ in
# English; the velar fricative x only occurs in loan words (Bach) and folds to K. Vowel+r and
# vowel+schwa units (A@, o@, aI@, i@3) keep their vowel, the r/schwa being part of the same
# eSpeak phoneme.
ESPEAK_TO_ARPABET: dict[str, str] = {
    # plosives, affricates, fricatives
    "p": "P",
    "b": "B",
    "t": "T",
    "t#": "T",
    "t2": "T",
    "?": "T",
    "d": "D",
    "d#": "D",
    "k": "K",
    "x": "K",
    "g": "G",
    "tS": "CH",
    "dZ": "JH",
    "f": "F",
    "v": "V",
    "T": "TH",
    "D": "DH",
    "s": "S",
    "z": "Z",
    "S": "SH",
    "Z": "ZH",
    "h": "HH",
    # nasals, liquids, glides
    "m": "M",
    "m-": "M",
    "n": "N",
    "n-": "N",
    "N": "NG",
    "l": "L",
    "l-": "L",
    "@L": "L",
    "r": "R",
    "r-": "R",
    "w": "W",
    "j": "Y",
    # vowels
    "@": "AH",
    "@2": "AH",
    "@5": "AH",
    "@-": "AH",
    "a#": "AH",
    "V": "AH",
    "3": "ER",
    "3:": "ER",
    "a": "AE",
    "aa": "AE",
    "A:": "AA",
    "A@": "AA",
    "0": "AA",
    "O:": "AO",
    "O": "AO",
    "O2": "AO",
    "O@": "AO",
    "o@": "AO",
    "E": "EH",
    "e": "EH",
    "e@": "EH",
    "eI": "EY",
    "I": "IH",
    "I2": "IH",
    "I#": "IH",
    "i@": "IH",
    "i@3": "IH",
    "i": "IY",
    "i:": "IY",
    "U": "UH",
    "U@": "UH",
    "u@": "UH",
    "u:": "UW",
    "aI": "AY",
    "aI@": "AY",
    "aI3": "AY",
    "aU": "AW",
    "aU@": "AW",
    "oU": "OW",
    "OI": "OY",
}


def strip_stress(mnemonic: str) -> str:
    """An eSpeak phoneme mnemonic without its stress marks (``'E`` -> ``E``, ``,aI`` -> ``aI``)."""
    return mnemonic.lstrip(_STRESS_MARKS)


def is_pause(mnemonic: str) -> bool:
    """Whether an eSpeak mnemonic is a pause (``_``, ``_:``, ``_!``...) rather than a phone."""
    return strip_stress(mnemonic).startswith("_")


def phone_label(mnemonic: str, language: str) -> str:
    """The phone label of an eSpeak mnemonic: ARPAbet for English, else the bare mnemonic.

    For languages ``en`` / ``en-*`` the stress-free mnemonic is looked up in
    :data:`ESPEAK_TO_ARPABET`; a mnemonic with no ARPAbet counterpart keeps its eSpeak name so
    that nothing is silently merged. Pauses have no label (``SynthesisError``).
    """
    if is_pause(mnemonic):
        raise SynthesisError(f"{mnemonic!r} is a pause, not a phone")
    bare = strip_stress(mnemonic)
    if _is_english(language):
        return ESPEAK_TO_ARPABET.get(bare, bare)
    return bare


def _is_english(language: str) -> bool:
    lang = language.lower()
    return lang == "en" or lang.startswith("en-")


@cache
def library_path() -> str:
    """Path of the ``libespeak-ng`` shared library shipped by ``espeakng-loader``."""
    import espeakng_loader

    path = Path(espeakng_loader.get_library_path())
    if not path.is_file():
        raise SynthesisError(f"espeakng-loader's library is missing: {path}")
    return str(path)


@cache
def data_path() -> str:
    """Path of the ``espeak-ng-data`` folder shipped by ``espeakng-loader``."""
    import espeakng_loader

    path = Path(espeakng_loader.get_data_path())
    if not (path / "phontab").is_file():
        raise SynthesisError(f"espeakng-loader's data folder has no phontab: {path}")
    return str(path)


@cache
def available_languages() -> frozenset[str]:
    """Lower-cased eSpeak language names (files under ``espeak-ng-data/lang``)."""
    root = Path(data_path()) / "lang"
    return frozenset(p.name.lower() for p in root.rglob("*") if p.is_file())


@cache
def available_variants() -> frozenset[str]:
    """eSpeak voice variants (files in ``espeak-ng-data/voices/!v``), case-sensitive."""
    root = Path(data_path()) / "voices" / "!v"
    return frozenset(p.name for p in root.iterdir() if p.is_file() and "+" not in p.name)


class _Engine:
    """Loads eSpeak NG afresh for every synthesis; one instance per process, behind a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._private_path: str | None = None
        self._unload_checked = False
        self._chunks: list[np.ndarray] = []
        self._events: list[Event] = []
        self._delivered = 0
        self._callback_error: BaseException | None = None
        # Keep the ctypes callback object alive for as long as eSpeak may call it.
        self._callback = SynthCallback(self._on_buffer)

    def _library_copy(self) -> str:
        # A private copy nobody else can have loaded, so that dlclose really unloads it and the
        # next load starts from pristine static data.
        if self._private_path is None or not Path(self._private_path).is_file():
            folder = tempfile.mkdtemp(prefix="audiorepro-espeak-")
            atexit.register(shutil.rmtree, folder, True)
            target = Path(folder) / Path(library_path()).name
            shutil.copyfile(library_path(), target)
            self._private_path = str(target)
        return self._private_path

    def _on_buffer(self, wav, num_samples, events) -> int:
        try:
            i = 0
            while events and events[i].type != EVENT_LIST_TERMINATED:
                ev = events[i]
                name = ""
                number = 0
                if ev.type == EVENT_PHONEME:
                    name = ev.id.string.decode("utf-8", errors="replace")
                elif ev.type in (EVENT_WORD, EVENT_SENTENCE, EVENT_END, EVENT_SAMPLERATE):
                    number = ev.id.number
                self._events.append(
                    Event(
                        type=ev.type,
                        text_position=ev.text_position,
                        length=ev.length,
                        audio_position=ev.audio_position,
                        sample=ev.sample,
                        buffer_start=self._delivered,
                        buffer_length=max(num_samples, 0),
                        number=number,
                        name=name,
                    )
                )
                i += 1
            if wav and num_samples > 0:
                self._chunks.append(np.ctypeslib.as_array(wav, shape=(num_samples,)).copy())
                self._delivered += num_samples
            return 0
        except BaseException as exc:  # must not unwind through C; re-raised after espeak_Synth
            self._callback_error = exc
            return 1  # abort synthesis

    def synthesize(self, text: str, voice: Voice) -> RawSynthesis:
        path = self._library_copy()
        lib = ctypes.CDLL(path)
        try:
            _declare(lib)
            rate = lib.espeak_Initialize(
                AUDIO_OUTPUT_SYNCHRONOUS,
                0,
                data_path().encode(),
                ESPEAK_INITIALIZE_PHONEME_EVENTS | ESPEAK_INITIALIZE_DONT_EXIT,
            )
            if rate != ESPEAK_SAMPLE_RATE:
                raise SynthesisError(
                    f"espeak_Initialize({data_path()!r}) returned {rate}, expected the sample "
                    f"rate {ESPEAK_SAMPLE_RATE}"
                )
            lib.espeak_SetSynthCallback(self._callback)
            status = lib.espeak_SetVoiceByName(voice.spec.encode())
            if status != EE_OK:
                raise SynthesisError(
                    f"voice {voice.name!r}: espeak_SetVoiceByName({voice.spec!r}) failed "
                    f"with status {status}"
                )
            for param, value in (
                (PARAM_RATE, voice.rate),
                (PARAM_VOLUME, voice.volume),
                (PARAM_PITCH, voice.pitch),
                (PARAM_RANGE, voice.pitch_range),
            ):
                # Punctuation, capitals and word gap keep the defaults of the fresh load (none,
                # off, 0); eSpeak NG 1.52 reports -1 when they are set even though it sets them.
                status = lib.espeak_SetParameter(param, value, 0)
                if status != EE_OK:
                    raise SynthesisError(
                        f"voice {voice.name!r}: espeak_SetParameter({param}, {value}) failed "
                        f"with status {status}"
                    )
            lib.espeak_ng_SetRandSeed(_RAND_SEED)
            _libc_srand(_RAND_SEED)
            self._chunks, self._events, self._delivered = [], [], 0
            self._callback_error = None
            data = text.encode("utf-8")
            status = lib.espeak_Synth(
                data, len(data) + 1, 0, POS_CHARACTER, 0, ESPEAK_CHARS_UTF8, None, None
            )
            if self._callback_error is not None:
                raise SynthesisError(
                    f"voice {voice.spec!r}, text {text!r}: the synthesis callback failed: "
                    f"{self._callback_error!r}"
                ) from self._callback_error
            if status != EE_OK:
                raise SynthesisError(
                    f"voice {voice.spec!r}, text {text!r}: espeak_Synth failed with status "
                    f"{status}"
                )
            samples = np.concatenate(self._chunks) if self._chunks else np.zeros(0, dtype=np.int16)
            return RawSynthesis(samples=samples, events=tuple(self._events))
        finally:
            lib.espeak_Terminate()
            handle = lib._handle
            del lib
            _ctypes.dlclose(handle)
            self._chunks, self._events = [], []
            if not self._unload_checked:
                self._check_unloaded(path)

    def _check_unloaded(self, path: str) -> None:
        maps = Path("/proc/self/maps")
        if maps.exists() and path in maps.read_text():
            raise SynthesisError(
                f"{path} stayed loaded after dlclose, so eSpeak's static state would carry "
                "over between syntheses and the corpora would not be deterministic"
            )
        self._unload_checked = True


def _declare(lib: ctypes.CDLL) -> None:
    # Prototypes from speak_lib.h / espeak_ng.h; ctypes would otherwise guess int for everything.
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_SetSynthCallback.argtypes = [SynthCallback]
    lib.espeak_SetSynthCallback.restype = None
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetVoiceByName.restype = ctypes.c_int
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_SetParameter.restype = ctypes.c_int
    lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
    lib.espeak_ng_SetRandSeed.restype = ctypes.c_int
    lib.espeak_Synth.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.POINTER(ctypes.c_uint),
        ctypes.c_void_p,
    ]
    lib.espeak_Synth.restype = ctypes.c_int
    lib.espeak_Terminate.argtypes = []
    lib.espeak_Terminate.restype = ctypes.c_int


@cache
def _libc() -> ctypes.CDLL | None:
    if sys.platform.startswith("win"):
        return None
    libc = ctypes.CDLL(None)
    libc.srand.argtypes = [ctypes.c_uint]
    libc.srand.restype = None
    return libc


def _libc_srand(seed: int) -> None:
    # eSpeak's breath noise (ApplyBreath in wavegen.c) draws from libc rand().
    libc = _libc()
    if libc is not None:
        libc.srand(seed)


_ENGINE: _Engine | None = None
_ENGINE_LOCK = threading.Lock()


def _engine() -> _Engine:
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = _Engine()
        return _ENGINE


def synthesize_raw(text: str, voice: Voice) -> RawSynthesis:
    """Run eSpeak NG on ``text``: int16 samples at 22050 Hz, shape (S,), and all events.

    The low-level half of :func:`synthesize`, exposed for tests and diagnostics.
    """
    _check_text(text, voice)
    engine = _engine()
    with engine.lock:
        return engine.synthesize(text, voice)


def synthesize(text: str, voice: Voice) -> Synthesis:
    """Synthesise ``text`` with ``voice``: 16 kHz float32 speech with word and phone times.

    The text is read as plain UTF-8 text (punctuation gives pauses; a sentence needs a capital
    letter after its full stop for eSpeak to end the previous one). Deterministic: the same text
    and voice give byte-identical ``wav`` whatever was synthesised before. Raises
    :class:`SynthesisError` for empty text, text that yields no speech or no word, or a failed
    eSpeak call. See the module docstring for how positions are made exact.
    """
    raw = synthesize_raw(text, voice)
    if raw.samples.size == 0:
        raise SynthesisError(f"voice {voice.spec!r}, text {text!r}: eSpeak produced no samples")
    n_samples = raw.samples.shape[0]

    segments = _phone_segments(raw.events, n_samples)
    raw_phones = [
        (name, start / ESPEAK_SAMPLE_RATE, end / ESPEAK_SAMPLE_RATE)
        for name, start, end, _ in segments
    ]

    tokens = _tokens(text)
    phones: list[tuple[str, float, float]] = []
    runs: list[tuple[int, list[int]]] = []  # (token index, phone indices) per spoken word
    current_token = -1
    for name, start, end, position in _merge_transitions(segments):
        if is_pause(name):
            current_token = -1
            continue
        if end <= start:
            # eSpeak sometimes realises a phoneme inside its neighbour's formant transition
            # (the l of "almost"): it has an event but no samples, so it is not a phone here.
            continue
        token = _token_at(tokens, position - 1)
        if token is None:
            raise SynthesisError(
                f"voice {voice.spec!r}, text {text!r}: phoneme {name!r} points at character "
                f"{position}, which is in no word"
            )
        label = phone_label(name, voice.language)
        phones.append((label, start / ESPEAK_SAMPLE_RATE, end / ESPEAK_SAMPLE_RATE))
        if token != current_token:
            if any(token <= earlier for earlier, _ in runs):
                raise SynthesisError(
                    f"voice {voice.spec!r}, text {text!r}: the phones of word "
                    f"{tokens[token][2]!r} are not contiguous"
                )
            runs.append((token, []))
            current_token = token
        runs[-1][1].append(len(phones) - 1)
    if not runs:
        raise SynthesisError(f"voice {voice.spec!r}, text {text!r}: eSpeak spoke no word")

    words: list[tuple[str, float, float]] = []
    for k, (token, indices) in enumerate(runs):
        # A run covers its token and the following tokens that have no phones of their own:
        # eSpeak speaks some word pairs as one dictionary unit ("in the") without a word event
        # for the second word, so the run is the pair; punctuation-only tokens are dropped.
        stop = runs[k + 1][0] if k + 1 < len(runs) else len(tokens)
        covered = [tokens[t][2] for t in range(token, stop) if t == token or tokens[t][3]]
        words.append((" ".join(covered), phones[indices[0]][1], phones[indices[-1]][2]))

    return Synthesis(
        wav=_resample(raw.samples),
        words=words,
        phones=phones,
        raw_phones=raw_phones,
        word_phones=[tuple(indices) for _, indices in runs],
        voice=voice,
        text=text,
    )


def _check_text(text: str, voice: Voice) -> None:
    if not isinstance(voice, Voice):
        raise SynthesisError(f"voice must be a Voice, got {type(voice).__name__}")
    if not isinstance(text, str):
        raise SynthesisError(
            f"voice {voice.spec!r}: text must be a str, got {type(text).__name__}"
        )
    if not text.strip():
        raise SynthesisError(f"voice {voice.spec!r}: text is empty ({text!r})")
    if "\x00" in text:
        raise SynthesisError(f"voice {voice.spec!r}, text {text!r}: text contains a NUL byte")


def _phone_segments(events: tuple[Event, ...], n_samples: int) -> list[tuple[str, int, int, int]]:
    """(mnemonic, start, end, text_position) per phoneme event; end = next event's start."""
    phonemes = [ev for ev in events if ev.type == EVENT_PHONEME]
    segments = []
    for i, ev in enumerate(phonemes):
        end = phonemes[i + 1].sample if i + 1 < len(phonemes) else n_samples
        start = min(ev.sample, n_samples)
        segments.append((ev.name, start, max(min(end, n_samples), start), ev.text_position))
    return segments


def _merge_transitions(
    segments: list[tuple[str, int, int, int]],
) -> list[tuple[str, int, int, int]]:
    """Give each transition segment (``;``) to the phone before it."""
    merged: list[tuple[str, int, int, int]] = []
    for name, start, end, position in segments:
        if strip_stress(name) in _TRANSITIONS and merged and not is_pause(merged[-1][0]):
            prev_name, prev_start, _, prev_position = merged[-1]
            merged[-1] = (prev_name, prev_start, end, prev_position)
        elif strip_stress(name) in _TRANSITIONS:
            continue
        else:
            merged.append((name, start, end, position))
    return merged


def _tokens(text: str) -> list[tuple[int, int, str, bool]]:
    """Whitespace-separated tokens: (start, end, word without surrounding punctuation, whether
    it has a letter or digit)."""
    tokens = []
    i = 0
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        j = i
        while j < n and not text[j].isspace():
            j += 1
        word = text[i:j]
        lo, hi = 0, len(word)
        while lo < hi and _is_punctuation(word[lo]):
            lo += 1
        while hi > lo and _is_punctuation(word[hi - 1]):
            hi -= 1
        tokens.append((i, j, word[lo:hi] or word, any(c.isalnum() for c in word)))
        i = j
    return tokens


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith(("P", "S"))


def _token_at(tokens: list[tuple[int, int, str, bool]], index: int) -> int | None:
    """Index of the token containing character ``index`` (or the next token after it)."""
    for k, (_, end, _, _) in enumerate(tokens):
        if index < end:
            return k
    return None


def _resample(samples: np.ndarray) -> np.ndarray:
    """int16 at 22050 Hz, shape (S,) -> float32 at 16 kHz in [-1, 1], shape (ceil(S*320/441),)."""
    from scipy.signal import resample_poly

    x = samples.astype(np.float64) / 32768.0
    y = resample_poly(x, _RESAMPLE_UP, _RESAMPLE_DOWN)
    expected = math.ceil(samples.shape[0] * _RESAMPLE_UP / _RESAMPLE_DOWN)
    return np.clip(y[:expected], -1.0, 1.0).astype(np.float32)


# Voice variants for the corpus speakers, chosen from espeak-ng-data/voices/!v: human-sounding
# variants whose output neither saturates (eSpeak's gain control engages; e.g. Jacky, paul) nor
# is dominated by effects (whisper, croak, robosoft*, strong echo such as Marco), grouped by the
# gender their pitch suggests. m3 and f2 are reserved for the target voices V001 / V002.
MALE_VARIANTS: tuple[str, ...] = (
    "m1", "m2", "m4", "m5", "m6", "m7", "m8", "Alex", "Andy", "Denis", "Gene", "ian", "john",
    "Lee", "Mario", "Mike", "miguel", "norbert", "quincy", "rob", "robert", "travis", "victor",
    "grandpa", "david", "edward", "klatt", "klatt2", "klatt3", "klatt4",
)  # fmt: skip
FEMALE_VARIANTS: tuple[str, ...] = (
    "f1", "f3", "f4", "f5", "Andrea", "Annie", "aunty", "belinda", "linda", "shelby", "steph",
    "grandma",
)  # fmt: skip
TARGET_VARIANTS: tuple[str, str] = ("m3", "f2")

CORPUS_VOLUME = 60
"""Volume of the corpus voices: at 60 no pool variant reaches full scale (peaks <= 0.95)."""

_PITCH_RANGE = (30, 70)
_RATE_RANGE = (145, 200)
_PITCH_RANGE_RANGE = (35, 65)


def _speaker_voices(n: int, seed: int, language: str, first_id: int) -> list[Voice]:
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 999 - first_id + 1:
        raise ValueError(f"n must be an int in [1, {999 - first_id + 1}], got {n!r}")
    # Seeded with the id range too, so English and Indonesian speakers differ for one seed.
    rng = np.random.default_rng((seed, first_id))
    pools = [list(rng.permutation(MALE_VARIANTS)), list(rng.permutation(FEMALE_VARIANTS))]
    variants = [str(pools[i % 2][(i // 2) % len(pools[i % 2])]) for i in range(n)]
    return _with_prosody(variants, rng, language, first_id)


def _with_prosody(
    variants: Sequence[str], rng: np.random.Generator, language: str, first_id: int
) -> list[Voice]:
    """Voices ``S<first_id>...`` of the given variants, each with a pitch, rate and pitch range
    drawn from ``rng``; no two share (variant, pitch, rate, pitch range)."""
    used: set[tuple[str, int, int, int]] = set()
    voices = []
    for i, variant in enumerate(variants):
        while True:
            pitch = int(rng.integers(_PITCH_RANGE[0], _PITCH_RANGE[1] + 1))
            rate = int(rng.integers(_RATE_RANGE[0], _RATE_RANGE[1] + 1))
            pitch_range = int(rng.integers(_PITCH_RANGE_RANGE[0], _PITCH_RANGE_RANGE[1] + 1))
            key = (variant, pitch, rate, pitch_range)
            if key not in used:
                used.add(key)
                break
        voices.append(
            Voice(
                name=f"S{first_id + i:03d}",
                language=language,
                variant=variant,
                rate=rate,
                pitch=pitch,
                pitch_range=pitch_range,
                volume=CORPUS_VOLUME,
            )
        )
    return voices


def _share(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` items split in proportion to ``weights`` (largest remainders), every non-zero
    weight getting at least one; the caller checks ``total >= number of non-zero weights``."""
    need = [w > 0 for w in weights]
    out = [1 if w else 0 for w in need]
    rest = total - sum(out)
    weight_sum = sum(weights)
    ideal = [rest * w / weight_sum for w in weights]
    out = [o + int(i) for o, i in zip(out, ideal, strict=True)]
    left = total - sum(out)
    order = sorted(range(len(weights)), key=lambda g: (-(ideal[g] - int(ideal[g])), g))
    for g in order[:left]:
        out[g] += 1
    return out


def disjoint_voices(
    groups: Sequence[int],
    seed: int = 0,
    language: str = "en-us",
    first_id: int = 1,
    *,
    male_variants: Sequence[str] = MALE_VARIANTS,
    female_variants: Sequence[str] = FEMALE_VARIANTS,
) -> list[list[Voice]]:
    """Speakers ``S<first_id>...`` for consecutive ``groups`` (e.g. train, dev, test) such that
    no eSpeak voice variant is used by two groups.

    As in :func:`english_voices`, speakers alternate male / female over the whole list (speaker
    ``i`` is male when ``i`` is even). Each gender's variant pool, permuted by
    ``numpy.random.default_rng((seed, first_id, 2))``, is cut into one disjoint share per group
    in proportion to the group's speakers of that gender (at least one variant each); within a
    group the speakers of a gender cycle through its share, repeating variants with other
    prosody (pitch, rate and pitch range drawn as in :func:`english_voices`) when the share is
    smaller than the group.

    Raises:
        ConfigError: a group size is not an integer >= 0, there are more than 999 speakers, or
            a gender pool has fewer variants than the groups that need a speaker of it (the
            split cannot be made disjoint; the message names the gender and the counts).
    """
    sizes = list(groups)
    for n in sizes:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(f"group sizes must be integers >= 0, got {sizes}")
    total = sum(sizes)
    if not 1 <= total <= 999 - first_id + 1:
        raise ConfigError(f"need 1 to {999 - first_id + 1} speakers in all, got {total}")
    gender = [i % 2 for i in range(total)]  # 0 male, 1 female
    group_of = [g for g, n in enumerate(sizes) for _ in range(n)]
    rng = np.random.default_rng((seed, first_id, 2))
    shares: list[list[list[str]]] = []  # [gender][group] -> variants
    for sex, pool in ((0, male_variants), (1, female_variants)):
        order = [str(pool[int(i)]) for i in rng.permutation(len(pool))]
        if len(set(order)) != len(order):
            raise ConfigError(f"the {('male', 'female')[sex]} variant pool repeats a variant")
        per_group = [
            sum(1 for i in range(total) if gender[i] == sex and group_of[i] == g)
            for g in range(len(sizes))
        ]
        needing = sum(1 for c in per_group if c)
        if len(order) < needing:
            raise ConfigError(
                f"cannot make the speaker groups {sizes} disjoint in voice variants: "
                f"{needing} groups need a {('male', 'female')[sex]} speaker "
                f"({per_group} per group) but the pool has only {len(order)} variants"
            )
        counts = _share(len(order), per_group) if needing else [0] * len(sizes)
        starts = np.cumsum([0, *counts])
        shares.append([order[starts[g] : starts[g + 1]] for g in range(len(sizes))])
    seen = [[0, 0] for _ in sizes]
    variants = []
    for i in range(total):
        g, sex = group_of[i], gender[i]
        share = shares[sex][g]
        variants.append(share[seen[g][sex] % len(share)])
        seen[g][sex] += 1
    voices = _with_prosody(variants, rng, language, first_id)
    out, start = [], 0
    for n in sizes:
        out.append(voices[start : start + n])
        start += n
    return out


def english_voices(n: int = 34, seed: int = 0) -> list[Voice]:
    """``n`` distinct American English speakers ``S001``, ``S002``, ... for the corpora.

    Speakers alternate male / female; each takes a different voice variant from
    :data:`MALE_VARIANTS` / :data:`FEMALE_VARIANTS` until a pool is used up (then variants
    repeat with other prosody), plus a pitch in [30, 70], a rate in [145, 200] words per minute
    and a pitch range in [35, 65], all drawn from ``numpy.random.default_rng((seed, 1))``. No two
    speakers share (variant, pitch, rate, pitch range), and none uses a target voice's variant.
    """
    return _speaker_voices(n, seed, "en-us", first_id=1)


def indonesian_voices(n: int = 12, seed: int = 0) -> list[Voice]:
    """``n`` distinct Indonesian speakers ``S101``, ``S102``, ... (as :func:`english_voices`)."""
    return _speaker_voices(n, seed, "id", first_id=101)


def target_voices(language: str = "en-us") -> tuple[Voice, Voice]:
    """The two target voices ``V001`` (male, m3) and ``V002`` (female, f2) of ZeroSpeech 2019.

    Their variants are not used by any speaker of :func:`english_voices` /
    :func:`indonesian_voices`; prosody is eSpeak's default (pitch 50, range 50, 175 wpm).
    """
    male, female = TARGET_VARIANTS
    return (
        Voice("V001", language, male, volume=CORPUS_VOLUME),
        Voice("V002", language, female, volume=CORPUS_VOLUME),
    )
