"""Small code corrections found while re-reading the cards against the code (issue 16)."""

from __future__ import annotations

import pytest

from rewardzoo.errors import ConfigError


@pytest.mark.parametrize("quality", [0, 101, 95.0, "95"])
def test_jpeg_quality_is_a_config_error_naming_the_option(quality):
    from rewardzoo.rewards.image.jpeg import JpegCompressibility, JpegIncompressibility

    for cls in (JpegCompressibility, JpegIncompressibility):
        with pytest.raises(ConfigError, match="kwargs.quality") as info:
            cls(quality=quality)
        assert info.value.field == "kwargs.quality"
