"""`rewardzoo evaluate`: formats and layouts read as published, scored through the score job, with the known
answers (an oracle reward scores 1.0, its negation 0.0) and errors that name the file and line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rewardzoo.cli import main
from rewardzoo.errors import ConfigError, InputError, RewardZooError
from rewardzoo.jobs.evaluation.run import EvaluateJob, run_evaluate
from rewardzoo.rewards.base import GroupwiseReward, Inputs, PointwiseReward, RewardOutput

ORACLE = {"name": "bright", "reward_model": "tests.no_extras.rewards:MeanPixel"}
NEGATED = {"name": "dark", "reward_model": "tests.no_extras.test_core_evaluate:Darkness"}
GROUPED = {"name": "centered", "reward_model": "tests.no_extras.test_core_evaluate:CenteredBrightness"}


class Darkness(PointwiseReward):
    """Minus the mean pixel value: the oracle's negation."""

    inputs = Inputs(("image",))

    def __call__(self, image, **_):
        return [-float(np.asarray(img, dtype=np.float64).mean()) for img in image]


class CenteredBrightness(GroupwiseReward):
    """Mean pixel value minus its group's mean; records the group sizes it saw."""

    inputs = Inputs(("image", "group_id"))
    sizes: list[int] = []

    def __call__(self, image, group_id, **_):
        type(self).sizes.append(len(image))
        x = np.array([np.asarray(img, dtype=np.float64).mean() for img in image])
        return RewardOutput(x - x.mean())


def _image(folder: Path, level: int) -> str:
    name = f"gray{level}.png"
    if not (folder / name).exists():
        Image.fromarray(np.full((8, 8, 3), level, np.uint8)).save(folder / name)
    return name


def _pairs(folder: Path, n=30, ties=4, seed=0) -> Path:
    """Pairs whose human prefers the brighter image; ``ties`` pairs labelled tie; categories by parity."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        la, lb = rng.choice(np.arange(10, 250, 10), 2, replace=False)
        pref = "tie" if i < ties else ("a" if la > lb else "b")
        row = {"prompt": f"p{i}", "media_a": _image(folder, int(la)), "media_b": _image(folder, int(lb))}
        lines.append({**row, "preferred": pref, "category": "even" if i % 2 == 0 else "odd"})
    path = folder / "pairs.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _evaluate(tmp_path, data, fmt, rewards, **kw):
    job = EvaluateJob(
        config={"rewards": rewards}, data=str(data), format=fmt, out=str(tmp_path / "out"), quiet=True, **kw
    )
    return run_evaluate(job)


def test_pairs_oracle_one_negation_zero_and_ties_apart(tmp_path):
    run = _evaluate(tmp_path, _pairs(tmp_path), "pairs", [ORACLE, NEGATED])
    bright, dark = run.results
    assert (bright.interval.value, dark.interval.value) == (1.0, 0.0)
    assert bright.interval.n == 26 and bright.extra["n_human_ties"] == 4  # ties counted apart, never agreement
    assert {c["category"]: c["n"] for c in bright.categories} == {"even": 13, "odd": 13}
    (cmp,) = run.comparisons
    assert cmp["difference"] == 1.0 and cmp["p_value"] == 0.0
    saved = json.loads((tmp_path / "out" / "agreement.json").read_text())
    assert saved["rewards"][0]["value"] == 1.0 and saved["unit"] == "pair"


def test_pairs_accuracy_matches_numpy_on_the_score_file(tmp_path):
    """The accuracy of a noisy reward equals a direct computation from `rewardzoo score`'s output."""
    data = _pairs(tmp_path, n=40, ties=0, seed=3)
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    for i, row in enumerate(rows):  # the human is wrong on every fifth pair
        if i % 5 == 0:
            row["preferred"] = "b" if row["preferred"] == "a" else "a"
    data.write_text("".join(json.dumps(x) + "\n" for x in rows))
    run = _evaluate(tmp_path, data, "pairs", [ORACLE])
    scores = [json.loads(x)["rewards"]["bright"] for x in (tmp_path / "out" / "scores.jsonl").read_text().splitlines()]
    a, b = np.array(scores[0::2]), np.array(scores[1::2])
    human = np.array([1 if r["preferred"] == "a" else -1 for r in rows])
    assert run.results[0].interval.value == pytest.approx(np.mean(np.sign(a - b) == human)) == 0.8


