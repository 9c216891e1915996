"""Tests for audio I/O: bad files give clear errors; downmixing, resampling, atomic saving."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import soundfile as sf

from audiorepro.features import AudioError, audio_info, load_audio, resample_type, save_audio
from audiorepro.features import audio as audio_module
from audiorepro.features.audio import EmptyAudioError


def sine(freq, seconds, sr, amp=0.5):
    t = np.arange(int(round(seconds * sr))) / sr
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def peak_hz(wav, sr):
    spectrum = np.abs(np.fft.rfft(wav * np.hanning(len(wav))))
    return np.argmax(spectrum) * sr / len(wav)


# ---------------------------------------------------------------------------------------------
# bad files


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.wav"
    for call in (lambda: load_audio(path, 16000), lambda: audio_info(path)):
        with pytest.raises(AudioError, match=r"nowhere\.wav: file not found"):
            call()


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(AudioError, match="not a regular file"):
        load_audio(tmp_path, None)


@pytest.mark.parametrize(
    "payload",
    [
        b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 7,  # a WAV header cut off mid-chunk
        np.random.default_rng(0).bytes(2000),  # random bytes
    ],
)
def test_corrupt_bytes(tmp_path, payload):
    path = tmp_path / "broken.wav"
    path.write_bytes(payload)
    with pytest.raises(AudioError, match=r"broken\.wav: cannot decode audio") as err:
        load_audio(path, 16000)
    assert "soundfile" in str(err.value) and "audioread" in str(err.value)
    with pytest.raises(AudioError, match=r"broken\.wav: cannot read audio header"):
        audio_info(path)


def test_zero_length_audio(tmp_path):
    path = tmp_path / "empty.wav"
    sf.write(path, np.zeros(0, dtype=np.float32), 16000, subtype="PCM_16")
    assert sf.info(path).frames == 0  # a valid WAV header with no samples
    with pytest.raises(AudioError, match=r"empty\.wav: empty audio \(the file contains zero"):
        load_audio(path, 16000)
    with pytest.raises(AudioError, match=r"empty\.wav: empty audio"):
        audio_info(path)
    path.write_bytes(b"")  # no header at all: libsndfile says "Format not recognised."
    for read in (lambda p: load_audio(p, 16000), audio_info):
        with pytest.raises(EmptyAudioError, match=r"empty\.wav: empty file \(0 bytes\)"):
            read(path)


def _data_size(path, size):
    """Write ``size`` as the WAV's data chunk length, as a program writing to a pipe does."""
    import struct

    raw = bytearray(path.read_bytes())
    at = raw.find(b"data")
    raw[at + 4 : at + 8] = struct.pack("<I", size)
    path.write_bytes(bytes(raw))


def test_a_wav_cut_short_is_read_as_far_as_it_goes_with_a_warning(tmp_path):
    import warnings

    from audiorepro.features.audio import AudioWarning

    wav = sine(440, 2.0, 8000)
    whole = tmp_path / "whole.wav"
    sf.write(whole, wav, 8000, subtype="PCM_16")
    cut = tmp_path / "cut.wav"
    cut.write_bytes(whole.read_bytes()[: 44 + 2 * 6000])  # 0.75 s of the 2 s the header says
    with pytest.warns(AudioWarning, match=r"cut\.wav: cut short: its header says 2\.000 s .*"
                      r"holds 0\.750 s .*are read"):  # fmt: skip
        got, sr = load_audio(cut, None)
    assert sr == 8000 and len(got) == 6000
    np.testing.assert_allclose(got, wav[:6000], atol=1 / 32768)
    stream = tmp_path / "stream.wav"  # ffmpeg to a pipe: 0xFFFFFFFF, the length unknown
    stream.write_bytes(whole.read_bytes())
    _data_size(stream, 0xFFFFFFFF)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_audio(whole, None)[0]) == len(load_audio(stream, None)[0]) == 16000
    _data_size(stream, 0)  # a header never finished: libsndfile reads no sample
    with pytest.raises(EmptyAudioError, match=r"stream\.wav: its WAV header gives 0 bytes of "
                       r"samples, and the file is 32044 bytes: .*did not finish the header"):  # fmt: skip
        load_audio(stream, None)


