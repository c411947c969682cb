"""The CPU image and training-image/Dockerfile cannot drift silently: the built image's config
(Entrypoint, Cmd, User, WorkingDir, Env) is the Dockerfile's, its user is the Dockerfile's
useradd, its code the Dockerfile's COPYs; and a Dockerfile instruction the builder does not
repeat stops the build naming it."""

from __future__ import annotations

import pytest

from tests.containers import image as image_build


def test_the_built_image_config_is_the_dockerfiles(image):
    spec = image_build.read_dockerfile()
    config = image.config()
    assert config["Entrypoint"] == spec.entrypoint == ["python", "-m", "elastic_trainer.launcher"]
    assert config["Cmd"] == spec.cmd
    assert config["User"] == spec.user == "10001:10001"
    assert config["WorkingDir"] == spec.workdir
    env = dict(item.split("=", 1) for item in config["Env"])
    assert {k: env.get(k) for k in spec.env} == spec.env and spec.env["PYTHONPATH"] == "/workspace"
    # the runtime bundle umoci made from it runs the same process as the same user
    process = image.runtime_config()["process"]
    assert process["args"] == [*spec.entrypoint, *spec.cmd]
    assert (process["user"]["uid"], process["user"]["gid"]) == (10001, 10001)
    passwd = (image.rootfs / "etc" / "passwd").read_text()
    assert "trainer:x:10001:10001::/home/trainer:/usr/sbin/nologin" in passwd
    for _, target in spec.copies:
        shipped = image.rootfs / target.lstrip("/")
        assert (shipped / "__init__.py").is_file() or any(shipped.iterdir()), target
        assert shipped.stat().st_uid == 0 and not shipped.stat().st_mode & 0o022, target
    assert len(image.layers()) == 3  # Debian, the Python packages, the code


def test_an_instruction_the_builder_does_not_repeat_stops_it(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    original = image_build.DOCKERFILE.read_text()
    dockerfile.write_text(original.replace("USER 10001:10001", "RUN apt-get install -y curl\nUSER 10001:10001"))
    with pytest.raises(image_build.ImageError, match="RUN 'apt-get install -y curl' is not repeated"):
        image_build.read_dockerfile(dockerfile)
    dockerfile.write_text(original + "\nEXPOSE 8080\n")
    with pytest.raises(image_build.ImageError, match="EXPOSE is not repeated"):
        image_build.read_dockerfile(dockerfile)


def test_the_pins_come_from_pyproject():
    assert image_build.train_pins() == ["torch==2.13.0", "numpy==2.4.6"]
