"""The system report decodes sysfs correctly and says what is missing instead of failing."""

import pytest
from conftest import H100_RESOURCE
from hypothesis import given
from hypothesis import strategies as st

from helpers.measure import sysinfo


def test_parse_resource_h100():
    bars = sysinfo.parse_resource(H100_RESOURCE)
    assert [b.index for b in bars] == [0, 2, 4]
    assert [b.size for b in bars] == [16 << 20, 128 << 30, 32 << 20]
    assert all(b.is_64bit and b.prefetchable and not b.is_io for b in bars)


def test_parse_resource_io_and_rom():
    text = "0x0000e000 0x0000e07f 0x00040101\n" + "0x0 0x0 0x0\n" * 5 + "0xfb000000 0xfb07ffff 0x00046200\n"
    bars = sysinfo.parse_resource(text)
    assert bars[0].is_io and bars[0].size == 128 and bars[0].kind == "I/O ports"
    assert bars[1].index == 6 and bars[1].kind == "expansion ROM"


@pytest.mark.parametrize("bad", ["0x1 0x2", "zz 0x2 0x3", "0x1 0x2 0x3 0x4"])
def test_parse_resource_rejects_garbage(bad):
    with pytest.raises(ValueError, match="resource line 0"):
        sysinfo.parse_resource(bad)


@given(st.integers(0, 2**47), st.integers(0, 40), st.booleans(), st.booleans())
def test_bar_size_and_flags_roundtrip(start, log_size, pref, is64):
    size = 1 << log_size
    flags = sysinfo.IORESOURCE_MEM | (sysinfo.IORESOURCE_PREFETCH if pref else 0) | (
        sysinfo.IORESOURCE_MEM_64 if is64 else 0)
    (bar,) = sysinfo.parse_resource(f"{start:#x} {start + size - 1:#x} {flags:#x}")
    assert (bar.size, bar.prefetchable, bar.is_64bit) == (size, pref, is64)


def test_collect_from_fake_tree(fake_sysfs, tmp_path, no_gpu):
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia0").write_text("")
    r = sysinfo.collect(fake_sysfs, dev, tmp_path / "proc")
    (g,) = r.gpus  # the network card is not a display device
    assert g.pci_id == "10de:2330" and g.driver == "nvidia" and g.numa_node is None
    assert g.link_current == "32.0 GT/s PCIe x16"
    assert all(b.write_combine_file for b in g.bars)
    assert r.nvidia_module == "580.159.04"
    assert r.dev_nvidia == [str(dev / "nvidia0")] and r.dev_dri == []
    assert any("/dev/dri" in a for a in r.absent) and any("CUDA not usable" in a for a in r.absent)
    assert r.iommu.startswith("none")


def test_collect_empty_machine(tmp_path, no_gpu):
    r = sysinfo.collect(tmp_path / "sys", tmp_path / "dev", tmp_path / "proc")
    assert r.gpus == [] and r.nvidia_module is None
    assert len(r.absent) >= 4
    text = sysinfo.rows(r)
    assert any(item == "CUDA" and "not usable" in value for item, value, _ in text)


def test_report_dict_roundtrip(fake_sysfs, tmp_path, no_gpu):
    r = sysinfo.collect(fake_sysfs, tmp_path, tmp_path)
    back = sysinfo.from_dict(r.as_dict())
    assert back.gpus[0].bars == r.gpus[0].bars and back.gpus[0].pci_id == "10de:2330"
    assert "128 GiB" in sysinfo.bar_summary(back, 80 << 30)


@pytest.mark.parametrize("link,gbps", [("32.0 GT/s PCIe x16", 63.015), ("16.0 GT/s PCIe x16", 31.508),
                                       ("8.0 GT/s PCIe x8", 7.877), ("2.5 GT/s PCIe x16", 4.0),
                                       ("5.0 GT/s PCIe x1", 0.5)])
def test_link_gbps(link, gbps):
    assert sysinfo.link_gbps(link) == pytest.approx(gbps, rel=1e-3)