def test_a_constant_offset_and_no_signal_is_silent_and_speech_over_an_offset_is_not(tmp_path):
    """Silence is judged around each channel's mean: a file of pure DC (a disconnected USB
    microphone's offset, at -26 dBFS) passed the peak rule and was read as a word."""
    dc = tmp_path / "dc.wav"
    sf.write(dc, np.full(16000, 0.05), 16000, subtype="PCM_16")
    with pytest.raises(AudioError, match=r"dc\.wav: silent: a constant offset \(DC 0\.05\) and "
                       r"no signal, so the file would read as silence; leave it out"):  # fmt: skip
        load_audio(dc, 16000)
    hum = tmp_path / "hum.wav"  # the offset with a trace of noise far below -70 dBFS around it
    noise = 1e-5 * np.random.default_rng(0).standard_normal(16000)
    sf.write(hum, -0.2 + noise, 16000, subtype="FLOAT")
    with pytest.raises(AudioError, match=r"hum\.wav: silent: a constant offset \(DC -0\.2\) and "
                       r"no signal \(peak -\d+ dBFS around it, below -70 dBFS\)"):  # fmt: skip
        load_audio(hum, None)
    stereo = tmp_path / "stereo.wav"  # offsets of opposite sign: no signal in either channel
    sf.write(stereo, np.stack([np.full(8000, 0.05), np.full(8000, -0.1)], axis=1), 8000)
    with pytest.raises(AudioError, match=r"stereo\.wav: silent: a constant offset \(DC -0\.1\)"):
        load_audio(stereo, None)
    wav, _ = load_audio(stereo, None, mono=False)  # the channels as they are
    assert wav.shape == (2, 8000)
    speech = tmp_path / "speech.wav"  # a real recording: a tone at -26 dBFS over a 0.02 offset
    sf.write(speech, 0.02 + sine(440, 1.0, 16000, amp=0.05), 16000, subtype="PCM_16")
    got, _ = load_audio(speech, 16000)
    assert abs(got.mean() - 0.02) < 1e-3 and 400 < peak_hz(got - got.mean(), 16000) < 480


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_samples(tmp_path, bad):
    path = tmp_path / "nan.wav"
    wav = sine(440, 0.1, 16000)
    wav[123] = bad
    sf.write(path, wav, 16000, subtype="FLOAT")  # only float WAVs can store NaN/inf
    with pytest.raises(
        AudioError, match=r"nan\.wav: 1 non-finite sample value\(s\) \(NaN/inf\)"
    ) as e:
        load_audio(path, 16000)
    assert "at sample 123" in str(e.value)


def test_offset_past_the_end(tmp_path):
    path = tmp_path / "short.wav"
    sf.write(path, sine(440, 0.5, 16000), 16000)
    with pytest.raises(AudioError, match=r"short\.wav: no samples after offset 2\.0 s"):
        load_audio(path, 16000, offset=2.0)


def test_invalid_arguments(tmp_path):
    path = tmp_path / "ok.wav"
    sf.write(path, sine(440, 0.1, 16000), 16000)
    with pytest.raises(ValueError, match="sr must be a positive integer"):
        load_audio(path, 0)
    with pytest.raises(ValueError, match="offset"):
        load_audio(path, None, offset=-1.0)
    with pytest.raises(ValueError, match="duration"):
        load_audio(path, None, duration=0.0)


# ---------------------------------------------------------------------------------------------
# decoding, downmixing, resampling


def test_mono_wav_round_trip_and_info(tmp_path):
    path = tmp_path / "tone.wav"
    wav = sine(440, 0.25, 16000)
    save_audio(path, wav, 16000)
    assert audio_info(path) == (4000, 16000, 1)
    out, sr = load_audio(path, None)
    assert sr == 16000 and out.dtype == np.float32 and out.shape == (4000,)
    np.testing.assert_allclose(out, wav, atol=1.0 / 32768 + 1e-7)  # 16-bit quantisation


