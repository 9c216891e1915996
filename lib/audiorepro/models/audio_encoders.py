"""Audio encoders by family, for the dual encoders of chapters 01 and 02.

:class:`AudioEncoderConfig` names an encoder family and its settings; :data:`AUDIO_ENCODERS` maps
each family to the function that builds it; :func:`build_audio_encoder` returns the module, its
feature size and the snippet length it embeds long audio with.

Every encoder maps a (B, 1, F, T) log-mel batch to ``(logits, features)`` and exposes the
feature size as ``num_features``. PaSST and ATST-Frame have a time encoding of ``snippet_s``;
longer audio goes through :func:`~audiorepro.models.snippets.embed_snippets`. The CNNs and
MobileNet take any length in one pass.

Pretrained weights (``audio_pretrained``): the papers start every encoder from an AudioSet
tagger. :data:`RELEASED_CHECKPOINTS` names each family's released file, which
:func:`resolve_audio_pretrained` looks up in :func:`~audiorepro.paths.checkpoints_dir` (no
downloads), and :func:`load_audio_pretrained` loads a file's body strictly into the built
encoder, ignoring its class projection. :func:`save_released_layout` writes our own encoders in
the same layouts, so an embedded-scale tagging run stands in for a release.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any

import torch
from torch import nn

from audiorepro.config import ConfigError, field
from audiorepro.paths import checkpoints_dir
from audiorepro.storage import CheckpointError, atomic_write

__all__ = [
    "AUDIOSET",
    "AUDIO_ENCODERS",
    "FRAMES_PER_SECOND",
    "RELEASED_CHECKPOINTS",
    "released_head_inputs",
    "STAGE0",
    "AudioEncoderConfig",
    "MelBinPool",
    "ReleasedCheckpoint",
    "build_audio_encoder",
    "encoder_variant",
    "load_audio_pretrained",
    "released_checkpoint",
    "resolve_audio_pretrained",
    "save_released_layout",
]

FRAMES_PER_SECOND = 100  # PaSST log-mel: 10 ms hop
AUDIOSET = "audioset"
"""``audio_pretrained`` value: the family's released AudioSet checkpoint."""
STAGE0 = "stage0"
"""``audio_pretrained`` value the experiments layer replaces by the path of its own tagging run."""


@dataclasses.dataclass(frozen=True)
class AudioEncoderConfig:
    """Which audio encoder, and its settings (paper (a) Table 2; paper (b) §4.2)."""

    audio_encoder: str = field(
        "passt",
        help="passt | cnn14 | cnn10 (paper Table 2) | atst | mobilenet (chapter 02, paper (b) §4.2).",
    )
    passt_variant: str = field("n", help="PaSST configuration: n | s | l | s20 | tiny | small.")
    snippet_s: float = field(
        10.0, help="PaSST positional-encoding length = snippet length (§3.4: 10 s)."
    )
    s_patchout_t: int | None = field(
        None, help="Structured patchout, time columns (None: the variant's; Table 2)."
    )
    s_patchout_f: int | None = field(
        None, help="Structured patchout, frequency rows (None: the variant's; Table 2)."
    )
    atst_variant: str = field(
        "base", help="ATST-Frame configuration: base (paper (b)) | small | tiny."
    )
    atst_freq_warp: float = field(
        0.1, help="ATST frequency warping: largest share of the top mel bins dropped (§4.2.2)."
    )
    mobilenet_variant: str = field(
        "mn40_as_ext",
        help="EfficientAT MobileNetV3, width from the prefix: mn40_as_ext (paper (b)) | mn10 | "
        "mn01 ...; a released id (mn10_as, mn01_as, ...) for audio_pretrained='audioset'.",
    )
    cnn_base_channels: int = field(
        64, help="CNN14/CNN10 channels of the first block (PANNs: 64; smaller on CPU)."
    )
    cnn_mel_bins: int = field(
        64,
        help="Mel bands the CNNs see (PANNs: 64); the 128 PaSST bands are averaged in pairs.",
    )
    audio_pretrained: str | None = field(
        None,
        help="Initial audio-encoder weights: None (random) | a checkpoint file | 'audioset' (the "
        "family's released AudioSet file by its published name in $AUDIOREPRO_CHECKPOINTS) | "
        "'stage0' (our embedded-scale tagging run, resolved to a file by the experiments).",
    )

    def __post_init__(self) -> None:
        if self.audio_encoder not in AUDIO_ENCODERS:
            raise ConfigError(
                f"audio_encoder: expected {' | '.join(AUDIO_ENCODERS)}, got {self.audio_encoder!r}"
            )
        if self.audio_pretrained is not None and not str(self.audio_pretrained).strip():
            raise ConfigError("audio_pretrained: empty; use None for random initial weights")

    @property
    def front_end(self) -> str:
        """The log-mel the audio encoder takes: ``atst`` (64 bands, 16 kHz) or ``passt``."""
        return "atst" if self.audio_encoder == "atst" else "passt"

    @property
    def snippet_frames(self) -> int:
        """Snippet length in log-mel frames."""
        return int(round(self.snippet_s * FRAMES_PER_SECOND))


