"""video_dynamic_degree against a re-computation of VBench's steps on torchvision RAFT flow (random weights)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.video.dynamic_degree import DynamicDegree

from .media import textured_frames


@pytest.fixture(scope="module")
def raft_small_file(tmp_path_factory):
    from torchvision.models.optical_flow import raft_small

    torch.manual_seed(0)
    model = raft_small(weights=None, progress=False)
    path = tmp_path_factory.mktemp("raft") / "raft_small.pth"
    torch.save(model.state_dict(), path)
    return str(path)


def vbench_reference(arr: np.ndarray, path: str, stride: int = 1) -> tuple[float, bool]:
    """VBench's infer(): float 0-255 frames, InputPadder, RAFT (iters 20), top-5 % magnitude, check_move."""
    from torchvision.models.optical_flow import raft_small

    model = raft_small(weights=None, progress=False)
    model.load_state_dict(torch.load(path, weights_only=True))
    model.eval()
    frames = [torch.from_numpy(f.astype(np.uint8)).permute(2, 0, 1).float()[None] for f in arr]
    frames = [frames[i] for i in range(0, len(frames), stride)]
    scale = min(list(frames[0].shape)[-2:])
    thres, count_num = 6.0 * (scale / 256.0), round(4 * (len(frames) / 16.0))
    static_score = []
    for image1, image2 in zip(frames[:-1], frames[1:]):
        ht, wd = image1.shape[-2:]
        pad_ht, pad_wd = (((ht // 8) + 1) * 8 - ht) % 8, (((wd // 8) + 1) * 8 - wd) % 8
        pad = [pad_wd // 2, pad_wd - pad_wd // 2, pad_ht // 2, pad_ht - pad_ht // 2]
        image1, image2 = F.pad(image1, pad, mode="replicate"), F.pad(image2, pad, mode="replicate")
        with torch.no_grad():  # torchvision's RAFT wants [-1, 1]; VBench's RAFT does 2 * (x / 255) - 1 inside
            flow_up = model(2 * (image1 / 255.0) - 1, 2 * (image2 / 255.0) - 1, num_flow_updates=20)[-1]
        flo = flow_up[0].permute(1, 2, 0).numpy()
        rad = np.sqrt(np.square(flo[:, :, 0]) + np.square(flo[:, :, 1]))
        h, w = rad.shape
        cut_index = int(h * w * 0.05)
        static_score.append(np.mean(abs(np.sort(-rad.flatten()))[:cut_index]).item())
    count, moving = 0, False
    for s in static_score:
        if s > thres:
            count += 1
        if count >= count_num:
            moving = True
            break
    return float(np.mean(static_score)), moving


def as_tensor(arr):
    return torch.from_numpy(np.ascontiguousarray(arr)).permute(0, 3, 1, 2).float() / 255


def processor(path: str, fps: float | None):
    from rewardzoo.core.processor import RewardProcessor

    kwargs = {"arch": "small", "fps": fps}
    return RewardProcessor([{"name": "video_dynamic_degree", "model_path": path, "device": "cpu", "kwargs": kwargs}])


def decoded(path) -> np.ndarray:
    """Every frame of a file, PyAV's plain sequential decode (what VBench's reader gives)."""
    import av

    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


@pytest.mark.parametrize("t, fps", [(3, None), (5, 16)])
def test_matches_vbench_steps(raft_small_file, t, fps):
    from rewardzoo.spec.sample import Sample

    arr = np.concatenate([textured_frames(t=1, height=124, width=130, seed=s) for s in range(t)])  # padded to 128x136
    out = processor(raft_small_file, fps)([Sample(video=as_tensor(arr))])
    expected, moving = vbench_reference(arr, raft_small_file, stride=1 if fps is None else round(fps / 8))
    assert out.rewards["video_dynamic_degree"][0] == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert out.extras["video_dynamic_degree"]["dynamic"][0] == (1.0 if moving else 0.0)
    assert out.extras["video_dynamic_degree"]["threshold"][0] == pytest.approx(6.0 * 124 / 256)


def test_a_file_is_decoded_at_vbench_s_stride_only(raft_small_file, tmp_path):
    """fps 24 keeps every 3rd frame: the reward is given those only and scores them as
    VBench scores its strided frames of the whole decoded file."""
    from rewardzoo.shared.video import write_video
    from rewardzoo.spec.sample import Sample

    path = tmp_path / "clip.mp4"
    write_video(path, np.concatenate([textured_frames(t=1, height=128, width=128, seed=s) for s in range(7)]), fps=24)
    out = processor(raft_small_file, 24)([Sample(video=str(path))])
    expected, moving = vbench_reference(decoded(path), raft_small_file, stride=3)
    assert out.rewards["video_dynamic_degree"][0] == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert out.extras["video_dynamic_degree"]["dynamic"][0] == (1.0 if moving else 0.0)


def test_checks(raft_small_file):
    with pytest.raises(ConfigError, match="model_path"):
        DynamicDegree(None)
    with pytest.raises(ConfigError, match="RAFT-large"):
        DynamicDegree(raft_small_file)  # a small state dict into the large model
    with pytest.raises(ConfigError, match="arch"):
        DynamicDegree(raft_small_file, arch="tiny")
    reward = DynamicDegree(raft_small_file, arch="small")
    with pytest.raises(InputError, match="2 frames"):
        reward(video=[torch.rand(1, 3, 128, 128)])
    with pytest.raises(InputError, match="128"):
        reward(video=[torch.rand(2, 3, 32, 32)])  # RAFT needs frames of at least 128 pixels a side
