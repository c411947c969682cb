"""The image's OCI archive is what a node's containerd imports (issue 31: the tier imports the CPU
variant into containerd, no registry): `ctr -n k8s.io images import` of the archive files it under
image_ref(), unpacks its three zstd layers, and a container of it runs the image's config (user
10001, its Env) on a read-only root with the pinned torch and the package's launcher."""

from __future__ import annotations

import json

import pytest

from tests.containers import containerd
from tests.containers import image as image_build

pytestmark = pytest.mark.slow


@pytest.fixture
def ctrd(tmp_path):
    try:
        with containerd.throwaway(tmp_path) as c:
            yield c
    except containerd.ContainerdError as err:
        pytest.fail(f"the container tier cannot start: {err}")


def test_containerd_imports_the_archive_and_runs_it_as_the_images_user(image, ctrd):
    ctrd.import_image(image)
    ref = image_build.image_ref()
    listed = ctrd.ctr("images", "ls").stdout
    assert ref in listed and "linux/amd64" in listed, listed
    # unpacked for the default snapshotter (what a pod's container starts from): every layer's
    # uncompressed digest is a committed snapshot's chain
    assert ctrd.ctr("images", "check").stdout.count("complete") >= 1
    probe = ("import os, json, torch, elastic_trainer.launcher as l; "
             "print(json.dumps({'ids': [os.getuid(), os.getgid()], 'torch': torch.__version__, "
             "'launcher': l.__file__, 'cwd': os.getcwd(), 'path': os.environ['PYTHONPATH']}))")
    out = json.loads(ctrd.run(ref, "python", "-c", probe).stdout.strip().splitlines()[-1])
    pin = next(p for p in image_build.train_pins() if p.startswith("torch=="))
    assert out.pop("torch").split("+")[0] == pin.split("==")[1]
    assert out == {"ids": [10001, 10001], "cwd": "/workspace", "path": "/workspace",
                   "launcher": f"/{image_build.SITE_PACKAGES}/elastic_trainer/launcher.py"}
    # the entrypoint itself, with the image's CMD (--help)
    assert "--rdzv_backend" in ctrd.run(ref).stdout


def test_the_layers_are_zstd_and_the_index_names_the_image(image):
    index = json.loads((image.layout / "index.json").read_text())
    (manifest,) = index["manifests"]
    assert manifest["annotations"]["io.containerd.image.name"] == image_build.image_ref()
    assert [layer["mediaType"] for layer in image.layers()] == [image_build.LAYER_MEDIA_TYPE] * 3
    for layer in image.layers():
        blob = image.layout / "blobs" / "sha256" / layer["digest"].split(":")[1]
        assert blob.stat().st_size == layer["size"]
        with open(blob, "rb") as f:
            assert f.read(4) == b"\x28\xb5\x2f\xfd"  # zstd's frame magic