def test_a_failed_write_names_the_file_and_the_space_left(tmp_path, monkeypatch):
    """libsndfile reports a full disk as 'System error.' alone: the error names the file, that
    error and the free space, and leaves neither the file nor its temporary copy behind."""
    import shutil

    from audiorepro import paths
    from audiorepro.data.embedded import audio_caption
    from audiorepro.features import audio

    def full(*args, **kwargs):
        raise sf.LibsndfileError(2)

    monkeypatch.setattr(audio.sf, "write", full)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(paths.shutil, "disk_usage", lambda p: usage._replace(free=3_100_000))
    path = tmp_path / "out" / "tone.wav"
    with pytest.raises(
        AudioError,
        match=r"out/tone\.wav: could not write \(LibsndfileError: System error\.\); 3\.1 MB "
        r"free on that disk$",
    ):
        save_audio(path, sine(440, 0.1, 8000), 8000)
    assert list((tmp_path / "out").iterdir()) == []
    with pytest.raises(AudioError, match=r"clip\.flac: could not write .*; 3\.1 MB free"):
        audio_caption._write_flac(tmp_path / "clip.flac", sine(440, 0.1, 8000), 8000)


def test_stereo_is_downmixed(tmp_path):
    path = tmp_path / "stereo.wav"
    left, right = sine(300, 0.2, 8000), sine(1000, 0.2, 8000, amp=0.25)
    sf.write(path, np.stack([left, right], axis=1), 8000, subtype="FLOAT")
    assert audio_info(path) == (1600, 8000, 2)
    mono, sr = load_audio(path, None)
    assert sr == 8000 and mono.shape == (1600,)
    np.testing.assert_allclose(mono, (left + right) / 2, atol=1e-7)
    both, _ = load_audio(path, None, mono=False)
    assert both.shape == (2, 1600)
    np.testing.assert_allclose(both, np.stack([left, right]), atol=1e-7)


@pytest.mark.parametrize("res_type", ["soxr_hq", "polyphase"])
def test_resample_keeps_the_frequency(tmp_path, monkeypatch, res_type):
    monkeypatch.setattr(audio_module, "resample_type", lambda: res_type)
    path = tmp_path / "cd.wav"
    sf.write(path, sine(1000, 1.0, 44100), 44100, subtype="PCM_16")
    wav, sr = load_audio(path, 16000)
    assert sr == 16000 and wav.dtype == np.float32
    assert abs(len(wav) - 16000) <= 1
    assert peak_hz(wav, sr) == pytest.approx(1000, abs=2)  # 1 Hz bins
    assert np.abs(wav[1000:-1000]).max() == pytest.approx(0.5, abs=0.02)  # amplitude kept


def test_resample_type_depends_on_soxr(monkeypatch):
    assert resample_type() == "soxr_hq"  # soxr is a librosa dependency
    monkeypatch.setitem(sys.modules, "soxr", None)  # makes `import soxr` raise ImportError
    assert resample_type() == "polyphase"


def test_offset_and_duration(tmp_path):
    path = tmp_path / "ramp.wav"
    ramp = (np.arange(16000) / 16000 - 0.5).astype(np.float32)
    sf.write(path, ramp, 16000, subtype="FLOAT")
    part, _ = load_audio(path, None, offset=0.25, duration=0.5)
    np.testing.assert_array_equal(part, ramp[4000:12000])
    tail, _ = load_audio(path, None, offset=0.75, duration=10.0)
    np.testing.assert_array_equal(tail, ramp[12000:])


def test_librosa_fallback_for_formats_soundfile_cannot_read(tmp_path, monkeypatch):
    import librosa

    path = tmp_path / "clip.m4a"
    path.write_bytes(b"not something libsndfile knows")
    decoded = sine(440, 0.1, 22050)
    calls = []

    def fake_load(p, **kwargs):
        calls.append((p, kwargs))
        return np.stack([decoded, decoded]), 22050

    monkeypatch.setattr(librosa, "load", fake_load)
    wav, sr = load_audio(path, 16000)
    assert sr == 16000 and abs(len(wav) - 1600) <= 1
    assert calls[0][0] == str(path) and calls[0][1]["sr"] is None
    assert audio_info(path) == (2205, 22050, 2)


