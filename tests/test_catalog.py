"""The catalog: lookups by EC2 and SageMaker names, prices per service, and sources for every number."""

from __future__ import annotations

import pytest

from nbtoolkit.hardware import catalog


def test_ec2_and_sagemaker_names_share_hardware_but_not_prices():
    ec2, sagemaker = catalog.instance("p4d.24xlarge"), catalog.instance("ml.p4d.24xlarge")
    assert (ec2.devices, ec2.accelerator, ec2.memory_gib, ec2.vcpus) == (8, "A100-40GB", 1152, 96)
    assert sagemaker.devices == ec2.devices and sagemaker.sagemaker and not ec2.sagemaker
    assert catalog.hourly_price("p4d.24xlarge") == pytest.approx(32.7726)
    assert catalog.hourly_price("ml.p4d.24xlarge") == pytest.approx(37.688)


def test_the_four_instances_of_the_fit_table():
    found = {
        name: (catalog.instance(name).devices, catalog.instance(name).device.name)
        for name in ("p3.8xlarge", "p3.16xlarge", "g5.24xlarge", "p4d.24xlarge")
    }
    assert found == {
        "p3.8xlarge": (4, "V100-16GB"),
        "p3.16xlarge": (8, "V100-16GB"),
        "g5.24xlarge": (4, "A10G"),
        "p4d.24xlarge": (8, "A100-40GB"),
    }


def test_accelerator_lookup_ignores_case_and_punctuation():
    assert catalog.accelerator("a100 40gb").name == "A100-40GB"
    a10g = catalog.accelerator("A10G")
    assert a10g.memory_bytes == int(22.5 * 2**30)  # ECC reserves 1/16 of GDDR6
    assert a10g.peak_flops("bf16") == 125e12


def test_no_bf16_falls_back_to_the_fp32_peak():
    v100 = catalog.accelerator("V100-16GB")
    assert not v100.bf16 and v100.peak_flops("bf16") == v100.peak_flops("fp32") == 15.7e12
    assert v100.peak_flops("fp16") == 125e12


def test_unknown_names_suggest_close_ones():
    with pytest.raises(catalog.CatalogError, match="did you mean p4d.24xlarge"):
        catalog.instance("p4dn.24xlarge")  # seed 003's spelling
    with pytest.raises(catalog.CatalogError, match="accelerator 'B300' is not in the catalog"):
        catalog.accelerator("B300")
    assert catalog.hourly_price("m5.large") is None  # unknown: no price, no error for listings


def test_every_entry_is_complete_and_cited():
    accelerators = catalog.accelerators()
    assert {a.name for a in accelerators} >= {
        "V100-16GB",
        "V100-32GB",
        "T4",
        "A10G",
        "L4",
        "A100-40GB",
        "A100-80GB",
        "H100-80GB",
        "H200",
        "Trainium-NeuronCore",
    }
    assert all(a.source.startswith("https://") and a.peak_tflops.fp32 > 0 for a in accelerators)
    assert all(a.peak_tflops.bf16 for a in accelerators if a.bf16)
    for name in catalog.instance_names() + catalog.instance_names(sagemaker=True):
        entry = catalog.instance(name)
        assert entry.device.name == entry.accelerator and entry.devices >= 1 and entry.memory_gib > 0
    families = {name.split(".")[0] for name in catalog.instance_names()}
    assert families >= {"p3", "p3dn", "p4d", "p4de", "p5", "g5", "g6", "trn1", "trn1n"}
    assert "us-east-1" in catalog.prices_note() and "as of 20" in catalog.prices_note()