def test_groupwise_reward_scores_each_pair_as_a_group_of_two(tmp_path):
    CenteredBrightness.sizes.clear()
    run = _evaluate(tmp_path, _pairs(tmp_path, ties=0), "pairs", [GROUPED])
    assert run.results[0].interval.value == 1.0
    assert set(CenteredBrightness.sizes) == {2} and "group of two" in run.notes["centered"]


def test_rankings_and_ratings(tmp_path):
    groups = []
    for g in range(6):
        levels = [20 + 30 * k + g for k in range(4)]
        groups.append({"prompt": f"g{g}", "media": [_image(tmp_path, v) for v in levels], "ranks": [4, 3, 2, 2]})
    (tmp_path / "rank.jsonl").write_text("".join(json.dumps(x) + "\n" for x in groups))
    run = _evaluate(tmp_path, tmp_path / "rank.jsonl", "rankings", [ORACLE, NEGATED])
    assert [r.interval.value for r in run.results] == [1.0, 0.0]
    assert run.results[0].extra == {"n_groups": 6, "n_pairs": 30, "n_rank_ties": 6}

    rng = np.random.default_rng(0)
    levels = rng.choice(np.arange(5, 250, 5), 25, replace=False)
    mos = levels / 50 + rng.normal(0, 0.5, 25)
    rows = [{"media": _image(tmp_path, int(v)), "mos": float(m)} for v, m in zip(levels, mos)]
    (tmp_path / "mos.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    job = EvaluateJob({"rewards": [ORACLE]}, str(tmp_path / "mos.jsonl"), "ratings", str(tmp_path / "o2"), quiet=True)
    found = run_evaluate(job).results[0]
    stats = pytest.importorskip("scipy.stats")
    assert found.metric == "srcc"
    assert found.interval.value == pytest.approx(stats.spearmanr(levels, mos).statistic)
    assert found.extra["plcc"]["value"] == pytest.approx(stats.pearsonr(levels / 255, mos).statistic)
    with pytest.raises(ConfigError, match="groupwise"):
        run_evaluate(EvaluateJob({"rewards": [GROUPED]}, str(tmp_path / "mos.jsonl"), "ratings", quiet=True))


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ({"media_a": "gray10.png", "media_b": "missing.png", "preferred": "a"}, r"pairs.jsonl line 2, field 'media_b'"),
        ({"media_a": "gray10.png", "media_b": "gray10.png", "preferred": "A"}, r"line 2, field 'preferred'.*'A'"),
        ({"media_a": "gray10.png", "preferred": "a"}, r"line 2, field 'media_b': missing"),
    ],
)
def test_bad_pairs_name_the_file_and_line(tmp_path, line, match):
    _image(tmp_path, 10)
    ok = {"media_a": "gray10.png", "media_b": "gray10.png", "preferred": "tie"}
    (tmp_path / "pairs.jsonl").write_text(json.dumps(ok) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(InputError, match=match):
        _evaluate(tmp_path, tmp_path / "pairs.jsonl", "pairs", [ORACLE])


def test_one_member_group_and_undecodable_media_are_errors(tmp_path):
    _image(tmp_path, 10)
    (tmp_path / "rank.jsonl").write_text(json.dumps({"media": ["gray10.png"], "ranks": [1]}) + "\n")
    with pytest.raises(InputError, match=r"rank.jsonl line 1, field 'media': .*at least two members"):
        _evaluate(tmp_path, tmp_path / "rank.jsonl", "rankings", [ORACLE])
    (tmp_path / "broken.png").write_bytes(b"not a png")
    pair = {"media_a": "gray10.png", "media_b": "broken.png", "preferred": "a"}
    (tmp_path / "pairs.jsonl").write_text(json.dumps(pair) + "\n")
    with pytest.raises(RewardZooError, match=r"pairs.jsonl line 1, media_b"):
        _evaluate(tmp_path, tmp_path / "pairs.jsonl", "pairs", [ORACLE])


def test_pickapic_v2_parquet_layout(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")

    def jpg(level):
        import io

        buf = io.BytesIO()
        Image.fromarray(np.full((8, 8, 3), level, np.uint8)).save(buf, format="JPEG", quality=95)
        return buf.getvalue()

    labels = [(1.0, 0.0), (0.0, 1.0), (0.5, 0.5), (1.0, 0.0)]
    table = pa.table(
        {
            "caption": [f"c{i}" for i in range(4)],
            "jpg_0": [jpg(200), jpg(40), jpg(90), jpg(180)],
            "jpg_1": [jpg(30), jpg(220), jpg(100), jpg(20)],
            "label_0": [x[0] for x in labels],
            "label_1": [x[1] for x in labels],
            "has_label": [True] * 4,
        }
    )
    pq.write_table(table, tmp_path / "test-00000.parquet")
    run = _evaluate(tmp_path, tmp_path / "test-00000.parquet", "pickapic_v2", [ORACLE, NEGATED])
    assert [r.interval.value for r in run.results] == [1.0, 0.0]
    assert run.results[0].extra["n_human_ties"] == 1 and run.benchmark == "pickapic_v2"


def test_hpdv2_layout_uses_the_inversion_score(tmp_path):
    (tmp_path / "test").mkdir()
    entries = []
    for g in range(3):
        levels = [40, 80, 120, 160]
        names = [_image(tmp_path / "test", v + g) for v in levels]
        entries.append({"prompt": f"p{g}", "image_path": names, "rank": [4, 2, 3, 1]})
    (tmp_path / "test.json").write_text(json.dumps(entries))
    run = _evaluate(tmp_path, tmp_path / "test.json", "hpdv2", [ORACLE])
    # brightness order 1<2<3<4 vs human ranks 4,2,3,1: one inverted pair of six (members 1 and 2)
    assert run.results[0].metric == "inversion_score" and run.results[0].interval.value == pytest.approx(5 / 6)


def test_videogen_rewardbench_layout_accuracy_with_ties(tmp_path):
    rows = [
        ("A", 200, 20, "A"),
        ("B", 20, 200, "same"),
        ("same", 100, 100, "same"),
        ("same", 110, 100, "B"),
        ("A", 150, 140, "A"),
    ]
    with (tmp_path / "videogen-rewardbench.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["prompt", "path_A", "path_B", "A_model", "B_model", "VQ", "MQ", "TA", "Overall"])
        for i, (overall, la, lb, vq) in enumerate(rows):
            w.writerow([f"p{i}", _image(tmp_path, la), _image(tmp_path, lb), "m1", "m2", vq, vq, vq, overall])
    run = _evaluate(tmp_path, tmp_path / "videogen-rewardbench.csv", "videogen_rewardbench", [ORACLE])
    found = run.results[0]
    # |diff| * 255: 180, 180, 0, 10, 10. eps = 10 makes both human ties predicted ties but loses pair 5: 4/5
    assert found.metric == "accuracy_with_ties" and found.interval.value == pytest.approx(0.8)
    assert found.extra["accuracy_without_ties"] == 1.0 and "VQ" in found.extra


def test_unknown_format_and_cli(tmp_path, capsys):
    data = _pairs(tmp_path)
    config = tmp_path / "rewards.yaml"
    config.write_text(json.dumps({"rewards": [ORACLE, NEGATED]}))
    with pytest.raises(ConfigError, match="unknown format"):
        run_evaluate(EvaluateJob(str(config), str(data), "pair"))
    assert main(["evaluate", str(config), "--data", str(data), "--format", "pairs", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "bright" in text and "1.000" in text and "even" in text and "paired bootstrap" in text
    out = tmp_path / "o"
    assert main(["evaluate", str(config), "--data", str(data), "--format", "pairs", "--json", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["rewards"][1]["value"] == 0.0 and (out / "scores.jsonl").is_file()
    # resumable: the same job again keeps the scored rows
    assert main(["evaluate", str(config), "--data", str(data), "--format", "pairs", "--out", str(out), "--resume"]) == 0


def test_report_holds_the_agreement_table_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    data = _pairs(tmp_path)
    config = tmp_path / "rewards.yaml"
    config.write_text(json.dumps({"rewards": [ORACLE, NEGATED]}))
    page = tmp_path / "agreement.html"
    assert main(["evaluate", str(config), "--data", str(data), "--format", "pairs", "-q", "--report", str(page)]) == 0
    html = page.read_text()
    assert 'id="agreement"' in html and "<svg" in html and 'data-value="1.0"' in html and "bright" in html


def test_published_blocks_parse_and_bad_ones_are_refused():
    from rewardzoo.catalog import published as pub
    from rewardzoo.errors import RegistryError
    from rewardzoo.registry import entries, read_card

    assert {(p.benchmark, p.value) for p in pub.published("pickscore")} == {
        ("hpdv2", 0.792),
        ("imagereward", 0.667),
        ("pickapic_v2", 0.802),
    }
    for name, info in entries().items():  # every shipped card's block is well formed
        if info.card is not None and info.source == "rewardzoo":
            pub.parse_published(read_card(name)[0], info.card)
    with pytest.raises(RegistryError, match=r"published\[0\].value must be a number"):
        pub.parse_published({"published": [{"benchmark": "x", "metric": "m", "value": "hi", "source": "s"}]}, "c.md")
    with pytest.raises(RegistryError, match="exactly the keys"):
        pub.parse_published({"published": [{"benchmark": "x", "value": 0.5}]}, "c.md")


def test_published_value_printed_beside_the_measured_one(tmp_path, monkeypatch, capsys):
    from rewardzoo.catalog import published as pub

    figure = pub.Published("my_bench", "accuracy", 0.777, "a paper")
    monkeypatch.setattr(pub, "published", lambda name: (figure,))
    data = _pairs(tmp_path)
    config = tmp_path / "rewards.yaml"
    config.write_text(json.dumps({"rewards": [ORACLE]}))
    args = ["evaluate", str(config), "--data", str(data), "--format", "pairs", "-q"]
    assert main(args) == 0
    assert "0.777" not in capsys.readouterr().out  # another benchmark: not shown
    assert main([*args, "--benchmark", "my_bench"]) == 0
    assert "0.777 (a paper)" in capsys.readouterr().out


def test_cards_render_their_published_block_as_a_table():
    """The card body (scripts/build_docs.py's generated block) lists every published figure of the front matter."""
    from rewardzoo.catalog.published import published
    from rewardzoo.registry import read_card

    for name in ("pickscore", "hpsv2", "image_reward"):
        _, body = read_card(name)
        section = body[body.index("## Published agreement") : body.index("## Speed")]
        rows = [line for line in section.splitlines() if line.startswith("| `")]
        figures = published(name)
        assert len(rows) == len(figures) > 0
        for row, fig in zip(rows, figures):
            cells = [c.strip() for c in row.strip("|").split(" | ")]
            assert cells[:3] == [f"`{fig.benchmark}`", fig.metric, f"{fig.value:.3f}"] and fig.source in cells[3]


# ------------------------------------------------------------------------------- hostile data (issue 49, item 11)
def test_a_line_without_end_is_refused_after_the_line_limit_not_read_whole(tmp_path):
    from rewardzoo.shared.files import MAX_LINE_BYTES

    data = tmp_path / "pairs.jsonl"
    with data.open("wb") as fh:  # 10 GB without a newline, sparse: no disk and no memory used
        fh.truncate(10 << 30)
    config = tmp_path / "rewards.yaml"
    config.write_text(json.dumps({"rewards": [ORACLE]}))
    with pytest.raises(InputError, match=rf"pairs.jsonl line 1: longer than {MAX_LINE_BYTES} bytes"):
        run_evaluate(EvaluateJob(str(config), str(data), "pairs"))


def test_a_csv_field_past_the_csv_limit_names_its_line(tmp_path):
    data = tmp_path / "videogen-rewardbench.csv"
    with data.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["prompt", "path_A", "path_B", "Overall"])
        w.writerow(["p0", _image(tmp_path, 10), _image(tmp_path, 20), "A"])
        w.writerow(["x" * 200_000, _image(tmp_path, 10), _image(tmp_path, 20), "A"])
    config = tmp_path / "rewards.yaml"
    config.write_text(json.dumps({"rewards": [ORACLE]}))
    with pytest.raises(InputError, match=r"videogen-rewardbench.csv line 3: not readable as CSV \(field larger"):
        run_evaluate(EvaluateJob(str(config), str(data), "videogen_rewardbench"))


def test_out_that_is_the_data_folder_or_the_data_file_is_one_line_error(tmp_path, capsys):
    data = _pairs(tmp_path)
    config = tmp_path / "rewards.yaml"
    config.write_text(json.dumps({"rewards": [ORACLE]}))
    before = sorted(p.name for p in tmp_path.iterdir())
    for out, said in ((tmp_path, "is the folder of --data"), (data, "is a file")):
        code = main(["evaluate", str(config), "--data", str(data), "--format", "pairs", "-q", "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_link_planted_in_the_media_folder_is_replaced_not_written_through(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import io

    def jpg(level):
        buf = io.BytesIO()
        Image.fromarray(np.full((8, 8, 3), level, np.uint8)).save(buf, format="JPEG", quality=95)
        return buf.getvalue()

    (tmp_path / "set").mkdir()
    data = tmp_path / "set" / "test-00000.parquet"
    columns = {"caption": ["c0"], "jpg_0": [jpg(200)], "jpg_1": [jpg(30)], "label_0": [1.0], "label_1": [0.0]}
    pq.write_table(pa.table(columns), data)
    out = tmp_path / "out"
    (out / "media").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"x" * len(jpg(200)))  # the same size as the member it stands for
    (out / "media" / "test-00000-0-0.jpg").symlink_to(victim)
    config = tmp_path / "rewards.yaml"
    config.write_text(json.dumps({"rewards": [ORACLE]}))
    run = run_evaluate(EvaluateJob(str(config), str(data), "pickapic_v2", out=str(out)))
    assert victim.read_bytes() == b"x" * len(jpg(200))  # untouched
    written = out / "media" / "test-00000-0-0.jpg"
    assert not written.is_symlink() and written.read_bytes() == jpg(200)
    assert run.results[0].interval.value == 1.0  # scored on the set's own image, not the planted file
    # a media folder that is itself a link is refused
    out2 = tmp_path / "out2"
    out2.mkdir()
    (out2 / "media").symlink_to(tmp_path / "set", target_is_directory=True)
    with pytest.raises(RewardZooError, match="is a symbolic link"):
        run_evaluate(EvaluateJob(str(config), str(data), "pickapic_v2", out=str(out2)))


def test_media_are_relative_to_the_data_file_from_any_folder(tmp_path, monkeypatch, capsys):
    """Issue 50: a relative --data (or --out) once resolved the media against the temporary (or output) folder the
    members' manifest is written to. Run from a folder that is neither the data's nor the checkout's, each way."""
    (tmp_path / "set").mkdir()
    data = _pairs(tmp_path / "set", n=6, ties=0)
    (tmp_path / "set" / "rewards.yaml").write_text(json.dumps({"rewards": [ORACLE]}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = "../set/rewards.yaml"
    ways = (("../set/pairs.jsonl", None), (str(data), None), ("../set/pairs.jsonl", "runs/a"), (str(data), "runs/b"))
    for given, out in ways:
        args = ["evaluate", config, "--data", given, "--format", "pairs", "--json"] + (["--out", out] if out else [])
        assert main(args) == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out)["rewards"][0]["value"] == 1.0
    members = [json.loads(x) for x in (elsewhere / "runs" / "a" / "members.jsonl").read_text().splitlines()]
    assert all(Path(m["image"]).is_absolute() for m in members)
    assert {Path(m["image"]).resolve().parent for m in members} == {(tmp_path / "set").resolve()}  # the data's folder


def test_data_ids_name_the_members_and_the_scores_are_joined_back_by_them(tmp_path):
    """Issue 50: the data's ids reach the members' manifest and scores.jsonl, and the scores are joined to the
    members by id: a score job returning its rows in another order gives the same agreement."""
    data = _pairs(tmp_path, n=10, ties=0, seed=5)
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    data.write_text("".join(json.dumps({"id": f"q{k}", **row}) + "\n" for k, row in enumerate(rows)))
    job = EvaluateJob(config={"rewards": [ORACLE]}, data=str(data), format="pairs", out=str(tmp_path / "o"), quiet=True)
    run = run_evaluate(job)
    members = [json.loads(x) for x in (tmp_path / "o" / "members.jsonl").read_text().splitlines()]
    scored = [json.loads(x) for x in (tmp_path / "o" / "scores.jsonl").read_text().splitlines()]
    expected = [f"q{k}/{side}" for k in range(10) for side in ("media_a", "media_b")]
    assert [m["id"] for m in members] == [s["id"] for s in scored] == expected
    from rewardzoo.jobs.local import run_local

    def reversed_rows(score_job):
        return run_local(score_job).records[::-1]

    again = run_evaluate(EvaluateJob(**{**job.__dict__, "out": str(tmp_path / "o2")}), reversed_rows)
    assert again.results[0].interval.value == run.results[0].interval.value == 1.0
    # a duplicate id names both lines; ids on some lines only are refused
    (tmp_path / "dup.jsonl").write_text("".join(json.dumps({**row, "id": "same"}) + "\n" for row in rows[:2]))
    with pytest.raises(InputError, match=r"dup.jsonl line 2, field 'id': 'same' is also the id of dup.jsonl line 1"):
        run_evaluate(EvaluateJob(config={"rewards": [ORACLE]}, data=str(tmp_path / "dup.jsonl"), format="pairs"))
    (tmp_path / "some.jsonl").write_text(json.dumps({**rows[0], "id": 1}) + "\n" + json.dumps(rows[1]) + "\n")
    with pytest.raises(InputError, match=r"some.jsonl line 2, field 'id': missing, while some.jsonl line 1 has one"):
        run_evaluate(EvaluateJob(config={"rewards": [ORACLE]}, data=str(tmp_path / "some.jsonl"), format="pairs"))
