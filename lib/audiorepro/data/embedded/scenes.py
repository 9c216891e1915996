"""Sound scenes: synthesised events placed in time, rendered to audio and described in words.

A :class:`Scene` is what the embedded caption corpora know about a clip: its duration, one to
four foreground events (:mod:`~audiorepro.data.embedded.sound_events`) with their attributes and
start times, an optional quiet background bed (rain, wind, hum, an engine) and optionally a
spoken phrase. Because the content is known exactly, captions can be written from it:

- :func:`sample_scene` draws a scene (durations from ``min_duration_s`` to ``max_duration_s``:
  up to three audio-encoder snippets, so that snippet averaging (Primus & Widmer, DCASE 2024,
  Section 4.2) is exercised); :func:`render_scene` synthesises its audio at 32 kHz.
- :func:`write_captions` writes five captions per clip in ClothoV2's style (8-20 words,
  Drossos et al. 2020), naming events with synonyms, attribute words ("deep", "faint",
  "rapidly"), positions ("near the end") and temporal relations ("then", "while", "after",
  "followed by"). Some captions are *generic* ("several sounds happen one after another in this
  recording") and describe many clips at once, and all captions share a small vocabulary, so a
  caption partially matches other clips: the situation that motivates soft correspondence
  targets in the distillation paper (Primus & Widmer 2024, Section 2). Each caption comes with
  2-4 paraphrases (synonym swaps, "X then Y" <-> "Y after X", active <-> noun-phrase voice),
  standing in for the GPT-augmented ClothoV2 captions of Primus et al. (DCASE 2023).
- :func:`scene_keywords` gives 3-6 Clotho-style metadata keywords.

Determinism: every function draws only from the ``numpy.random.Generator`` it is given, so
callers derive one stream per clip (``np.random.default_rng([seed, corpus, split, index, k])``)
and clip ``i`` does not depend on which clips were made before it.

Speech plugs in through a callable ``speech(text, rng) -> (wav, transcript)`` returning a mono
float32 wav at 32 kHz (:data:`Speech`); without one, scenes hold no speech.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

import numpy as np

from audiorepro.config import ConfigError, field
from audiorepro.data.embedded.sound_events import (
    BACKGROUND_CLASSES,
    LOUDNESSES,
    PEAK_LEVEL,
    PITCHES,
    SAMPLE_RATE,
    SOUND_EVENTS,
    SPEECH,
    TEMPI,
    EventAttributes,
    EventClass,
    event_class,
    synthesize,
)

Speech = Callable[[str, np.random.Generator], tuple[np.ndarray, str]]
"""``speech(text, rng) -> (wav, transcript)``: wav (S,) float32 at 32 kHz, mono; the transcript
is what was actually spoken (it may normalise the text). Must be deterministic given ``rng``."""

SPEECH_PHRASES = (
    "good morning everyone",
    "please close the door behind you",
    "the train leaves in five minutes",
    "can you hear me now",
    "let us go outside",
    "it is getting late",
    "turn left at the next corner",
    "the meeting starts at noon",
    "thank you very much",
    "where did you put the keys",
    "we need more water",
    "this way please",
    "the weather is nice today",
    "i will call you later",
    "watch your step",
    "the shop is closed on sunday",
    "come and have a look",
    "that was very loud",
    "wait for me here",
    "the next stop is the station",
)
"""Short phrases a scene's speaker says (plain lowercase English, easy for any synthesiser)."""

BACKGROUND_GAIN = 0.5
"""Background beds are rendered quiet and then scaled by this factor, below the events."""

NOISE_FLOOR = 1e-3
"""Standard deviation of the white noise under every clip (about -60 dBFS): no digital silence,
as in field recordings, so log-spectra never hit their floor."""


# --- scenes -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SceneEvent:
    """One event of a scene: its class, attributes (duration included) and start time (s)."""

    event_class: str
    attributes: EventAttributes
    start: float

    @property
    def duration(self) -> float:
        """Seconds."""
        return self.attributes.duration

    @property
    def end(self) -> float:
        """``start + duration`` (s)."""
        return self.start + self.attributes.duration

    def to_dict(self) -> dict:
        """JSON-ready ``{"event_class", "start", "duration", "pitch", "loudness", "tempo"}``."""
        a = self.attributes
        return {
            "event_class": self.event_class,
            "start": round(self.start, 6),
            "duration": round(a.duration, 6),
            "pitch": a.pitch,
            "loudness": a.loudness,
            "tempo": a.tempo,
        }


