"""The training decode: JPEGs through TorchCodec's decode_jpeg where installed (else PIL), the same pixels as PIL's."""

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data.fileset import decode_file, decode_whole, jpeg_components
from semcl.errors import DataError


def _photo(h=45, w=60):
    """A smooth colour field with some noise: JPEG's chroma subsampling and IDCT have work to do."""
    yy, xx = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(0)
    img = np.stack([127 + 80 * np.sin(xx / 7 + c) * np.cos(yy / 5 - c) for c in range(3)], axis=-1)
    return np.clip(img + rng.normal(0, 10, img.shape), 0, 255).astype(np.uint8)


@pytest.mark.parametrize(("mode", "kw"), [
    ("RGB", dict(quality=90)),  # 4:2:0
    ("RGB", dict(quality=75, subsampling=0)),  # 4:4:4
    ("RGB", dict(quality=85, progressive=True)),
    ("L", dict(quality=90)),  # grey: three equal channels, as PIL's convert("RGB")
])
def test_jpegs_decode_to_pils_pixels(tmp_path, mode, kw):
    path = tmp_path / "a.jpg"
    Image.fromarray(_photo()).convert(mode).save(path, "JPEG", **kw)
    assert jpeg_components(path.read_bytes()) == (1 if mode == "L" else 3)
    got = decode_whole(path)
    assert got.dtype == torch.uint8 and got.shape == (3, 45, 60)
    assert torch.equal(got, decode_file(path))  # PIL: open, convert("RGB")


def test_other_files_go_through_pil_and_a_damaged_jpeg_is_one_line(tmp_path):
    png, cmyk = tmp_path / "a.png", tmp_path / "c.jpg"
    Image.fromarray(_photo()).save(png)
    Image.fromarray(_photo()).convert("CMYK").save(cmyk, "JPEG")
    assert jpeg_components(png.read_bytes()) is None and jpeg_components(cmyk.read_bytes()) == 4
    assert torch.equal(decode_whole(png), torch.from_numpy(_photo()).permute(2, 0, 1))
    assert torch.equal(decode_whole(cmyk), decode_file(cmyk))
    bad = tmp_path / "cut.jpg"
    Image.fromarray(_photo()).save(bad, "JPEG")
    bad.write_bytes(bad.read_bytes()[:300])
    with pytest.raises(DataError) as err:
        decode_whole(bad)
    assert str(err.value).startswith(f"{bad}: cannot decode image") and "\n" not in str(err.value)
    with pytest.raises(DataError, match="cannot decode image"):
        decode_whole(tmp_path / "absent.jpg")
