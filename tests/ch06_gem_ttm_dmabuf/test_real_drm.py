"""Chapter 6's real DRM walkthrough: what the recorded run in the VM shows, and its replay."""

from __future__ import annotations

import pytest

from helpers.ch06_gem_ttm_dmabuf import real_drm
from helpers.core.mode import Mode


@pytest.fixture(scope="module")
def ev():
    from helpers import course

    return course.start("test", quiet=True).get("real_drm.gem_prime", recorded=True)


def test_replay_names_the_kernel_qemu_and_device(ev):
    assert ev.mode is Mode.REPLAY
    assert ev.source.startswith("Linux 6.") and "under QEMU" in ev.source and "virtio-gpu-pci" in ev.source
    assert ev.provenance["kernel_release"] in ev.data["kernel_version"]


@pytest.mark.parametrize("driver, exporter", [("vgem", "drm"), ("virtio_gpu", "virtio_gpu")])
def test_the_walkthrough_shows_gem_and_prime_semantics(ev, driver, exporter):
    dev = next(d for d in ev.data["devices"] if d["driver"] == driver)
    f = real_drm.facts(dev)
    assert f["handles"] == [1, 2]  # per-file handles start at 1
    assert f["pitch"] == 256 * 4 and f["size"] == 256 * 256 * 4
    assert f["fake_offset"] >= 1 << 32 and f["second_offset"] > f["fake_offset"]  # DRM_FILE_PAGE_OFFSET_START
    assert f["readback_ok"] and f["same_dma_buf"] and f["import_same_handle"] and f["sync_ok"]
    assert f["dma_buf_link"].startswith("/dmabuf:") and f["exp_name"] == exporter and f["name"] == "course-buf"
    assert f["maps_shows_name"]
    assert f["gem_open_size"] == 640 * 480 * 4 and f["flink_name"] > 0
    assert f["second_close"] == "Invalid argument" and f["mapping_after_close_ok"]


def test_the_table_has_one_column_per_driver(ev):
    t = real_drm.table(ev)
    assert t.headers == ("step", "vgem", "virtio_gpu") and "REPLAY" in t.caption
    assert "course-buf" in real_drm.bufinfo(ev, "vgem")


def test_without_dev_dri_the_host_probe_says_why(monkeypatch):
    from pathlib import Path

    real_is_dir = Path.is_dir
    monkeypatch.setattr(Path, "is_dir", lambda self: False if str(self) == "/dev/dri" else real_is_dir(self))
    assert "no /dev/dri" in real_drm.on_this_machine()