@dataclasses.dataclass(frozen=True)
class Scene:
    """A clip's content: foreground events sorted by start, background bed, spoken phrase.

    Attributes:
        duration: seconds.
        events: foreground events (a spoken phrase is an event of class ``"speech"``), sorted
            by start time.
        background: the background bed spanning the whole clip, or ``None``.
        transcript: what the speaker says, or ``None`` when the scene has no speech.
    """

    duration: float
    events: tuple[SceneEvent, ...]
    background: SceneEvent | None = None
    transcript: str | None = None

    def position(self, index: int) -> str:
        """Where event ``index`` sits: ``beginning``, ``middle``, ``end`` or ``throughout``."""
        event = self.events[index]
        if event.duration >= 0.7 * self.duration:
            return "throughout"
        center = (event.start + event.end) / 2
        if center < self.duration / 3:
            return "beginning"
        if center > 2 * self.duration / 3:
            return "end"
        return "middle"

    def relation(self, first: int, second: int) -> str:
        """``"while"`` if event ``second`` starts before event ``first`` ends, else ``"then"``.

        50 ms of overlap count as none: a listener hears a sequence.
        """
        return "while" if self.events[second].start < self.events[first].end - 0.05 else "then"

    def to_dict(self) -> dict:
        """JSON-ready description (what the corpora store as scene metadata)."""
        return {
            "duration": round(self.duration, 6),
            "events": [e.to_dict() for e in self.events],
            "background": None if self.background is None else self.background.to_dict(),
            "transcript": self.transcript,
        }


@dataclasses.dataclass(frozen=True)
class SceneConfig:
    """How scenes are drawn (:func:`sample_scene`)."""

    min_duration_s: float = field(3.0, help="shortest clip, seconds")
    max_duration_s: float = field(
        12.0, help="longest clip, seconds (three audio-encoder snippets at the CPU presets)"
    )
    max_events: int = field(4, help="most foreground events per scene (1-4)")
    background_prob: float = field(0.4, help="probability of a background bed")
    overlap_prob: float = field(0.35, help="probability that two consecutive events overlap")
    speech_prob: float = field(0.25, help="probability of a spoken phrase (needs a synthesiser)")
    classes: tuple[str, ...] = field((), help="foreground event classes; empty: all")
    sample_rate: int = field(SAMPLE_RATE, help="Hz")

    def __post_init__(self) -> None:
        if not 0 < self.min_duration_s <= self.max_duration_s:
            raise ConfigError(
                f"SceneConfig: need 0 < min_duration_s <= max_duration_s, got "
                f"{self.min_duration_s} and {self.max_duration_s}"
            )
        if not 1 <= self.max_events <= 4:
            raise ConfigError(f"SceneConfig: max_events must be 1-4, got {self.max_events}")
        for name in ("background_prob", "overlap_prob", "speech_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"SceneConfig: {name} must be in [0, 1]")
        for name in self.classes:
            if name == SPEECH.name:
                raise ConfigError("SceneConfig: 'speech' is added through speech_prob")
            if name not in SOUND_EVENTS:
                raise ConfigError(
                    f"SceneConfig: unknown sound event class {name!r}; valid: "
                    f"{', '.join(SOUND_EVENTS)}"
                )
        if self.classes and len(self.classes) < self.max_events:
            raise ConfigError(
                f"SceneConfig: {len(self.classes)} classes cannot fill {self.max_events} events"
            )


_EVENT_COUNT_PROBS = np.array([0.3, 0.35, 0.22, 0.13])


def _random_attributes(cls: EventClass, rng: np.random.Generator, duration: float):
    pitch = PITCHES[rng.integers(3)] if "pitch" in cls.attributes else "medium"
    loudness = LOUDNESSES[rng.integers(2)]
    tempo = TEMPI[rng.integers(2)] if "tempo" in cls.attributes else "slow"
    return EventAttributes(pitch=pitch, loudness=loudness, tempo=tempo, duration=duration)


def _check_speech_output(out: object, text: str) -> tuple[np.ndarray, str]:
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"speech({text!r}, rng) must return (wav, transcript), got {out!r}")
    wav, transcript = out
    wav = np.asarray(wav, dtype=np.float32)
    if wav.ndim != 1 or wav.size == 0 or not np.isfinite(wav).all() or not np.any(wav):
        raise ValueError(
            f"speech({text!r}, rng) must return a non-silent finite mono wav (S,), "
            f"got shape {wav.shape}"
        )
    if not isinstance(transcript, str) or not transcript.strip():
        raise ValueError(f"speech({text!r}, rng) returned an empty transcript")
    return wav, transcript.strip()