@pytest.mark.parametrize("link", [None, "", "Unknown", "32.0 GT/s PCIe"])
def test_link_gbps_unknown(link):
    assert sysinfo.link_gbps(link) is None


@pytest.mark.parametrize("n,text", [(0, "0 B"), (1023, "1023 B"), (16 << 20, "16 MiB"), (None, "unlimited"),
                                    (1536, "1.5 KiB"), (128 << 30, "128 GiB")])
def test_fmt_bytes(n, text):
    assert sysinfo.fmt_bytes(n) == text


# /proc/driver/nvidia/gpus/<address>/information as the driver writes it (nv_procfs_read_gpu_info in
# kernel-open/nvidia/nv-procfs.c: "Key: \t value" lines). The values are those of a published capture
# from an H100 80GB HBM3 (the bibliography's h100-config-dump), not of the course's machines.
H100_INFORMATION = (
    "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 10\nGPU UUID: \t GPU-9221d5d1-b60b-a624-bf14-0a1819cfda3b\n"
    "Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t 0000:62:00.0\nDevice Minor: \t 5\nGPU Firmware: \t 535.129.03\nGPU Excluded:\t No\n")


def test_gsp_firmware_read_from_the_information_file():
    assert sysinfo.gsp_firmware(H100_INFORMATION) == "535.129.03"
    without_gsp = H100_INFORMATION.replace("535.129.03", "N/A")
    assert sysinfo.gsp_firmware(without_gsp) == "N/A"
    assert sysinfo.gsp_firmware_text("N/A").startswith("N/A: the driver reports no GSP firmware")
    # absent file, absent line, or an empty value: reported as absent, never a made-up version
    for text in (None, "", H100_INFORMATION.replace("GPU Firmware: \t 535.129.03\n", ""),
                 H100_INFORMATION.replace(" 535.129.03", "")):
        assert sysinfo.gsp_firmware(text) is None
    assert sysinfo.gsp_firmware_text(None).startswith("not reported")
    # the Video BIOS version is not the firmware version
    assert sysinfo.gsp_firmware("Video BIOS: \t 96.00.99.00.01\n") is None


def test_collect_reports_the_gsp_firmware_row(fake_sysfs, tmp_path, no_gpu):
    proc = tmp_path / "proc"
    info = proc / "driver" / "nvidia" / "gpus" / "0000:00:06.0"
    r = sysinfo.collect(fake_sysfs, tmp_path, proc)
    assert r.gpus[0].gsp_firmware is None
    assert dict((k.strip(), v) for k, v, _ in sysinfo.rows(r))["GSP firmware"].startswith("not reported")
    info.mkdir(parents=True)
    (info / "information").write_text(H100_INFORMATION)
    r = sysinfo.collect(fake_sysfs, tmp_path, proc)
    assert r.gpus[0].gsp_firmware == "535.129.03"
    assert dict((k.strip(), v) for k, v, _ in sysinfo.rows(r))["GSP firmware"] == "535.129.03"
    back = sysinfo.from_dict(r.as_dict())
    assert back.gpus[0].gsp_firmware == "535.129.03"
    old = r.as_dict()
    del old["gpus"][0]["gsp_firmware"]  # a report recorded before the field existed
    assert sysinfo.from_dict(old).gpus[0].gsp_firmware is None


# Captured on the course's H200 machine (a VM, open module 580.159.04) on 2026-11-28 with
# `cat /proc/driver/nvidia/gpus/*/information`; `nvidia-smi -q` there said "GSP Firmware Version : 580.159.04".
H200_INFORMATION = (
    "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-8e40d347-45de-ab6d-d89d-4c535cafe1e4\n"
    "Video BIOS: \t 96.00.a5.00.1a\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t 0000:00:06.0\nDevice Minor: \t 0\nGPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n")


def test_gsp_firmware_of_the_course_s_h200_capture():
    assert sysinfo.gsp_firmware(H200_INFORMATION) == "580.159.04"
    assert sysinfo.gsp_firmware_text(sysinfo.gsp_firmware(H200_INFORMATION)) == "580.159.04"
