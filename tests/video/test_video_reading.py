"""Video reading: frame sampling, decord vs PyAV, input forms, bad input.

References: the ramp clips' frame i is a flat gray of 8 * i, so a decoded frame names its own index
independently of our reader; PyAV's own sequential decode is the reference for a full read.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from PIL import Image

av = pytest.importorskip("av")
torch = pytest.importorskip("torch")

from rewardzoo.errors import InputError
from rewardzoo.shared import video as V

from .media import T_FRAMES, frame_index, ramp_frames, textured_frames

CLIPS = ["ramp_longgop.mp4", "ramp_gop12.mp4", "ramp_gop12.mkv"]


@pytest.mark.parametrize(
    "total,k",
    [(1, 1), (1, 8), (2, 1), (2, 2), (2, 8), (30, 8), (30, 16), (31, 8), (100, 7), (30, None), (16, 16), (17, 16)],
)
def test_sample_indices_uniform(total, k):
    idx = V.sample_indices(total, k)
    if k is None or k >= total:
        assert idx == list(range(total))
    elif k == 1:
        assert idx == [0]
    else:  # k - 1 gaps, as equal as integers allow, spanning first to last frame
        assert len(idx) == k and idx[0] == 0 and idx[-1] == total - 1
        gaps = np.diff(idx)
        assert gaps.min() >= 1 and gaps.max() - gaps.min() <= 1


def _pyav_all_frames(path):
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("backend", ["decord", "pyav"])
@pytest.mark.parametrize("k", [None, 1, 2, 8, T_FRAMES - 1, T_FRAMES, 100])
def test_read_returns_the_right_frames(media_dir, clip, backend, k):
    frames = V.read_video(media_dir / clip, k, backend=backend)
    expected = [i for i in range(T_FRAMES)] if k is None or k >= T_FRAMES else V.sample_indices(T_FRAMES, k)
    assert frames.dtype == np.uint8 and frames.shape[1:] == (64, 64, 3)
    assert [frame_index(f) for f in frames] == expected
    # the same pixels as PyAV's plain sequential decode of those frames
    reference = _pyav_all_frames(media_dir / clip)
    np.testing.assert_array_equal(frames, reference[expected])


def _every(step: int, k: int | None, total: int = T_FRAMES) -> list[int]:
    """Frames 0, step, 2 step, ... of ``total``, then k of those uniformly (what ``frame_step`` promises)."""
    kept = list(range(0, total, step))
    return kept if k is None else [kept[i] for i in V.sample_indices(len(kept), k)]


@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("backend", ["decord", "pyav"])
@pytest.mark.parametrize("step, k", [(2, None), (4, None), (7, None), (29, None), (40, None), (3, 4)])
def test_frame_step_reads_every_kth_frame(media_dir, clip, backend, step, k):
    frames = V.read_video(media_dir / clip, k, backend=backend, frame_step=step)
    expected = _every(step, k)
    assert [frame_index(f) for f in frames] == expected
    np.testing.assert_array_equal(frames, _pyav_all_frames(media_dir / clip)[expected])


@pytest.mark.parametrize("as_tensor", [False, True])
def test_frame_step_gives_the_same_frames_in_every_input_form(media_dir, as_tensor):
    path = media_dir / "textured.mp4"
    decoded = _pyav_all_frames(path)
    expected = decoded[_every(3, None, len(decoded))]
    for form, value in _forms(decoded, path).items():
        out = V.prepare_video(value, as_tensor=as_tensor, frame_step=3)
        if as_tensor:
            np.testing.assert_allclose(out.permute(0, 2, 3, 1).numpy() * 255, expected, atol=1e-3, err_msg=form)
        else:
            np.testing.assert_array_equal(np.stack([np.asarray(f) for f in out]), expected, err_msg=form)


def test_frame_step_must_be_a_positive_integer():
    from rewardzoo.rewards.base import Inputs

    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="frame_step"):
            Inputs(("video",), frame_step=bad)
    assert Inputs(("video",), frame_step=2).conversion_key("video") != Inputs(("video",)).conversion_key("video")


@pytest.mark.parametrize("clip", CLIPS + ["textured.mp4"])
@pytest.mark.parametrize("k", [None, 2, 5, 8])
def test_decord_and_pyav_agree(media_dir, clip, k):
    np.testing.assert_array_equal(
        V.read_video(media_dir / clip, k, backend="decord"), V.read_video(media_dir / clip, k, backend="pyav")
    )


@pytest.mark.parametrize("seek_cost", [0, 10**6])  # always seek (get_batch) / never seek (skip forward)
@pytest.mark.parametrize("clip", ["ramp_gop12.mp4", "ramp_longgop.mp4"])
def test_decord_both_reading_plans_give_the_right_frames(media_dir, monkeypatch, seek_cost, clip):
    monkeypatch.setattr(V, "_DECORD_SEEK_COST", seek_cost)
    for k in (2, 5, 8, 29):
        frames = V.read_video(media_dir / clip, k, backend="decord")
        assert [frame_index(f) for f in frames] == V.sample_indices(T_FRAMES, k)
        np.testing.assert_array_equal(frames, _pyav_all_frames(media_dir / clip)[V.sample_indices(T_FRAMES, k)])


def test_decord_seek_plan_counts_gop_changes():
    # keyframes every 12 frames; targets 0, 7 (same GOP), 13 (new GOP: seek), 14, 40 (new GOP: seek)
    assert V._decord_seek_plan([0, 12, 24, 36], [0, 7, 13, 14, 40]) == (1 + 7 + 2 + 1 + 5, 2)
    assert V._decord_seek_plan([0], [0, 10, 20]) == (21, 0)


def test_falls_back_to_pyav_when_decord_fails(media_dir, monkeypatch):
    def broken(path, num_frames):
        raise RuntimeError("decord cannot read this")

    monkeypatch.setattr(V, "_read_decord", broken)
    frames = V.read_video(media_dir / "ramp_gop12.mp4", 8)
    assert [frame_index(f) for f in frames] == V.sample_indices(T_FRAMES, 8)


def test_falls_back_to_pyav_when_decord_is_missing(media_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "decord", None)  # makes `import decord` raise ImportError
    frames = V.read_video(media_dir / "ramp_longgop.mp4", 4)
    assert [frame_index(f) for f in frames] == V.sample_indices(T_FRAMES, 4)
    with pytest.raises(InputError, match="decord is not installed"):
        V.read_video(media_dir / "ramp_longgop.mp4", 4, backend="decord")


def test_write_video_gop_sets_keyframe_spacing(media_dir):
    def keyframe_positions(path):
        with av.open(str(path)) as c:
            pts = sorted((p.pts, p.is_keyframe) for p in c.demux(video=0) if p.size)
        return [i for i, (_, key) in enumerate(pts) if key]

    assert keyframe_positions(media_dir / "ramp_longgop.mp4") == [0]
    keys = keyframe_positions(media_dir / "ramp_gop12.mp4")
    assert keys[0] == 0 and len(keys) >= 3 and max(np.diff(keys + [T_FRAMES])) <= 12


# ---------------------------------------------------------------------------------- input forms


def _forms(arr: np.ndarray, path):
    """The same video as a file, a PIL list, NumPy (T, H, W, C), a uint8 and a float tensor (T, C, H, W)."""
    t = torch.from_numpy(arr).permute(0, 3, 1, 2)
    return {
        "file": path,
        "pil": [Image.fromarray(f) for f in arr],
        "numpy": arr,
        "numpy_list": list(arr),
        "tensor_uint8": t,
        "tensor_float": t.float() / 255,
    }


@pytest.mark.parametrize("k", [None, 1, 2, 5])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_input_forms_give_the_same_frames(media_dir, k, as_tensor):
    path = media_dir / "textured.mp4"
    decoded = _pyav_all_frames(path)
    expected = decoded[V.sample_indices(len(decoded), k)]
    for form, value in _forms(decoded, path).items():
        out = V.prepare_video(value, as_tensor=as_tensor, num_frames=k)
        if as_tensor:
            assert out.dtype == torch.float32 and out.shape == (len(expected), 3, 48, 64), form
            np.testing.assert_allclose(out.permute(0, 2, 3, 1).numpy() * 255, expected, atol=1e-3, err_msg=form)
        else:
            assert all(isinstance(f, Image.Image) and f.mode == "RGB" for f in out), form
            np.testing.assert_array_equal(np.stack([np.asarray(f) for f in out]), expected, err_msg=form)


def test_float_tensor_keeps_precision_and_grayscale_is_repeated():
    x = torch.rand(4, 1, 8, 8)
    out = V.prepare_video(x, as_tensor=True)
    assert out.shape == (4, 3, 8, 8)
    torch.testing.assert_close(out, x.expand(-1, 3, -1, -1))
    gray = np.arange(4 * 8 * 8, dtype=np.uint8).reshape(4, 8, 8)  # (T, H, W)
    pil = V.prepare_video(gray)
    np.testing.assert_array_equal(np.asarray(pil[2])[..., 1], gray[2])


@pytest.mark.parametrize("k", [None, 2, 5])
def test_keep_uint8_is_the_float_form_before_dividing(media_dir, k):
    """``keep_uint8`` (the ``native`` frame form): 8-bit sources stay uint8, their ``float() / 255`` is the float
    form bit for bit; a float tensor stays float at full precision."""
    path = media_dir / "textured.mp4"
    decoded = _pyav_all_frames(path)
    for form, value in _forms(decoded, path).items():
        floats = V.prepare_video(value, as_tensor=True, num_frames=k)
        native = V.prepare_video(value, as_tensor=True, num_frames=k, keep_uint8=True)
        if form == "tensor_float":
            assert native.dtype == torch.float32, form
            torch.testing.assert_close(native, floats, rtol=0, atol=0)
        else:
            assert native.dtype == torch.uint8 and native.shape == floats.shape, form
            torch.testing.assert_close(native.float() / 255.0, floats, rtol=0, atol=0)


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float16, torch.float32, torch.int64])
@pytest.mark.parametrize("k", [None, 3])
def test_a_video_tensor_converts_as_its_frames_do(channels, dtype, k):
    """A (T, C, H, W) tensor is converted in one operation; the reference is the per-frame image rules."""
    from rewardzoo.shared.media import to_image_tensor, to_uint8_tensor

    g = torch.Generator().manual_seed(channels)
    x = torch.rand(7, channels, 6, 5, generator=g)
    x = x.to(dtype) if dtype.is_floating_point else (x * 255).round().to(dtype)
    index = V.sample_indices(7, k)
    for keep in (False, True):
        out = V.prepare_video(x, as_tensor=True, num_frames=k, keep_uint8=keep)
        keeps_float = dtype.is_floating_point and channels != 4
        each = to_image_tensor if keeps_float or not keep else to_uint8_tensor
        want = torch.stack([each(x[i]) for i in index])
        assert out.dtype == want.dtype and out.shape == (len(index), 3, 6, 5)
        torch.testing.assert_close(out, want, rtol=0, atol=0)


def test_write_then_read_roundtrip_is_close(tmp_path):
    frames = textured_frames(t=6)
    path = V.write_video(tmp_path / "x.mp4", [Image.fromarray(f) for f in frames], fps=8)
    back = V.read_video(path)
    assert back.shape == frames.shape
    # lossy yuv420p H.264 of a noisy texture: compare colour means, and that every decoded frame is
    # closest to its own source frame
    np.testing.assert_allclose(back.mean(axis=(1, 2)), frames.mean(axis=(1, 2)), atol=3)
    dist = np.abs(back[:, None].astype(int) - frames[None].astype(int)).mean(axis=(2, 3, 4))
    assert dist.argmin(axis=1).tolist() == list(range(len(frames)))


# ------------------------------------------------------------------------------------ bad input


def _zero_frame_file(path):
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=24)
        s.width = s.height = 64
        s.pix_fmt = "yuv420p"
        c.start_encoding()
    return path


@pytest.mark.parametrize(
    "value,message",
    [
        ([], "no frames"),
        (np.zeros((0, 8, 8, 3), np.uint8), "no frames"),
        (torch.zeros(0, 3, 8, 8), "no frames"),
        ([np.zeros((8, 8, 3), np.uint8), np.zeros((8, 10, 3), np.uint8)], "differ in size"),
        ([Image.new("RGB", (8, 8)), Image.new("RGB", (9, 8))], "differ in size"),
        (torch.rand(4, 8, 8, 3), "channels last"),
        (torch.rand(4, 3, 8, 8) * 2 - 1, r"\[0, 1\]"),
        (np.zeros((4, 3, 8, 8), np.float32), "pass \\(T, C, H, W\\) data as a tensor"),
        (np.zeros((8, 8), np.uint8), "shape"),
        (Image.new("RGB", (8, 8)), "single image"),
        (42, "unsupported video type"),
    ],
)
@pytest.mark.parametrize("as_tensor", [False, True])
def test_bad_in_memory_videos(value, message, as_tensor):
    with pytest.raises(InputError, match=message):
        V.prepare_video(value, as_tensor=as_tensor, num_frames=None)


def _faststart_mp4(path, frames):
    """An MP4 with its index (moov) before the data, so a cut file still lists every frame."""
    with av.open(str(path), "w", options={"movflags": "faststart"}) as c:
        s = c.add_stream("libx264", rate=24)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def _cut(src, dst, fraction):
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * fraction)])
    return dst


@pytest.mark.parametrize("backend", V.BACKENDS)
def test_bad_files(tmp_path, media_dir, backend):
    good = media_dir / "ramp_gop12.mp4"
    (tmp_path / "empty.mp4").write_bytes(b"")
    (tmp_path / "garbage.mp4").write_bytes(b"this is not a video" * 50)
    _cut(good, tmp_path / "truncated.mp4", 0.5)  # index (moov) at the end: nothing readable
    fs = _faststart_mp4(tmp_path / "fs.mp4", textured_frames(t=24))
    _cut(fs, tmp_path / "fs_cut.mp4", 0.6)  # index lists 24 frames, the data stops part-way
    _zero_frame_file(tmp_path / "zero.mp4")
    expected = {
        "missing.mp4": "not found",
        "empty.mp4": "empty",
        "garbage.mp4": "cannot read",
        "truncated.mp4": "cannot read",
        "fs_cut.mp4": "cannot read",
        "zero.mp4": "video stream",
    }
    for name, message in expected.items():
        with pytest.raises(InputError, match=message):
            V.read_video(tmp_path / name, 8, backend=backend)
        with pytest.raises(InputError, match=message):
            V.read_video(tmp_path / name, None, backend=backend)


def test_cut_matroska_reads_its_complete_frames(tmp_path, media_dir):
    # Matroska indexes as it goes: a cut file is a shorter valid video. Both decoders see the same frames.
    src = V.write_video(tmp_path / "src.mkv", textured_frames(t=24), gop=6)
    cut = _cut(src, tmp_path / "cut.mkv", 0.6)
    full = _pyav_all_frames(cut)
    assert 0 < len(full) < 24
    for backend in ("decord", "pyav"):
        frames = V.read_video(cut, 4, backend=backend)
        np.testing.assert_array_equal(frames, full[V.sample_indices(len(full), 4)])


def test_prepare_video_reports_bad_files_as_input_errors(tmp_path):
    (tmp_path / "garbage.mp4").write_bytes(b"this is not a video" * 50)
    for as_tensor in (False, True):
        with pytest.raises(InputError, match="cannot read"):
            V.prepare_video(str(tmp_path / "garbage.mp4"), as_tensor=as_tensor, num_frames=4)


def test_bad_num_frames():
    with pytest.raises(ValueError, match="num_frames"):
        V.prepare_video([np.zeros((4, 4, 3), np.uint8)], num_frames=0)
    with pytest.raises(ValueError, match="num_frames"):
        V.check_num_frames(2.5)


def test_ramp_fixture_is_what_it_claims():
    frames = ramp_frames(5, 8)
    assert [frame_index(f) for f in frames] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("fps", [12, 30000 / 1001])
def test_a_files_frame_rate_reaches_a_reward_that_asks_for_it(tmp_path, fps):
    """``video_rate`` is the container's average rate as PyAV reads it independently; a reward declaring
    ``frame_rate`` gets (frames, rate) for a file and the sample's ``video_fps`` for an array; the wire carries a
    file's rate beside its frames and refuses a bad one."""
    import av

    from rewardzoo.core.fields import convert_field
    from rewardzoo.rewards.base import Inputs
    from rewardzoo.spec.sample import Sample
    from rewardzoo.transport.wire import WireError, decode_sample, encode_sample

    path = V.write_video(tmp_path / "clip.mp4", textured_frames(8, 32, 48), fps=fps)
    with av.open(str(path)) as container:
        want = float(container.streams.video[0].average_rate)
    assert V.video_rate(path) == pytest.approx(want, rel=1e-6) and want == pytest.approx(fps, rel=1e-3)
    wants = Inputs(("video",), frames="array", frame_rate=True)
    frames, rate = convert_field("video", str(path), Sample(video=str(path)), wants)
    assert frames.shape[0] == 8 and rate == pytest.approx(want, rel=1e-6)
    array = np.zeros((3, 8, 8, 3), np.uint8)
    assert convert_field("video", array, Sample(video=array, video_fps=7.5), wants)[1] == 7.5
    assert convert_field("video", array, Sample(video=array), wants)[1] is None
    assert convert_field("video", array, Sample(video=array), Inputs(("video",), frames="array")).shape == (3, 8, 8, 3)
    wire = encode_sample({"video": str(path)})
    assert wire["video_fps"] == pytest.approx(want, rel=1e-6)
    assert decode_sample(wire)["video_fps"] == pytest.approx(want, rel=1e-6)
    with pytest.raises(WireError, match="video_fps"):
        decode_sample({**wire, "video_fps": -1})
    with pytest.raises(InputError, match="video_fps"):
        Sample(video=array, video_fps=0)