def sample_scene(
    rng: np.random.Generator,
    config: SceneConfig = SceneConfig(),
    speech: Speech | None = None,
    duration: float | None = None,
) -> tuple[Scene, np.ndarray | None]:
    """Draw a scene: duration, 1-4 events placed in time, background, maybe a spoken phrase.

    Events get consecutive time slots of random length (a Dirichlet split of the time left
    after each event's minimum duration); each event fills 40-100 % of its slot at a random
    offset, so gaps vary. With probability ``overlap_prob`` one event is then moved to start
    20-60 % into the previous one. Times are on the sample grid.

    Args:
        rng: the clip's scene stream (consumed).
        config: durations, probabilities, classes.
        speech: the speech synthesiser, or ``None`` for scenes without speech.
        duration: a fixed clip duration (AudioCaps' 10 s) instead of a random one.

    Returns:
        ``(scene, speech_wav)``: ``speech_wav`` (S,) float32 is the synthesised phrase that
        :func:`render_scene` needs, or ``None``.
    """
    sr = config.sample_rate
    if duration is None:
        duration = rng.uniform(config.min_duration_s, config.max_duration_s)
    duration = round(duration * 100) / 100  # 10 ms grid: a whole number of samples at 32 kHz

    classes = config.classes or tuple(SOUND_EVENTS)
    probs = _EVENT_COUNT_PROBS[: config.max_events] / _EVENT_COUNT_PROBS[: config.max_events].sum()
    count = int(rng.choice(np.arange(1, config.max_events + 1), p=probs))
    names = [str(n) for n in rng.choice(classes, size=count, replace=False)]

    speech_wav, transcript = None, None
    if speech is not None and rng.random() < config.speech_prob:
        text = SPEECH_PHRASES[rng.integers(len(SPEECH_PHRASES))]
        speech_rng = np.random.default_rng(rng.integers(2**63))
        wav, spoken = _check_speech_output(speech(text, speech_rng), text)
        # A phrase that does not fit with a margin is left out rather than cut mid-word.
        if len(wav) / sr + 0.5 <= duration:
            speech_wav, transcript = wav, spoken

    # Minimum durations, shortened for short clips so that every event still fits.
    items = [(n, event_class(n)) for n in names]
    if speech_wav is not None:
        position = int(rng.integers(len(items) + 1))
        items.insert(position, (SPEECH.name, SPEECH))
    speech_len = 0.0 if speech_wav is None else len(speech_wav) / sr

    def minimum(name: str, cls: EventClass) -> float:
        return speech_len if name == SPEECH.name else min(cls.min_duration, duration / 2)

    while len(items) > 1 and sum(minimum(n, c) for n, c in items) > duration:
        # Drop the last sound event (never the phrase, which already fits on its own).
        drop = max(i for i, (n, _) in enumerate(items) if n != SPEECH.name)
        if sum(1 for n, _ in items if n != SPEECH.name) == 1:
            items = [(n, c) for n, c in items if n != SPEECH.name]
            speech_wav, transcript, speech_len = None, None, 0.0
            continue
        items.pop(drop)

    mins = np.array([minimum(n, c) for n, c in items])
    slots = mins + rng.dirichlet(np.full(len(items), 2.0)) * (duration - mins.sum())
    placed: list[list] = []
    slot_start = 0.0
    for (name, cls), low, slot in zip(items, mins, slots, strict=True):
        if name == SPEECH.name:
            length = speech_len
        else:
            length = min(cls.max_duration, low + rng.uniform(0.4, 1.0) * (slot - low))
        start = slot_start + rng.uniform(0.0, 1.0) * max(0.0, slot - length)
        placed.append([name, cls, start, length])
        slot_start += slot

    if len(placed) >= 2 and rng.random() < config.overlap_prob:
        j = int(rng.integers(1, len(placed)))
        _, _, prev_start, prev_len = placed[j - 1]
        name, cls, _, length = placed[j]
        new_start = prev_start + rng.uniform(0.2, 0.6) * prev_len
        if name != SPEECH.name:
            length = min(length, duration - new_start)
        if new_start + length <= duration and length >= minimum(name, cls):
            placed[j][2:] = [new_start, length]

    events = []
    for name, cls, start, length in placed:
        start_n = int(round(start * sr))
        length_n = max(1, min(int(round(length * sr)), int(round(duration * sr)) - start_n))
        if name == SPEECH.name:
            length_n = len(speech_wav)
            loudness = LOUDNESSES[rng.integers(2)]
            attributes = EventAttributes(loudness=loudness, duration=length_n / sr)
        else:
            attributes = _random_attributes(cls, rng, length_n / sr)
        events.append(SceneEvent(name, attributes, start_n / sr))
    events.sort(key=lambda e: e.start)

    background = None
    if rng.random() < config.background_prob:
        options = [b for b in BACKGROUND_CLASSES if b not in names]
        name = options[rng.integers(len(options))]
        cls = event_class(name)
        attributes = _random_attributes(cls, rng, duration)
        background = SceneEvent(name, dataclasses.replace(attributes, loudness="quiet"), 0.0)
    return Scene(duration, tuple(events), background, transcript), speech_wav