def test_a_gsm_wav_libsndfile_cannot_seek_in_is_read_in_blocks(tmp_path):
    """A GSM 6.10 WAV (Asterisk voicemail's format) is a file libsndfile decodes but cannot seek
    in: it stopped every reader with soundfile's 'frames must be specified for non-seekable
    files', naming no file. It is read in blocks to its end, offset and duration honoured, and
    audio_info gives the length load_audio reads."""
    path = tmp_path / "msg0000.wav"
    sf.write(path, sine(440, 2.0, 8000, amp=0.3), 8000, subtype="GSM610", format="WAV")
    with sf.SoundFile(path) as f:
        assert not f.seekable()
    whole, sr = load_audio(path, None)
    assert sr == 8000 and len(whole) == 16000
    assert 400 < peak_hz(whole, sr) < 480  # the tone, through the lossy codec
    assert audio_info(path) == (16000, 8000, 1)
    part, _ = load_audio(path, None, offset=0.5, duration=0.25)
    np.testing.assert_array_equal(part, whole[4000:6000])
    assert len(load_audio(path, None, offset=1.9)[0]) == 800
    assert len(load_audio(path, 16000)[0]) == 32000
    with pytest.raises(AudioError, match=r"msg0000\.wav: no samples after offset 2\.5 s"):
        load_audio(path, None, offset=2.5)


def test_any_other_failure_of_soundfile_names_the_file(tmp_path, monkeypatch):
    path = tmp_path / "odd.wav"
    sf.write(path, sine(440, 0.1, 8000), 8000)

    def fail(*args, **kwargs):
        raise ValueError("something libsndfile's wrapper did not expect")

    monkeypatch.setattr(sf, "SoundFile", fail)
    monkeypatch.setattr(sf, "info", fail)
    with pytest.raises(AudioError, match=r"odd\.wav: cannot decode audio: soundfile failed .*"
                       r"ValueError: something .*convert it"):  # fmt: skip
        load_audio(path, None)
    with pytest.raises(AudioError, match=r"odd\.wav: cannot read audio header: .*ValueError"):
        audio_info(path)


# ---------------------------------------------------------------------------------------------
# saving


def test_save_audio_is_16bit_pcm_and_clips(tmp_path):
    path = tmp_path / "sub" / "loud.wav"
    save_audio(path, np.array([0.0, 0.5, 2.0, -3.0], dtype=np.float32), 16000)
    info = sf.info(path)
    assert (info.format, info.subtype, info.samplerate) == ("WAV", "PCM_16", 16000)
    data, _ = sf.read(path, dtype="int16")
    np.testing.assert_array_equal(data, [0, 16384, 32767, -32768])


def test_save_audio_stereo_channels_first(tmp_path):
    path = tmp_path / "st.wav"
    wav = np.stack([sine(200, 0.1, 8000), -sine(200, 0.1, 8000)])
    save_audio(path, wav, 8000)
    assert audio_info(path) == (800, 8000, 2)


def test_save_audio_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "keep.wav"
    save_audio(path, sine(440, 0.1, 16000), 16000)
    before = path.read_bytes()

    def failing_write(file, *args, **kwargs):
        with open(file, "wb") as f:
            f.write(b"RIFF partial")
        raise OSError("disk full")

    monkeypatch.setattr(audio_module.sf, "write", failing_write)
    with pytest.raises(AudioError, match=r"keep\.wav: could not write \(OSError: disk full\)"):
        save_audio(path, sine(880, 0.1, 16000), 16000)
    assert path.read_bytes() == before  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.wav"]  # no temp file left


def test_save_audio_rejects_bad_input(tmp_path):
    path = tmp_path / "bad.wav"
    with pytest.raises(ValueError, match=r"bad\.wav: wav must hold finite"):
        save_audio(path, np.array([0.0, np.nan], dtype=np.float32), 16000)
    with pytest.raises(ValueError, match=r"bad\.wav: wav must have shape"):
        save_audio(path, np.zeros(0, dtype=np.float32), 16000)
    with pytest.raises(ValueError, match=r"bad\.wav: sr must be a positive integer"):
        save_audio(path, np.zeros(10, dtype=np.float32), 16000.0)
    assert not path.exists()
