"""Safe weight loading: the key a caller asks for, wrappers, refusal of arbitrary pickles."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import save_file

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.shared.weights import load_state_dict, loading


@pytest.mark.parametrize("wrapper", [None, "state_dict", "model"])
def test_plain_and_wrapped_checkpoints_give_the_tensors(tmp_path, wrapper):
    weights = {"w": torch.arange(6.0).reshape(2, 3)}
    torch.save(weights if wrapper is None else {wrapper: weights, "epoch": 3}, tmp_path / "ckpt.pt")
    state = load_state_dict(tmp_path / "ckpt.pt")
    assert set(state) == {"w"} and torch.equal(state["w"], weights["w"])


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_a_missing_key_is_an_input_error_naming_it(tmp_path, suffix):
    path = tmp_path / f"ckpt{suffix}"
    (save_file if suffix == ".safetensors" else torch.save)({"w": torch.zeros(2)}, str(path))
    with pytest.raises(InputError, match="no entry 'ema'"):
        load_state_dict(path, key="ema")


def test_arbitrary_pickles_are_refused(tmp_path):
    torch.save({"w": torch.zeros(2), "obj": InputError("not a tensor")}, tmp_path / "evil.pt")
    with pytest.raises(InputError, match="refusing to unpickle"):
        load_state_dict(tmp_path / "evil.pt")


def test_a_failing_load_is_a_config_error_naming_what_where_and_why(tmp_path):
    bad = tmp_path / "head.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(Exception) as direct:  # the library's own failure, for comparison
        torch.load(str(bad), weights_only=True)
    with pytest.raises(ConfigError) as err:
        with loading(f"the head '{bad}'", field="kwargs.head"):
            torch.load(str(bad), weights_only=True)
    cause = direct.value
    assert str(err.value) == f"field 'kwargs.head': cannot load the head '{bad}': {type(cause).__name__}: {cause}"
    assert err.value.field == "kwargs.head" and type(err.value.__cause__) is type(cause)
    with pytest.raises(ConfigError, match=r"^field 'model_path': cannot fetch 'x/y' from the hub: OSError: offline$"):
        with loading("'x/y' from the hub", verb="fetch"):
            raise OSError("offline")


def test_a_config_error_inside_a_load_passes_through_unchanged():
    inner = ConfigError("'x' is a 'gpt2' model", field="kwargs.base_model")
    with pytest.raises(ConfigError) as err:
        with loading("the VLM 'x'"):
            raise inner
    assert err.value is inner