def render_scene(
    scene: Scene,
    rng: np.random.Generator,
    speech_wav: np.ndarray | None = None,
    sample_rate: int = SAMPLE_RATE,
) -> np.ndarray:
    """Synthesise a scene: wav (S,) float32, S = ``round(duration * sample_rate)``.

    Events are synthesised in order from ``rng`` (the clip's audio stream) and added at their
    start samples; the background bed runs under them at :data:`BACKGROUND_GAIN` of its quiet
    level; a spoken phrase is scaled to its loudness level; white noise at
    :data:`NOISE_FLOOR` lies under everything. A mix whose peak exceeds 0.98 is scaled down as
    a whole (never clipped).

    Raises:
        ValueError: the scene has speech but ``speech_wav`` is missing or of the wrong length.
    """
    n = int(round(scene.duration * sample_rate))
    out = np.zeros(n, dtype=np.float64)
    for event in scene.events:
        start = int(round(event.start * sample_rate))
        if event.event_class == SPEECH.name:
            if speech_wav is None:
                raise ValueError("the scene has a spoken phrase: pass its speech_wav")
            wav = np.asarray(speech_wav, dtype=np.float64)
            if abs(len(wav) - event.duration * sample_rate) > 1:
                raise ValueError(
                    f"speech_wav has {len(wav)} samples, the scene's phrase "
                    f"{event.duration * sample_rate:.0f}"
                )
            wav = wav * (PEAK_LEVEL[event.attributes.loudness] / np.max(np.abs(wav)))
        else:
            wav = synthesize(event.event_class, event.attributes, rng, sample_rate)
        stop = min(n, start + len(wav))
        out[start:stop] += wav[: stop - start]
    if scene.background is not None:
        bed = synthesize(
            scene.background.event_class, scene.background.attributes, rng, sample_rate
        )
        out[: len(bed)] += BACKGROUND_GAIN * bed[:n]
    out += NOISE_FLOOR * rng.standard_normal(n)
    peak = float(np.max(np.abs(out)))
    if peak > 0.98:
        out *= 0.98 / peak
    return out.astype(np.float32)


# --- captions ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CaptionStyle:
    """How a corpus words its captions.

    Attributes:
        name: ``clotho``, ``audiocaps`` or ``wavcaps``.
        min_words: shortest caption (words).
        max_words: longest caption (words).
        max_mentions: most foreground events one caption names.
        position_prob: probability of naming where an event happens ("near the end").
        attribute_prob: probability of naming each attribute of a named event.
        background_prob: probability of naming the background bed.
        final_period: end with a period (Clotho, WavCaps) or not (AudioCaps).
        progressive: only "X is ...ing" clauses, as WavCaps' terse ChatGPT captions.
    """

    name: str
    min_words: int
    max_words: int
    max_mentions: int
    position_prob: float
    attribute_prob: float
    background_prob: float
    final_period: bool
    progressive: bool = False


CLOTHO_STYLE = CaptionStyle("clotho", 8, 20, 3, 0.45, 0.5, 0.5, True)
"""ClothoV2: 8-20 words, positions and temporal relations, period at the end."""
AUDIOCAPS_STYLE = CaptionStyle("audiocaps", 4, 14, 3, 0.1, 0.3, 0.4, False)
"""AudioCaps: shorter (9.8 words on average in the real corpus), no final period."""
WAVCAPS_STYLE = CaptionStyle("wavcaps", 3, 10, 2, 0.0, 0.2, 0.3, True, progressive=True)
"""WavCaps: one terse sentence ("A bell is ringing."), 7.8 words on average in the real one."""


@dataclasses.dataclass(frozen=True)
class Caption:
    """A caption, its paraphrases, and whether it is generic (shared by many clips)."""

    text: str
    paraphrases: tuple[str, ...]
    generic: bool = False


@dataclasses.dataclass(frozen=True)
class _Mention:
    index: int  # into scene.events; -1 is the background
    express: tuple[str, ...]  # attributes the caption names


_POSITIONS = {
    "beginning": (" at the beginning", " at the start", " early on"),
    "middle": (" in the middle", " halfway through", " in the middle of the recording"),
    "end": (" towards the end", " near the end", " at the end"),
    "throughout": (" throughout", " the whole time", " throughout the recording"),
}
_FRONTED = {
    "beginning": ("at the beginning", "at first", "at the start"),
    "middle": ("in the middle", "halfway through", "midway through"),
    "end": ("towards the end", "near the end", "at the end"),
    "throughout": ("throughout the recording", "the whole time", "from start to finish"),
}

