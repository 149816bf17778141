"""A Parquet file of 4K PNG bytes scored in a Ray actor (issue 47, item 2): the actor's peak memory, and the reader
of the media columns.

The measurement runs in a real Ray actor of this module's local instance: it builds the engine's
:class:`~rewardzoo.ray.engine.ChunkScorer` (``jpeg_compressibility``), warms it up on a small file, resets its own
``VmHWM`` (``/proc/self/clear_refs``) and scores one chunk of eight 3840x2160 images (199 MB of 8-bit RGB; PNG
bytes about half that, as of photographs) from a Parquet file whose media column is not dictionary-encoded (the
layout the docs advise). The actor grows by 1.5x the decoded images at most (the issue's rule): the row group is
read once, each cell written to a file, Arrow's memory let go, and the images decoded as a local run decodes files
(before: the row group's bytes kept as Python bytes beside a PIL image per row, decoded and kept for the chunk).
The scores equal flow_grpo's formula computed here from the same images. A memory bound, not a timing threshold;
~0.6 GB in all.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'rewardzoo[ray]')")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'rewardzoo[ray]')")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from PIL import Image

from rewardzoo.ray.inputs import ParquetMedia

ROOT = Path(__file__).resolve().parents[2]
N, H, W = 8, 2160, 3840
DECODED = N * H * W * 3
BOUND = 1.5


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2"}},
    )
    yield
    ray.shutdown()


def png_bytes(i: int, height: int = H, width: int = W) -> bytes:
    """A ramp with noise: PNG keeps about half of its 8-bit size, as of a photograph (bytes that cost memory when held)."""
    rng = np.random.default_rng(i)
    y = np.arange(height, dtype=np.int32)[:, None, None]
    x = np.arange(width, dtype=np.int32)[None, :, None]
    rgb = (x // 16 + y // 9 + np.array([0, 85, 170]) + 13 * i) % 256 + rng.integers(-3, 4, (height, width, 3))
    buf = io.BytesIO()
    Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def jpeg_score(data: bytes) -> float:
    """flow_grpo's compressibility: -kB / 500 of the image saved as JPEG at quality 95."""
    buf = io.BytesIO()
    Image.open(io.BytesIO(data)).convert("RGB").save(buf, format="JPEG", quality=95)
    return -buf.tell() / 1000 / 500


@ray.remote(num_cpus=1)
def actor_peak(small: str, big: str) -> dict:
    """In a Ray worker process: ChunkScorer warmed on ``small``, then its peak growth scoring all of ``big``."""
    from rewardzoo.jobs.inputs import read_input
    from rewardzoo.ray.engine import ChunkScorer
    from rewardzoo.spec.config import parse_specs

    def batch(path: str) -> tuple[ChunkScorer, dict]:
        rows = read_input(path, tables=True)
        n = len(rows.samples)
        scorer = ChunkScorer(parse_specs([{"name": "jpeg_compressibility"}]), rows.parquet, rows.binary)
        return scorer, {
            "chunk": np.array([0]),
            "indices": np.array([json.dumps(list(range(n)))]),
            "labels": np.array([json.dumps([rows.label(i) for i in range(n)])]),
            "rows": np.array([json.dumps(rows.rows)]),
            "media": np.array([b""], dtype=object),
        }

    def status(key: str) -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    scorer, warm = batch(small)
    assert scorer(warm)["error"][0] == ""
    scorer, chunk = batch(big)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status("VmRSS")
    out = scorer(chunk)
    grew = status("VmHWM") - base
    return {"grew": grew, "error": out["error"][0], "records": json.loads(out["records"][0] or "[]")}


def test_a_parquet_chunk_of_4k_png_bytes_grows_a_ray_actor_by_at_most_1_5x_the_decoded_images(tmp_path):
    cells = [png_bytes(i) for i in range(N)]
    pq.write_table(pa.table({"image": cells}), tmp_path / "big.parquet", use_dictionary=False)  # one row group
    pq.write_table(pa.table({"image": [png_bytes(9, 64, 96)]}), tmp_path / "small.parquet")
    want = [jpeg_score(c) for c in cells]
    del cells
    out = ray.get(actor_peak.remote(str(tmp_path / "small.parquet"), str(tmp_path / "big.parquet")))
    assert out["error"] == ""
    np.testing.assert_allclose([r["rewards"]["jpeg_compressibility"] for r in out["records"]], want, rtol=1e-6)
    assert out["grew"] <= BOUND * DECODED, f"the actor grew {out['grew'] / DECODED:.2f}x the decoded images"


def test_the_media_reader_gives_rows_in_any_order_across_row_groups_with_lists_and_nulls(tmp_path):
    images = [f"image {i}".encode() * (i + 1) for i in range(11)]
    lists = [[f"c{i}.{k}".encode() if (i + k) % 4 else None for k in range(i % 3 + 1)] for i in range(11)]
    images[4], lists[6] = None, None
    table = pa.table({"image": images, "condition_images": pa.array(lists, pa.list_(pa.binary()))})
    pq.write_table(table, tmp_path / "m.parquet", row_group_size=3)  # groups [0-2] [3-5] [6-8] [9-10]
    media = ParquetMedia(str(tmp_path / "m.parquet"), ["image", "condition_images"])
    for order in ([0, 1, 2, 3], [5, 9, 10], [2, 7, 1], [10, 0], [6, 4, 8]):  # forward, backward, within a group
        got = media.files(order)
        for cells, i in zip(got, order):
            if images[i] is None:
                assert "image" not in cells
            else:
                assert Path(cells["image"]).read_bytes() == images[i]
            if lists[i] is None:
                assert "condition_images" not in cells
            else:
                assert [p and Path(p).read_bytes() for p in cells["condition_images"]] == lists[i]
    folders = [Path(folder.name) for folder, _ in media._read_before]
    assert len(folders) == 2 and all(f.is_dir() for f in folders)  # the last call's row groups: [6-8], [3-5]
    media.files([8])
    assert folders[0].is_dir() and not folders[1].exists()  # the row groups a call does not use are deleted
    media.close()
    assert not folders[0].exists()
    with pytest.raises(IndexError, match="row 11 is not in the file"):
        media.files([11])