class MelBinPool(nn.Module):
    """Averages groups of adjacent mel bands before an encoder: 128 PaSST bands → 64 for a CNN
    built, as PANNs, for 64 (an approximation of PANNs' own 64-band front end)."""

    def __init__(self, encoder: nn.Module, factor: int) -> None:
        super().__init__()
        if factor < 1 or 128 % factor:
            raise ValueError(f"mel pooling factor must divide 128, got {factor}")
        self.encoder = encoder
        self.factor = factor
        self.num_features = encoder.num_features

    def forward(self, x: torch.Tensor) -> Any:
        """(B, 1, 128, T) → the encoder's output on (B, 1, 128 / factor, T)."""
        pooled = torch.nn.functional.avg_pool2d(x, (self.factor, 1))  # (B, 1, F', T)
        return self.encoder(pooled)


Built = tuple[nn.Module, int, int | None]


def _passt(cfg: AudioEncoderConfig) -> Built:
    from audiorepro.models.passt import passt

    overrides: dict[str, Any] = {"img_size": (128, cfg.snippet_frames), "num_classes": 0}
    if cfg.s_patchout_t is not None:
        overrides["s_patchout_t"] = cfg.s_patchout_t
    if cfg.s_patchout_f is not None:
        overrides["s_patchout_f"] = cfg.s_patchout_f
    model = passt(cfg.passt_variant, **overrides)
    return model, int(model.num_features), cfg.snippet_frames