_GENERIC: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "sequence",
        (
            "several sounds are heard one after another",
            "different sounds follow each other",
            "several sounds happen one after another in this recording",
            "a series of different sounds can be heard one after the other",
            "different noises follow each other during the course of the recording",
            "one sound is followed by another different sound in this recording",
        ),
    ),
    (
        "overlap",
        (
            "two sounds are heard at the same time",
            "several things make noise at once",
            "two different sounds can be heard at the same time in this recording",
            "more than one thing is making noise at the same time here",
            "several sounds overlap with each other during this short recording",
            "two things make noise simultaneously at some point in this recording",
        ),
    ),
    (
        "loud",
        (
            "a loud noise is heard",
            "something makes a loud sound",
            "a loud noise is heard at some point in the recording",
            "something makes a loud sound at some point during this recording",
            "at one point a loud sound can be clearly heard here",
            "there is a loud noise somewhere in this short recording",
        ),
    ),
    (
        "quiet",
        (
            "quiet sounds are heard",
            "faint noises can be heard",
            "only quiet sounds can be heard in this calm recording",
            "the sounds in this recording are all soft and rather faint",
            "faint noises are heard in an otherwise quiet and calm place",
            "everything that can be heard in this recording is quiet",
        ),
    ),
    (
        "background",
        (
            "there is steady background noise",
            "a noise continues in the background",
            "a steady noise continues in the background the whole time",
            "there is constant background noise throughout the entire recording",
            "a continuous noise can be heard in the background throughout",
            "the background is filled with a steady noise from start to end",
        ),
    ),
    (
        "speech",
        (
            "a person talks among other sounds",
            "someone speaks while other sounds occur",
            "a person says a few words while other sounds are heard",
            "a voice can be heard speaking among several other noises",
            "someone speaks briefly and other sounds occur in the recording",
            "there is a person talking as well as some other sounds",
        ),
    ),
    (
        "machine",
        (
            "a machine is running",
            "a mechanical noise is heard",
            "some kind of machine is running in this recording",
            "a machine makes a continuous mechanical noise in this recording",
            "a mechanical device is running and making a steady noise",
        ),
    ),
    (
        "water",
        (
            "water is making noise",
            "the sound of water is heard",
            "water sounds can be heard at some point in this recording",
            "there is the sound of water somewhere in this recording",
            "something involving water is making noise in this recording",
        ),
    ),
    (
        "animal",
        (
            "an animal is making noise",
            "animal sounds are heard",
            "an animal makes some noises at some point in this recording",
            "the sound of an animal can be heard in this recording",
            "an animal is making sounds at some point in the recording",
        ),
    ),
    (
        "electronic",
        (
            "an electronic device is making sounds",
            "electronic tones are heard",
            "an electronic device makes a tone in this recording",
            "an electronic signal sounds at some point during the recording",
            "a device produces synthetic electronic sounds in this recording",
        ),
    ),
    (
        "ringing",
        (
            "something is ringing",
            "a ringing sound is heard",
            "something is ringing at some point in this recording",
            "a ringing sound can be heard at some point in the recording",
            "there is a ringing noise somewhere in this recording",
        ),
    ),
    (
        "impact",
        (
            "something is being hit repeatedly",
            "tapping sounds are heard",
            "something is being hit or tapped repeatedly in this recording",
            "repeated tapping or hitting sounds can be heard in the recording",
            "a series of short knocking sounds is heard in this recording",
        ),
    ),
    (
        "weather",
        (
            "the weather is noisy outside",
            "weather sounds are heard outdoors",
            "the weather is making noise outside in this recording",
            "sounds of rough weather can be heard outside in this recording",
            "the recording captures the sound of the weather outdoors",
        ),
    ),
    (
        "alarm",
        (
            "an alarm is going off",
            "a warning sound is heard",
            "some kind of warning signal goes off in this recording",
            "an alarm or warning sound can be heard in the recording",
            "a warning sound is going off at some point in the recording",
        ),
    ),
)
"""Generic captions: (scene property, variants). Each variant describes every scene with the
property, so these exact strings recur across clips (as ClothoV2's duplicate captions do). A
style uses the variants that fit its word range (the short ones suit AudioCaps and WavCaps)."""


def generic_caption_groups(scene: Scene) -> list[str]:
    """The generic-caption groups (keys of the generic caption table) that fit ``scene``."""
    groups = []
    fg = scene.events
    relations = [scene.relation(i, i + 1) for i in range(len(fg) - 1)]
    if "then" in relations:
        groups.append("sequence")
    if "while" in relations:
        groups.append("overlap")
    if any(e.attributes.loudness == "loud" for e in fg):
        groups.append("loud")
    elif all(e.attributes.loudness == "quiet" for e in fg):
        groups.append("quiet")
    if scene.background is not None:
        groups.append("background")
    if scene.transcript is not None and len(fg) >= 2:
        groups.append("speech")
    categories = {event_class(e.event_class).category for e in fg}
    groups.extend(g for g, _ in _GENERIC if g in categories)
    return groups


def word_count(text: str) -> int:
    """Number of whitespace-separated words (punctuation attached to words does not count)."""
    return len(text.split())


_ARTICLE = re.compile(r"\b([Aa]n?) (?=(\w))")


