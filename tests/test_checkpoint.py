"""Checkpoint format: pickle-free round trips, tied weights, validation errors, atomic writes."""

from __future__ import annotations

import json
import math
import pickle
import random

import numpy as np
import pytest
import torch
from safetensors import safe_open
from torch import nn

from audiorepro.training import checkpoint as ckpt
from audiorepro.training.checkpoint import (
    CheckpointError,
    capture_rng_state,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_model_weights,
    pack_tree,
    restore_rng_state,
    save_checkpoint,
    save_model_weights,
    unpack_tree,
)
from audiorepro.training.schedules import make_scheduler


class TiedLM(nn.Module):
    """Embedding and output layer sharing one matrix, plus a buffer."""

    def __init__(self, vocab: int = 11, dim: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.hidden = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, vocab, bias=False)
        self.out.weight = self.embed.weight
        self.register_buffer("scale", torch.tensor([2.0, 3.0]))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(self.embed(tokens))))


def _trained(model: nn.Module, steps: int = 3):
    """An AdamW + cosine scheduler pair after a few real steps, so every state is non-trivial."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = make_scheduler(optimizer, "cosine", warmup_steps=2, total_steps=10)
    tokens = torch.arange(6) % 11
    for _ in range(steps):
        loss = model(tokens).logsumexp(-1).mean()
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    return optimizer, scheduler


def _assert_tree_equal(a, b) -> None:
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_tree_equal(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_tree_equal(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def test_pack_tree_round_trips_exact_types_through_json():
    tree = {
        "ints": {0: "zero", 3: (1, 2.5, None)},
        "tensor": torch.arange(6, dtype=torch.int64).reshape(2, 3),
        "scalar": torch.tensor(1.5),
        "array": np.arange(5, dtype=np.uint32),
        "nested": [{"__tensor__": "not a reference"}, float("nan"), float("inf"), True],
        "rng": random.getstate(),
    }
    packed, tensors = pack_tree(tree)
    text = json.dumps(packed)  # the JSON half must be plain JSON
    assert len(tensors) == 2
    rebuilt = unpack_tree(json.loads(text), tensors)
    expected = dict(tree, nested=[{"__tensor__": "not a reference"}, math.nan, math.inf, True])
    _assert_tree_equal(expected, rebuilt)


def test_pack_tree_names_the_path_of_unsupported_values():
    with pytest.raises(CheckpointError, match=r"cannot store object at /a/1"):
        pack_tree({"a": [1, object()]})


def test_rng_state_round_trip_restores_every_stream(tmp_path):
    gen = torch.Generator().manual_seed(5)
    state = capture_rng_state({"order": gen})
    ckpt.save_tree(tmp_path, "rng", state)
    first = (random.random(), np.random.rand(), torch.rand(3), torch.rand(2, generator=gen))
    restore_rng_state(ckpt.load_tree(tmp_path, "rng"), {"order": gen})
    second = (random.random(), np.random.rand(), torch.rand(3), torch.rand(2, generator=gen))
    assert first[:2] == second[:2]
    assert torch.equal(first[2], second[2]) and torch.equal(first[3], second[3])
    with pytest.raises(CheckpointError, match="other"):
        restore_rng_state(state, {"other": torch.Generator()})


def test_tied_weights_stored_once_and_restored_tied(tmp_path):
    torch.manual_seed(0)
    model = TiedLM()
    path = tmp_path / "model.safetensors"
    save_model_weights(model, path)
    with safe_open(str(path), framework="pt") as handle:
        keys = set(handle.keys())
    assert ("embed.weight" in keys) != ("out.weight" in keys)  # one copy of the tied matrix
    assert "scale" in keys

    torch.manual_seed(1)
    fresh = TiedLM()
    load_model_weights(fresh, path)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, fresh.state_dict()[name]), name
    assert fresh.out.weight.data_ptr() == fresh.embed.weight.data_ptr()


def test_mismatched_model_error_lists_every_key(tmp_path):
    source = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    path = tmp_path / "model.safetensors"
    save_model_weights(source, path)
    # Layer 1 is wider (shape mismatch), layer 2 is new (missing), layer 1's bias is gone
    # (unexpected).
    target = nn.Sequential(nn.Linear(3, 5), nn.Linear(4, 2, bias=False), nn.Linear(2, 2))
    with pytest.raises(CheckpointError) as info:
        load_model_weights(target, path)
    message = str(info.value)
    assert str(path) in message
    assert "missing" in message and "2.weight" in message and "2.bias" in message
    assert "unexpected" in message and "1.bias" in message
    assert "0.weight: checkpoint (4, 3) vs model (5, 3)" in message
    assert "0.bias: checkpoint (4,) vs model (5,)" in message
    assert "1.weight" not in message  # it fits


def test_full_checkpoint_round_trip_continues_identically(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = TiedLM()
    optimizer, scheduler = _trained(model)
    extra = {"position": {"step": 3, "epoch": 0}, "rng": capture_rng_state()}
    path = save_checkpoint(
        tmp_path, 3, model=model, optimizer=optimizer, scheduler=scheduler, components=extra
    )
    assert path.name == "step_00000003"
    assert {p.suffix for p in path.iterdir()} == {".json", ".safetensors"}

    # Loading must not unpickle anything.
    def refuse(*args, **kwargs):
        raise AssertionError("unpickling during load_checkpoint")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    torch.manual_seed(9)
    model2 = TiedLM()
    optimizer2 = torch.optim.AdamW(model2.parameters(), lr=0.1)
    scheduler2 = make_scheduler(optimizer2, "cosine", warmup_steps=2, total_steps=10)
    loaded = load_checkpoint(path, model=model2, optimizer=optimizer2, scheduler=scheduler2)
    monkeypatch.undo()
    assert loaded.step == 3 and loaded.components["position"] == {"step": 3, "epoch": 0}
    _assert_tree_equal(optimizer.state_dict(), optimizer2.state_dict())
    assert scheduler.state_dict() == scheduler2.state_dict()

    # One more identical step from both gives identical parameters.
    for m, o, s in [(model, optimizer, scheduler), (model2, optimizer2, scheduler2)]:
        m(torch.arange(4)).logsumexp(-1).mean().backward()
        o.step()
        s.step()
    for (n1, t1), (n2, t2) in zip(
        model.state_dict().items(), model2.state_dict().items(), strict=True
    ):
        assert n1 == n2 and torch.equal(t1, t2), n1


def test_keep_prunes_old_checkpoints_and_latest_points_at_newest(tmp_path):
    model = nn.Linear(2, 2)
    for step in (2, 4, 6, 8):
        save_checkpoint(tmp_path, step, model=model, keep=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000006", "step_00000008"]
    assert (tmp_path / "latest").read_text().strip() == "step_00000008"
    assert latest_checkpoint(tmp_path) == tmp_path / "step_00000008"
    # Re-saving an existing step replaces it.
    save_checkpoint(tmp_path, 8, model=model, keep=2)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []


def test_interrupted_write_publishes_nothing(tmp_path, monkeypatch):
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    save_checkpoint(tmp_path, 1, model=model, optimizer=optimizer)
    real_save_tree = ckpt.save_tree

    def failing_save_tree(directory, name, tree):
        files = real_save_tree(directory, name, tree)
        if name == "optimizer":  # model and optimizer files are on disk by now
            raise KeyboardInterrupt
        return files

    monkeypatch.setattr(ckpt, "save_tree", failing_save_tree)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, 2, model=model, optimizer=optimizer)
    monkeypatch.undo()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["latest", "step_00000001"]
    assert latest_checkpoint(tmp_path).name == "step_00000001"


def test_leftovers_of_killed_writes_are_ignored_then_cleaned(tmp_path):
    model = nn.Linear(2, 2)
    save_checkpoint(tmp_path, 5, model=model)
    # A process killed mid-write leaves a temporary directory; a step directory without a
    # manifest (copied by hand, say) is not complete either.
    (tmp_path / ".tmp-step_00000009-abc").mkdir()
    (tmp_path / ".tmp-step_00000009-abc" / "model.safetensors").write_bytes(b"partial")
    (tmp_path / "step_00000007").mkdir()
    (tmp_path / "step_00000007" / "model.safetensors").write_bytes(b"partial")
    assert latest_checkpoint(tmp_path).name == "step_00000005"
    with pytest.raises(CheckpointError, match="incomplete"):
        load_checkpoint(tmp_path / "step_00000007", model=model)
    save_checkpoint(tmp_path, 6, model=model)
    assert not (tmp_path / ".tmp-step_00000009-abc").exists()


def test_truncated_or_newer_checkpoints_are_refused(tmp_path):
    model = nn.Linear(2, 2)
    path = save_checkpoint(tmp_path, 1, model=model)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4])
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(path, model=model)
    path = save_checkpoint(tmp_path, 2, model=model)
    manifest = json.loads((path / "checkpoint.json").read_text())
    (path / "checkpoint.json").write_text(json.dumps(dict(manifest, format_version=99)))
    with pytest.raises(CheckpointError, match="format_version 99"):
        load_checkpoint(path, model=model)
    with pytest.raises(CheckpointError, match="no optimizer"):
        load_checkpoint(
            save_checkpoint(tmp_path, 3, model=model),
            optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
        )


def test_optimizer_that_does_not_fit_is_a_checkpoint_error(tmp_path):
    model = nn.Linear(2, 2)
    path = save_checkpoint(
        tmp_path, 1, model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1)
    )
    other = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    with pytest.raises(CheckpointError, match="optimizer"):
        load_checkpoint(path, optimizer=torch.optim.SGD(other.parameters(), lr=0.1))


def test_flipped_bytes_of_the_same_size_are_caught_by_the_manifest_hash(tmp_path):
    model = nn.Linear(4, 4)
    first = save_checkpoint(tmp_path, 1, model=model)
    path = save_checkpoint(tmp_path, 2, model=model)
    weights = path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-8:] = bytes(255 - b for b in data[-8:])  # inside the last tensor: same size
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, model=nn.Linear(4, 4))
    message = str(info.value)
    assert str(weights) in message and "contents differ from the SHA-256" in message
    assert "fall back to: step_00000001" in message
    load_checkpoint(first, model=nn.Linear(4, 4))  # the earlier one still loads


def test_a_damaged_safetensors_header_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "w.safetensors"
    save_model_weights(nn.Linear(2, 2), path)
    data = bytearray(path.read_bytes())
    data[8:16] = b"{{{{{{{{"  # the JSON header starts after its 8-byte length
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=rf"{path}: not a readable safetensors file"):
        load_model_weights(nn.Linear(2, 2), path)


def test_weights_saved_without_some_names_load_only_where_those_are_frozen(tmp_path):
    path = tmp_path / "w.safetensors"
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    with pytest.raises(KeyError, match=r"cannot exclude \['2.weight'\]"):
        save_model_weights(model, path, exclude=["2.weight"])
    save_model_weights(model, path, exclude=["0.weight", "0.bias"])
    target = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    with pytest.raises(CheckpointError, match="2 missing key"):
        load_model_weights(target, path)  # nothing declared omitted: strict
    with pytest.raises(CheckpointError, match=r"left out 2 weight\(s\) as frozen"):
        load_model_weights(target, path, omitted=["0.weight", "0.bias"])  # target trains them
    target[0].requires_grad_(False)
    before = target[0].weight.detach().clone()
    load_model_weights(target, path, omitted=["0.weight", "0.bias"])
    assert torch.equal(target[0].weight, before)  # kept its own frozen values
    assert torch.equal(target[1].weight, model[1].weight)