def _cnn(make_name: str) -> Callable[[AudioEncoderConfig], Built]:
    def build(cfg: AudioEncoderConfig) -> Built:
        from audiorepro.models import panns

        make = getattr(panns, make_name)
        model = make(
            mel_bins=cfg.cnn_mel_bins, classes_num=0, base_channels=cfg.cnn_base_channels
        ).use_channels_last()
        if cfg.cnn_mel_bins != 128:
            model = MelBinPool(model, 128 // cfg.cnn_mel_bins)
        return model, int(model.num_features), None

    return build


def _atst(cfg: AudioEncoderConfig) -> Built:
    from audiorepro.models.atst import atst

    frames = cfg.snippet_frames
    model = atst(cfg.atst_variant, spec_w=frames + 1, freq_warp=cfg.atst_freq_warp)
    return model, int(model.num_features), int(model.snippet_frames)


def _mobilenet(cfg: AudioEncoderConfig) -> Built:
    from audiorepro.models.mobilenet import mobilenet

    model = mobilenet(cfg.mobilenet_variant).use_channels_last()
    return model, int(model.num_features), None


AUDIO_ENCODERS: dict[str, Callable[[AudioEncoderConfig], Built]] = {
    "passt": _passt,
    "cnn14": _cnn("cnn14"),
    "cnn10": _cnn("cnn10"),
    # Chapter 02 (paper (b) §4.2): ATST-Frame (64 bands at 16 kHz) and MobileNetV3.
    "atst": _atst,
    "mobilenet": _mobilenet,
}
"""Encoder family → ``build(cfg) -> (module, feature size, snippet frames or None)``."""


def build_audio_encoder(cfg: AudioEncoderConfig) -> Built:
    """The audio encoder of ``cfg``: ``(module, feature size, snippet frames or None)``.

    PaSST gets a time encoding of ``snippet_s`` and embeds snippets; the CNNs take the whole
    (up to 30 s) input at once, as in paper (a) Table 3. ATST-Frame (chapter 02) gets a time
    encoding of ``snippet_s`` too (10 s in paper (b)) and the same snippet averaging; MobileNet
    takes any length, each clip on its own real frames.

    With ``cfg.audio_pretrained`` the file is found first (a missing one fails before the
    build), the encoder is built with its random initialisation (so the global RNG advances as
    without weights), then the file's weights replace it (:func:`load_audio_pretrained`).
    """
    if cfg.audio_encoder not in AUDIO_ENCODERS:
        raise ValueError(
            f"unknown audio encoder {cfg.audio_encoder!r}; known: {sorted(AUDIO_ENCODERS)}"
        )
    path = resolve_audio_pretrained(cfg)
    module, dim, snippet_frames = AUDIO_ENCODERS[cfg.audio_encoder](cfg)
    if path is not None:
        load_audio_pretrained(module, cfg, path)
    return module, dim, snippet_frames


# ---------------------------------------------------------------------------------------------
# released checkpoints


@dataclasses.dataclass(frozen=True)
class ReleasedCheckpoint:
    """A released AudioSet checkpoint: its published file name (what ``"audioset"`` looks for in
    :func:`~audiorepro.paths.checkpoints_dir`), where to download it, and what it is."""

    file_name: str
    url: str
    note: str


_PASST = "https://github.com/kkoutini/PaSST/releases/download/"
_PANNS = "https://zenodo.org/record/3987831/files/"
_EFFICIENTAT = "https://github.com/fschmid56/EfficientAT/releases/download/v0.0.1/"


def _efficientat(file_name: str, note: str) -> ReleasedCheckpoint:
    return ReleasedCheckpoint(file_name, _EFFICIENTAT + file_name, note)


RELEASED_CHECKPOINTS: dict[str, dict[str, ReleasedCheckpoint]] = {
    # Paper (a) Table 2; the files salsa's get_passt loads (kkoutini/PaSST default_cfgs).
    "passt": {
        "n": ReleasedCheckpoint(
            "passt-s-f128-p16-s16-ap.468.pt",
            _PASST + "v0.0.2-audioset/passt-s-f128-p16-s16-ap.468.pt",
            "PaSST-N (passt_s_p16_s16_128_ap468), AudioSet mAP .468; paper (a)'s and (b)'s",
        ),
        "s": ReleasedCheckpoint(
            "passt-s-kd-ap.486.pt",
            _PASST + "v.0.0.9/passt-s-kd-ap.486.pt",
            "PaSST-S (passt_s_kd_p16_128_ap486), AudioSet mAP .486 (paper (a) Table 2: 48.6)",
        ),
        "l": ReleasedCheckpoint(
            "passt-l-kd-ap.47.pt",
            _PASST + "v.0.0.10/passt-l-kd-ap.47.pt",
            "PaSST-L, 7 blocks (passt_l_kd_p16_128_ap47)",
        ),
        "s20": ReleasedCheckpoint(
            "passt-s-f128-20sec-p16-s10-ap.474-swa.pt",
            _PASST + "v0.0.5/passt-s-f128-20sec-p16-s10-ap.474-swa.pt",
            "PaSST-S20, 20 s time encoding, AudioSet mAP .474 (paper (a) §3.4)",
        ),
    },
    # PANNs (Kong et al. 2020), 64 bands at full width; the Zenodo record of the PANNs README.
    "cnn14": {
        "base64-mel64": ReleasedCheckpoint(
            "Cnn14_mAP=0.431.pth",
            _PANNS + "Cnn14_mAP%3D0.431.pth?download=1",
            "PANNs CNN14, AudioSet mAP .431; trained on torchlibrosa's 64-band log-mel",
        )
    },
    "cnn10": {
        "base64-mel64": ReleasedCheckpoint(
            "Cnn10_mAP=0.380.pth",
            _PANNS + "Cnn10_mAP%3D0.380.pth?download=1",
            "PANNs CNN10, AudioSet mAP .380; trained on torchlibrosa's 64-band log-mel",
        )
    },
    # Paper (b) §4.2.2 and footnote 4: atst_as2M.ckpt, ATST-Frame fine-tuned on AudioSet's weak
    # labels, a Google Drive link in the ATST-SED README (step 2).
    "atst": {
        "base": ReleasedCheckpoint(
            "atst_as2M.ckpt",
            "https://github.com/Audio-WestlakeU/ATST-SED (README, step 2: a Google Drive link)",
            "ATST-Frame base fine-tuned on AudioSet-2M, AudioSet mAP .480 (paper (b) §4.2.2); "
            "the self-supervised atstframe_base.ckpt (Audio-WestlakeU/audiossl, "
            "methods/atstframe README) loads as a file path",
        )
    },
    # EfficientAT v0.0.1 (models/mn/model.py pretrained_models), by the model ids it uses.
    "mobilenet": {
        "mn40_as_ext": _efficientat(
            "mn40_as_ext_mAP_487.pt", "MN width 4.0, extended training, mAP .487 (paper (b))"
        ),
        "mn40_as": _efficientat("mn40_as_mAP_484.pt", "MN width 4.0, AudioSet mAP .484"),
        "mn30_as": _efficientat("mn30_as_mAP_482.pt", "MN width 3.0, AudioSet mAP .482"),
        "mn20_as": _efficientat("mn20_as_mAP_478.pt", "MN width 2.0, AudioSet mAP .478"),
        "mn10_as": _efficientat("mn10_as_mAP_471.pt", "MN width 1.0, AudioSet mAP .471"),
        "mn04_as": _efficientat("mn04_as_mAP_432.pt", "MN width 0.4, AudioSet mAP .432"),
        "mn01_as": _efficientat("mn01_as_mAP_298.pt", "MN width 0.1, AudioSet mAP .298"),
    },
}
"""Encoder family → variant (:func:`encoder_variant`) → its released AudioSet checkpoint."""


def encoder_variant(cfg: AudioEncoderConfig) -> str:
    """The variant of ``cfg``'s family that :data:`RELEASED_CHECKPOINTS` is keyed by:
    ``passt_variant``, ``atst_variant``, ``mobilenet_variant`` (a model id such as
    ``mn40_as_ext``), and for the CNNs ``base<cnn_base_channels>-mel<cnn_mel_bins>``."""
    family = cfg.audio_encoder
    if family == "passt":
        return cfg.passt_variant
    if family == "atst":
        return cfg.atst_variant
    if family == "mobilenet":
        return cfg.mobilenet_variant
    return f"base{cfg.cnn_base_channels}-mel{cfg.cnn_mel_bins}"


def released_checkpoint(cfg: AudioEncoderConfig) -> ReleasedCheckpoint:
    """The released AudioSet checkpoint of ``cfg``'s encoder family and variant.

    Raises:
        ConfigError: the variant has no release (e.g. the CPU configurations ``tiny``,
            ``small``); the message lists the variants that have one.
    """
    released = RELEASED_CHECKPOINTS.get(cfg.audio_encoder, {})
    variant = encoder_variant(cfg)
    if variant not in released:
        raise ConfigError(
            f"audio_pretrained={AUDIOSET!r}: {cfg.audio_encoder} {variant!r} has no released "
            f"AudioSet checkpoint; variants with one: {', '.join(released) or 'none'}"
        )
    return released[variant]


def resolve_audio_pretrained(cfg: AudioEncoderConfig) -> Path | None:
    """The file ``cfg.audio_pretrained`` names: ``None`` for random weights; for
    ``"audioset"`` the released file (:func:`released_checkpoint`) in
    :func:`~audiorepro.paths.checkpoints_dir`; otherwise the path itself (``~`` expanded,
    relative to the working directory).

    Raises:
        ConfigError: ``"stage0"`` (the experiments layer replaces it by a file before
            building), or ``"audioset"`` for a variant without a release.
        CheckpointError: the file does not exist; for a released one the message says where
            to download it and where to put it.
    """
    value = cfg.audio_pretrained
    if value is None:
        return None
    encoder = f"{cfg.audio_encoder} {encoder_variant(cfg)!r}"
    if value == STAGE0:
        raise ConfigError(
            f"audio_pretrained={STAGE0!r} for {encoder}: the experiments layer must replace it "
            "by the checkpoint file of its stage-0 tagging run before building the model"
        )
    if value == AUDIOSET:
        release = released_checkpoint(cfg)
        folder = checkpoints_dir()
        path = folder / release.file_name
        if not path.is_file():
            raise CheckpointError(
                f"released AudioSet checkpoint {release.file_name} of {encoder} not found in "
                f"{folder}: download it from {release.url} and put it, under that name, in "
                "$AUDIOREPRO_CHECKPOINTS (default: <data dir>/checkpoints)"
            )
        return path
    path = Path(value).expanduser().absolute()
    if not path.is_file():
        raise CheckpointError(f"audio_pretrained checkpoint {path} of {encoder} does not exist")
    return path


def _unwrap(module: nn.Module) -> nn.Module:
    return module.encoder if isinstance(module, MelBinPool) else module


def load_audio_pretrained(
    module: nn.Module, cfg: AudioEncoderConfig, path: str | PathLike
) -> nn.Module:
    """Load a released (or :func:`save_released_layout`) checkpoint into the encoder that
    :func:`build_audio_encoder` built for ``cfg``, in place, strictly for the body.

    The class projection is not part of the encoder: the file's is ignored whatever its size
    and the module keeps its own (PaSST ``head.1`` / ``head_dist``, none at ``num_classes=0``,
    while the LayerNorm ``head.0`` loads; PANNs ``fc_audioset``; MobileNet ``classifier.5``,
    while its hidden layer ``classifier.2`` loads; ATST-Frame ``head``). The PANNs front end in
    the released files is dropped. A time encoding longer than the module's (PaSST, ATST-Frame
    snippets under the file's 10 s) keeps its first positions, which is what the forward pass
    uses for shorter inputs anyway.

    Raises:
        CheckpointError: unreadable file, or any other missing, unexpected or mismatched key
            (all of them listed), prefixed with the encoder.
    """
    from audiorepro.models.atst import load_atst_checkpoint
    from audiorepro.models.mobilenet import load_mobilenet_checkpoint
    from audiorepro.models.panns import load_panns_checkpoint
    from audiorepro.models.passt import load_passt_checkpoint

    model = _unwrap(module)
    family = cfg.audio_encoder
    try:
        if family == "passt":
            load_passt_checkpoint(model, path, cut_time_pos_embed=True, drop_head=True)
        elif family in ("cnn14", "cnn10"):
            load_panns_checkpoint(model, path, drop_head=True)
        elif family == "atst":
            load_atst_checkpoint(model, path, drop_head=True, cut_pos_embed=True)
        elif family == "mobilenet":
            load_mobilenet_checkpoint(model, path, drop_head=True)
        else:
            raise ValueError(f"no checkpoint loader for audio encoder {family!r}")
    except CheckpointError as err:
        raise CheckpointError(f"{family} {encoder_variant(cfg)!r}: {err}") from err
    return module


def _head_tensors(head: nn.Linear, prefix: str, in_features: int, where: str) -> dict:
    if head.in_features != in_features:
        raise ValueError(
            f"the head for {where} must take {in_features} inputs, got {head.in_features}"
        )
    tensors = {f"{prefix}weight": head.weight}
    if head.bias is not None:
        tensors[f"{prefix}bias"] = head.bias
    return tensors


def released_head_inputs(encoder: nn.Module, cfg: AudioEncoderConfig) -> int:
    """How many inputs the class projection of ``cfg``'s released file takes (the ``head`` of
    :func:`save_released_layout`): MobileNet's hidden layer ``classifier.2`` width, else the
    encoder's ``num_features``."""
    model = _unwrap(encoder)
    if cfg.audio_encoder == "mobilenet":
        return int(model.classifier[2].out_features)
    return int(model.num_features)


def _save_reproducibly(obj: Any, path: Path) -> None:
    """``torch.save`` through a file handle: the archive inside is then always named
    ``archive``, not after the (temporary, random) file name, so the same weights give the same
    bytes, and a run that starts from them the same content-hash key
    (:func:`~audiorepro.experiments.retrieval.stage0.pretrained_key`)."""
    with open(path, "wb") as f:
        torch.save(obj, f)


def save_released_layout(
    encoder: nn.Module,
    cfg: AudioEncoderConfig,
    path: str | PathLike,
    head: nn.Linear | None = None,
) -> Path:
    """Write ``encoder`` (built for ``cfg``) in its family's released file layout, so that an
    embedded-scale tagging run ("stage 0") gives a file that loads as a release does.

    Layouts: PaSST a plain state dict (``head`` as ``head.1`` and, for the distilled models,
    as ``head_dist`` too); PANNs ``{"model": state}`` (``head`` as ``fc_audioset``); ATST-Frame
    a Lightning ``{"state_dict": {"model.teacher.encoder.<key>": ...}}`` with ``norm_frame``
    as ``norm`` (the inverse of :func:`~audiorepro.models.atst.atst_state_dict_from_checkpoint`;
    ``head`` as ``head``, which that renaming drops); MobileNet a plain state dict (``head`` as
    the class projection ``classifier.5``).

    Args:
        encoder: the module :func:`build_audio_encoder` returned (``MelBinPool`` is unwrapped).
        cfg: its configuration (the family).
        path: the file to write (atomically: a crash leaves any old file as it was).
        head: the tagging run's class projection, stored where the release has its own. Its
            input is what the release's projection takes: PaSST the ``head.0`` LayerNorm of
            the features (the first output of a ``num_classes=0`` PaSST), PANNs the ReLU of
            ``fc1`` (the features in eval mode), ATST-Frame the features, MobileNet the
            hidden layer ``classifier.2`` (its ``out_features`` wide). ``None`` stores the
            encoder's own head, if it has one.

    Returns:
        ``path``.

    Raises:
        ValueError: ``head`` takes another input size than that.
    """
    model = _unwrap(encoder)
    family = cfg.audio_encoder
    state = dict(model.state_dict())
    width = int(model.num_features)
    obj: Any
    if family == "passt":
        if head is not None:
            state |= _head_tensors(head, "head.1.", width, "PaSST")
            if model.dist_token is not None:
                state |= _head_tensors(head, "head_dist.", width, "PaSST")
        obj = state
    elif family in ("cnn14", "cnn10"):
        if head is not None:
            state |= _head_tensors(head, "fc_audioset.", width, "PANNs")
        obj = {"model": state}
    elif family == "atst":
        if head is not None:
            state |= _head_tensors(head, "head.", width, "ATST-Frame")
        renamed = {}
        for key, value in state.items():
            if key.startswith("norm_frame."):
                key = "model.teacher.encoder.norm." + key[len("norm_frame.") :]
            elif not key.startswith("head."):
                key = "model.teacher.encoder." + key
            renamed[key] = value
        obj = {"state_dict": renamed}
    elif family == "mobilenet":
        if head is not None:
            hidden = released_head_inputs(model, cfg)
            state |= _head_tensors(head, "classifier.5.", hidden, "MobileNet (classifier.2)")
        obj = state
    else:
        raise ValueError(f"no released layout for audio encoder {family!r}")
    obj = _detached(obj)
    path = Path(path)
    atomic_write(path, lambda tmp: _save_reproducibly(obj, tmp))
    return path


def _detached(obj: Any) -> Any:
    """Tensors on the CPU, contiguous, without autograd history, in the same nesting."""
    if isinstance(obj, dict):
        return {k: _detached(v) for k, v in obj.items()}
    return obj.detach().to("cpu").contiguous()