def _fix_articles(text: str) -> str:
    """'a' before a vowel letter becomes 'an' and vice versa (the vocabulary has no 'hour')."""

    def repl(match: re.Match) -> str:
        word = "an" if match.group(2).lower() in "aeiou" else "a"
        if match.group(1)[0] == "A":
            word = word.capitalize()
        return word + " "

    return _ARTICLE.sub(repl, text)


def _finish(text: str, style: CaptionStyle) -> str:
    text = _fix_articles(re.sub(r"\s+", " ", text).strip())
    text = re.sub(r"\s+,", ",", text)
    text = text[0].upper() + text[1:]
    return text + "." if style.final_period else text


def _pick(rng: np.random.Generator, options: Sequence[str]) -> str:
    return options[int(rng.integers(len(options)))]


class _Renderer:
    """Turns a caption plan (which events, which attributes) into words, with random wording."""

    def __init__(self, scene: Scene, rng: np.random.Generator, style: CaptionStyle) -> None:
        self.scene = scene
        self.rng = rng
        self.style = style

    def _event(self, mention: _Mention) -> SceneEvent:
        if mention.index < 0:
            assert self.scene.background is not None
            return self.scene.background
        return self.scene.events[mention.index]

    def _fill(self, template: str, mention: _Mention) -> str:
        """Fill ``{adj}`` / ``{adv}`` with words for the attributes the mention expresses."""
        event = self._event(mention)
        cls = event_class(event.event_class)
        a = event.attributes
        adjectives: list[str] = []
        adverbs: list[str] = []
        has_adj, has_adv = "{adj}" in template, "{adv}" in template
        if "loudness" in mention.express:
            if has_adj and cls.adjectives(a.loudness):
                adjectives.append(_pick(self.rng, cls.adjectives(a.loudness)))
            elif has_adv and cls.adverbs(a.loudness):
                adverbs.append(_pick(self.rng, cls.adverbs(a.loudness)))
        if "pitch" in mention.express and has_adj and cls.adjectives(a.pitch):
            word = _pick(self.rng, cls.adjectives(a.pitch))
            if word not in adjectives:
                adjectives.append(word)
        if "tempo" in mention.express and has_adv and cls.adverbs(a.tempo):
            adverbs.insert(0, _pick(self.rng, cls.adverbs(a.tempo)))
        adj = " ".join(adjectives) + " " if adjectives else ""
        adv = " " + " and ".join(adverbs) if adverbs else ""
        text = template.replace("{adj}", adj, 1).replace("{adj}", "")
        return text.replace("{adv}", adv, 1).replace("{adv}", "")

    def active(self, m: _Mention) -> str:
        cls = event_class(self._event(m).event_class)
        return self._fill(f"{_pick(self.rng, cls.subjects)} {_pick(self.rng, cls.verbs)}", m)

    def progressive(self, m: _Mention) -> str:
        cls = event_class(self._event(m).event_class)
        return self._fill(f"{_pick(self.rng, cls.subjects)} is {_pick(self.rng, cls.gerunds)}", m)

    def noun(self, m: _Mention) -> str:
        cls = event_class(self._event(m).event_class)
        return self._fill(_pick(self.rng, cls.sounds), m)

    def position(self, m: _Mention, fronted: bool = False) -> str:
        where = self.scene.position(m.index)
        return _pick(self.rng, (_FRONTED if fronted else _POSITIONS)[where])

    def clause(self, m: _Mention) -> str:
        """A stand-alone clause: active, progressive or 'N can be heard' (WavCaps: progressive)."""
        if self.style.progressive:
            return (
                self.progressive(m) if self.rng.random() < 0.8 else f"{self.noun(m)} can be heard"
            )
        choice = self.rng.integers(4)
        if choice == 0:
            return self.progressive(m)
        if choice == 1:
            return f"{self.noun(m)} can be heard"
        return self.active(m)

    def single(self, m: _Mention) -> str:
        rng = self.rng
        pos = self.position(m) if rng.random() < self.style.position_prob else ""
        if self.style.progressive:
            return self.clause(m)
        choice = rng.integers(6)
        if choice == 0:
            return f"{self.active(m)}{pos}"
        if choice == 1:
            return f"{self.noun(m)} can be heard{pos}"
        if choice == 2:
            return f"you can hear {self.noun(m)}{pos}"
        if choice == 3:
            return f"{self.progressive(m)}{pos}"
        if choice == 4 and pos:
            return f"{self.position(m, fronted=True)}, {self.active(m)}"
        noun = self.noun(m)
        if noun.startswith("the "):  # not "the sound of the ringing of a bell"
            return f"{noun} can be heard{pos}"
        return f"the sound of {noun} is heard{pos}"

    def pair(self, a: _Mention, b: _Mention) -> str:
        """Two events with templates that can put the later one first ("Y after X")."""
        rng = self.rng
        if self.scene.relation(a.index, b.index) == "then":
            options = (
                lambda: f"after {self.noun(a)}, {self.active(b)}",
                lambda: f"{self.active(b)} after {self.noun(a)}",
                lambda: f"{self.active(b)} after {self.active(a)}",
                lambda: f"first {self.noun(a)} can be heard, then {self.noun(b)}",
                lambda: f"first {self.active(a)}, and then {self.active(b)}",
            )
        else:
            options = (
                lambda: f"while {self.progressive(a)}, {self.active(b)}",
                lambda: f"{self.active(b)} while {self.progressive(a)}",
                lambda: f"{self.noun(a)} and {self.noun(b)} can be heard at the same time",
                lambda: f"{self.noun(a)} can be heard together with {self.noun(b)}",
            )
        return options[int(rng.integers(len(options)))]()

    def chain(self, mentions: Sequence[_Mention]) -> str:
        """Events in order, joined by connectives chosen from their temporal relation."""
        rng = self.rng
        first = mentions[0]
        if self.style.progressive:
            parts = [self.clause(first)]
            for m in mentions[1:]:
                parts.append(f" and {self.progressive(m)}")
            return "".join(parts)
        opening = rng.integers(4)
        then_next = self.scene.relation(first.index, mentions[1].index) == "then"
        if opening == 0 and then_next:
            parts = [f"first {self.active(first)}"]
        elif opening == 1 and rng.random() < self.style.position_prob:
            parts = [f"{self.position(first, fronted=True)}, {self.active(first)}"]
        else:
            parts = [self.clause(first)]
        for prev, m in zip(mentions, mentions[1:], strict=False):
            if self.scene.relation(prev.index, m.index) == "then":
                options = (
                    lambda m=m: f", then {self.active(m)}",
                    lambda m=m: f" and then {self.active(m)}",
                    lambda m=m: f", followed by {self.noun(m)}",
                    lambda m=m: f", and after that {self.active(m)}",
                    lambda m=m: f" before {self.active(m)}",
                )
            else:
                options = (
                    lambda m=m: f" while {self.progressive(m)}",
                    lambda m=m: f" as {self.active(m)}",
                    lambda m=m: f" and at the same time {self.active(m)}",
                    lambda m=m: f", along with {self.noun(m)}",
                )
            parts.append(options[int(rng.integers(len(options)))]())
        return "".join(parts)

    def background(self, m: _Mention) -> str:
        options = (
            lambda: f" with {self.noun(m)} in the background",
            lambda: f" while {self.progressive(m)} in the background",
            lambda: f", and {self.progressive(m)} in the background",
        )
        if not self.style.progressive:
            options += (lambda: f" over {self.noun(m)}",)
        return options[int(self.rng.integers(len(options)))]()

    def render(self, plan: Sequence[_Mention]) -> str:
        fg = [m for m in plan if m.index >= 0]
        bg = [m for m in plan if m.index < 0]
        if len(fg) == 1:
            body = self.single(fg[0])
        elif len(fg) == 2 and not self.style.progressive and self.rng.random() < 0.4:
            body = self.pair(fg[0], fg[1])
        else:
            body = self.chain(fg)
        if bg:
            body += self.background(bg[0])
        return _finish(body, self.style)


