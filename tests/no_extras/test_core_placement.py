"""An entry's ``ray:`` block: strict parsing (ConfigError naming the entry and key), defaults from the command's
figures, and whether replicas fit a cluster's nodes (first fit decreasing over whole and fractional GPUs)."""

from __future__ import annotations

import pytest

from rewardzoo.errors import ConfigError
from rewardzoo.spec.config import parse_spec
from rewardzoo.spec.placement import Node, RayPlacement, check_fit


def entry(ray) -> dict:
    return {"name": "pick", "reward_model": "jpeg_compressibility", "ray": ray}


def test_a_ray_block_parses_and_fills_what_it_leaves_out_from_the_command():
    spec = parse_spec(entry({"num_gpus": 0.1, "num_cpus": 1, "replicas": 2, "max_ongoing_requests": 8}))
    assert spec.ray == RayPlacement(0.1, 1.0, 2, 8)
    assert parse_spec(entry({"num_gpus": 2})).ray == RayPlacement(num_gpus=2.0)
    assert parse_spec(entry(None)).ray is None and parse_spec("pick").ray is None
    defaults = RayPlacement(0.5, 1.0, 3, 256)
    assert parse_spec(entry({"replicas": 2})).ray.filled(defaults) == RayPlacement(0.5, 1.0, 2, 256)
    assert RayPlacement(0.25, 2.0, 1, 8).options() == {"num_gpus": 0.25, "num_cpus": 2.0}


@pytest.mark.parametrize(
    "ray,field,words",
    [
        ({"num_gpu": 1}, "ray.num_gpu", "unknown key 'num_gpu'"),
        ({"num_gpus": -0.1}, "ray.num_gpus", ">= 0"),
        ({"num_cpus": -1}, "ray.num_cpus", ">= 0"),
        ({"num_gpus": 1.5}, "ray.num_gpus", "fraction of one GPU"),
        ({"num_gpus": "1"}, "ray.num_gpus", ">= 0"),
        ({"replicas": 0}, "ray.replicas", "positive integer"),
        ({"replicas": 1.5}, "ray.replicas", "positive integer"),
        ({"max_ongoing_requests": True}, "ray.max_ongoing_requests", "positive integer"),
        ([1], "ray", "must be a mapping"),
    ],
)
def test_a_bad_ray_block_is_a_config_error_naming_the_entry_and_key(ray, field, words):
    with pytest.raises(ConfigError) as err:
        parse_spec(entry(ray))
    assert err.value.entry == "pick" and err.value.field == field and words in str(err.value)


def test_fractions_share_a_gpu_whole_gpus_do_not_and_the_entry_that_does_not_fit_is_named():
    two = [Node(cpus=8, gpus=2)]
    check_fit([("a", RayPlacement(0.5, 1, 2)), ("b", RayPlacement(1, 1, 1))], two)  # 0.5 + 0.5 on one GPU
    check_fit([("a", RayPlacement(0.1, 0, 10))], [Node(1, 1)])  # ten tenths fill one card (no rounding error)
    with pytest.raises(ConfigError) as err:  # 0.6 + 0.6 exceed one card: three need three GPUs
        check_fit([("a", RayPlacement(0, 1, 1)), ("b", RayPlacement(0.6, 1, 3))], two)
    assert err.value.entry == "b" and "3 replica(s)" in str(err.value)
    with pytest.raises(ConfigError) as err:  # whole GPUs live on one node
        check_fit([("big", RayPlacement(2, 0, 1))], [Node(4, 1), Node(4, 1)])
    assert err.value.entry == "big"
    with pytest.raises(ConfigError) as err:
        check_fit([("front", RayPlacement(0, 1, 1)), ("cpu", RayPlacement(0, 1.5, 1))], [Node(2, 0)])
    assert err.value.entry == "front" and "2 CPUs and 0 GPUs" in str(err.value)  # the 1.5 went first