def _plan(scene: Scene, rng: np.random.Generator, style: CaptionStyle) -> list[_Mention]:
    """Which events a caption names (at least one, in time order) and which attributes."""
    count = len(scene.events)
    keep = rng.random(count) < 0.8
    if not keep.any():
        keep[rng.integers(count)] = True
    indices = [int(i) for i in np.flatnonzero(keep)]
    while len(indices) > style.max_mentions:
        indices.pop(int(rng.integers(len(indices))))
    plan = []
    for i in indices:
        cls = event_class(scene.events[i].event_class)
        express = tuple(a for a in cls.attributes if rng.random() < style.attribute_prob)
        plan.append(_Mention(i, express))
    if scene.background is not None and rng.random() < style.background_prob:
        cls = event_class(scene.background.event_class)
        express = tuple(a for a in cls.attributes if rng.random() < style.attribute_prob)
        plan.append(_Mention(-1, express))
    return plan


def _fits(text: str, style: CaptionStyle) -> bool:
    return style.min_words <= word_count(text) <= style.max_words


def _fallback(scene: Scene, rng: np.random.Generator, style: CaptionStyle) -> str:
    """A caption that always fits the word range: one event, 'the sound of N ...' padded."""
    noun = _Renderer(scene, rng, style).noun(_Mention(0, ()))
    text = (
        f"{noun} can be heard" if noun.startswith("the ") else f"the sound of {noun} can be heard"
    )
    while word_count(text) < style.min_words:
        text += " in this recording" if "recording" not in text else " clearly"
    words = text.split()[: style.max_words]
    return _finish(" ".join(words), style)


def _specific_caption(scene: Scene, rng: np.random.Generator, style: CaptionStyle):
    """``(caption, plan)``: a caption fitting the style's word range, by redrawing plans."""
    for _ in range(60):
        plan = _plan(scene, rng, style)
        text = _Renderer(scene, rng, style).render(plan)
        if _fits(text, style):
            return text, plan
    return _fallback(scene, rng, style), None


def _paraphrases(
    scene: Scene,
    plan: list[_Mention] | None,
    original: str,
    count: int,
    rng: np.random.Generator,
    style: CaptionStyle,
) -> tuple[str, ...]:
    """``count`` distinct re-wordings of the plan (same events, attributes and relations)."""
    found: list[str] = []
    attempts = 0
    while len(found) < count and attempts < 80:
        attempts += 1
        if plan is None:
            text = _fallback(scene, rng, style)
        else:
            text = _Renderer(scene, rng, style).render(plan)
        if text != original and text not in found and (attempts > 40 or _fits(text, style)):
            found.append(text)
    # Last resort for plans with few wordings: reframe the original sentence.
    frames = ("In this recording, {}", "Here, {}", "One can hear that {}", "It seems that {}")
    for frame in frames:
        if len(found) >= count:
            break
        body = original[0].lower() + original[1:]
        text = frame.format(body)
        if text not in found:
            found.append(text)
    return tuple(found)


def write_captions(
    scene: Scene,
    rng: np.random.Generator,
    style: CaptionStyle = CLOTHO_STYLE,
    num_captions: int = 5,
    generic_prob: float = 0.15,
    num_paraphrases: tuple[int, int] = (2, 4),
) -> list[Caption]:
    """Captions of a scene, each with paraphrases; all distinct within the clip.

    Each caption is generic with probability ``generic_prob`` (a variant of a generic caption
    whose property the scene has, e.g. "sequence" or "water"; its paraphrases are other
    variants of the same group), otherwise specific: a plan names 1-``max_mentions`` events
    (each kept with probability 0.8, as annotators miss things), some of their attributes and
    maybe the background, and is worded with random templates and synonyms until it fits the
    style's word range. Paraphrases re-word the same plan.

    Args:
        scene: the clip's content.
        rng: the clip's caption stream (consumed).
        style: :data:`CLOTHO_STYLE`, :data:`AUDIOCAPS_STYLE` or :data:`WAVCAPS_STYLE`.
        num_captions: captions per clip (5 in ClothoV2).
        generic_prob: probability that a caption is generic.
        num_paraphrases: inclusive range of paraphrases per caption.
    """
    if not scene.events:
        raise ValueError("a scene without events cannot be captioned")
    low, high = num_paraphrases
    if not 1 <= low <= high:
        raise ValueError(
            f"num_paraphrases must be (low, high) with 1 <= low <= high, got {low, high}"
        )
    # Generic groups with enough variants in the style's word range for a caption and its
    # paraphrases.
    generic = {
        group: [v for v in variants if style.min_words <= word_count(v) <= style.max_words]
        for group, variants in _GENERIC
    }
    groups = [g for g in generic_caption_groups(scene) if len(generic[g]) > low]
    captions: list[Caption] = []
    for _ in range(100 * num_captions):
        if len(captions) == num_captions:
            break
        count = int(rng.integers(low, high + 1))
        if groups and rng.random() < generic_prob:
            variants = generic[_pick(rng, groups)]
            order = rng.permutation(len(variants))
            texts = [_finish(variants[i], style) for i in order]
            caption = Caption(texts[0], tuple(texts[1 : 1 + count]), generic=True)
        else:
            text, plan = _specific_caption(scene, rng, style)
            caption = Caption(text, _paraphrases(scene, plan, text, count, rng, style))
        if all(caption.text != c.text for c in captions):
            captions.append(caption)
    else:
        raise RuntimeError(f"could not word {num_captions} distinct captions for {scene}")
    return captions


def scene_keywords(scene: Scene, rng: np.random.Generator, count: tuple[int, int] = (3, 6)):
    """3-6 lowercase keywords (Clotho metadata style): the events' and background's keywords.

    Each foreground event contributes its first keyword and maybe one more, the background and
    the speaker one each; the list is topped up from the events' other keywords when short.
    """
    low, high = count
    target = int(rng.integers(low, high + 1))
    keywords: list[str] = []

    def add(word: str) -> None:
        if word not in keywords:
            keywords.append(word)

    for event in scene.events:
        words = event_class(event.event_class).keywords
        add(words[0])
        if rng.random() < 0.5:
            add(_pick(rng, words[1:]))
    if scene.background is not None:
        add(event_class(scene.background.event_class).keywords[0])
    spare = [w for e in scene.events for w in event_class(e.event_class).keywords[1:]]
    spare += ["ambience", "recording", "field recording", "sound"]
    while len(keywords) < target and spare:
        add(spare.pop(int(rng.integers(len(spare)))))
    return keywords[: max(target, low)]
